"""Privacy gates, secret scrubbing, JSON-preserving truncation and canonical argument hashing.

Nothing a user typed, a model answered or a tool read or wrote leaves the machine unless the user opts in
(:class:`ContentPolicy`, off by default). When content is captured it is scrubbed of obvious secrets
(:func:`scrub`) and cut to a bounded length (:func:`truncate`, :func:`capture_json`) first.

:func:`argument_hash` is separate from capture: it is computed for every tool call, whatever the policy,
so repeated identical tool calls can be detected without exporting their arguments.

Everything here is pure (no I/O, no clock) and cheap: it runs once per tool call during a backfill of
hundreds of thousands of events.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "CAPTURE_ENV",
    "CAPTURE_MODES",
    "CAPTURE_MODES_HELP",
    "EMIT_EVENT_ENV",
    "KIND_ENV",
    "MASTER_KINDS",
    "MAX_LENGTH_ENV",
    "REDACTED",
    "ContentKind",
    "ContentPolicy",
    "argument_hash",
    "capture_json",
    "capture_text",
    "scrub",
    "shrink",
    "truncate",
]

REDACTED = "[REDACTED]"
# Appended (as a dict entry, or as a one-entry dict in a list) where capture_json dropped items.
TRUNCATED_KEY = "…"
TRUNCATED_VALUE = "truncated"

# The smallest COPILOT_OTEL_CONTENT_MAX_LENGTH we accept: below this even the truncation marker dominates.
MIN_MAX_LENGTH = 16
# Characters per captured value unless COPILOT_OTEL_CONTENT_MAX_LENGTH says otherwise.
DEFAULT_MAX_LENGTH = 4_096
# Per-leaf cap inside capture_json is max_length // 4, but never below this many characters.
MIN_LEAF_LENGTH = 64
# Only this many characters past the point we keep are scrubbed: a secret that straddles the cut is still
# recognised unless it is longer than this, and a multi-megabyte tool result costs no more than a small one.
_SCRUB_MARGIN = 4_096
# orjson refuses to serialise nesting deeper than 254; real tool arguments are a few levels deep.
_MAX_DEPTH = 64


class ContentKind(str, enum.Enum):
    """The kinds of content that can be captured, each behind its own switch."""

    PROMPTS = "prompts"
    RESPONSES = "responses"
    TOOL_ARGUMENTS = "tool_arguments"
    TOOL_RESULTS = "tool_results"
    SYSTEM_PROMPT = "system_prompt"
    REASONING = "reasoning"


# What the master switch turns on. The system prompt and model reasoning are large and rarely wanted,
# so they need their own switch.
_MASTER_KINDS = frozenset(
    {ContentKind.PROMPTS, ContentKind.RESPONSES, ContentKind.TOOL_ARGUMENTS, ContentKind.TOOL_RESULTS}
)

MASTER_KINDS = _MASTER_KINDS

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
EMIT_EVENT_ENV = "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT"
MAX_LENGTH_ENV = "COPILOT_OTEL_CONTENT_MAX_LENGTH"
KIND_ENV = {
    ContentKind.PROMPTS: "COPILOT_OTEL_CAPTURE_PROMPTS",
    ContentKind.RESPONSES: "COPILOT_OTEL_CAPTURE_RESPONSES",
    ContentKind.TOOL_ARGUMENTS: "COPILOT_OTEL_CAPTURE_TOOL_ARGUMENTS",
    ContentKind.TOOL_RESULTS: "COPILOT_OTEL_CAPTURE_TOOL_RESULTS",
    ContentKind.SYSTEM_PROMPT: "COPILOT_OTEL_CAPTURE_SYSTEM_PROMPT",
    ContentKind.REASONING: "COPILOT_OTEL_CAPTURE_REASONING",
}

# Master switch value (its boolean forms normalised to "true"/"false" by the settings table's one boolean parser)
# -> (capture, on_spans, on_events). The legacy "true" puts content on spans, as the Copilot CLI does. on_events
# is also the default of OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT (util-genai: true for EVENT_ONLY/SPAN_AND_EVENT).
CAPTURE_MODES: dict[str, tuple[bool, bool, bool]] = {
    "false": (False, True, False),
    "no_content": (False, True, False),
    "true": (True, True, False),
    "span_only": (True, True, False),
    "event_only": (True, False, True),
    "span_and_event": (True, True, True),
}
CAPTURE_MODES_HELP = "true, false, NO_CONTENT, SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT"


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    """Which content may be captured, how long each value may be, and where it goes.

    The default captures nothing.

    Attributes:
        enabled: The kinds of content that may be captured; empty means none.
        max_length: The maximum number of characters kept per captured value (plus a truncation marker).
        on_spans: Put captured content on span attributes.
        on_events: Emit a ``gen_ai.client.inference.operation.details`` log event per model call, carrying
            its captured input and output messages (the only content that goes on events).
    """

    enabled: frozenset[ContentKind] = frozenset()
    max_length: int = DEFAULT_MAX_LENGTH
    on_spans: bool = True
    on_events: bool = False

    def __post_init__(self) -> None:
        # Accept any iterable of kinds or their string values; store a frozenset of ContentKind.
        object.__setattr__(self, "enabled", frozenset(ContentKind(kind) for kind in self.enabled))
        if self.max_length < MIN_MAX_LENGTH:
            raise ValueError(f"max_length must be at least {MIN_MAX_LENGTH}, got {self.max_length!r}")

    def allows(self, kind: ContentKind) -> bool:
        """Return whether content of ``kind`` may be captured."""
        return kind in self.enabled

    @classmethod
    def build(
        cls,
        mode: str,
        emit_event: bool | None,
        switches: Mapping[ContentKind, bool | None],
        max_length: int,
    ) -> ContentPolicy:
        """The policy of parsed settings: a master ``mode`` (a key of :data:`CAPTURE_MODES`), the details-event
        switch and the per-kind switches (``None`` = not set: follow the master), as
        :attr:`copilot_otel.settings.config.Config.content` reads them.
        """
        capture, on_spans, on_events = CAPTURE_MODES[mode]
        if emit_event is False:
            on_events = False
        enabled = set(_MASTER_KINDS) if capture else set()
        for kind, switch in switches.items():
            if switch is True:
                enabled.add(kind)
            elif switch is False:
                enabled.discard(kind)
        if not (on_spans or on_events):
            enabled.clear()  # nowhere to put it: say so rather than capture what nothing will send
        return cls(enabled=frozenset(enabled), max_length=max_length, on_spans=on_spans, on_events=on_events)


# --- scrubbing ------------------------------------------------------------------------------------------

# Key names whose values are secrets end in password, passwd, secret (client_secret), token, api_key / apikey,
# access_key or private_key, optionally followed by "key" (SECRET_KEY, tokenKey), so that max_tokens,
# token_count, password_hash or tokenizer are left alone.
_KEYWORD = r"(?:passw(?:or)?d|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)(?:[_-]?key)?"
_KEYWORD_NEEDLES = (
    "passw",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "accesskey",
    "access_key",
    "access-key",
    "privatekey",
    "private_key",
    "private-key",
)
# The separator: the closing quote of a quoted key (maybe JSON-escaped), then ":", ":=" or "=" (not "==").
_SEPARATOR = r"""\\?["']?[ \t]*(?::=?|=(?!=))"""
# A keyword that ends a key and is followed by a separator. Searched in the lower-cased text, which is much
# faster than re.IGNORECASE; _KEY_END_I is the fallback for the rare text whose length changes on lower().
_KEY_END = re.compile(rf"{_KEYWORD}(?!\w)(?={_SEPARATOR})")
_KEY_END_I = re.compile(_KEY_END.pattern, re.IGNORECASE)
_SECRET_KEY_RE = re.compile(rf"{_KEYWORD}\Z")
_VALUE = re.compile(
    rf"""
    (?P<sep>{_SEPARATOR}[ \t]*)
    (?:
        (?P<dq>")(?P<dqv>(?:[^"\\\n]|\\.)*)"           # "value"
      | (?P<sq>')(?P<sqv>(?:[^'\\\n]|\\.)*)'           # 'value'
      | (?P<eq>\\")(?P<eqv>(?:[^"\\\n]|\\[^"\n])*)\\"  # \"value\" inside a JSON-encoded string
      | (?P<bare>[^\s"'`,;&|<>(){{}}\[\]\\]+)          # value
    )
    """,
    re.VERBOSE,
)

# Unquoted values that are code or placeholders, not secrets: type annotations (`token: str`) and literals.
_NOT_A_SECRET = frozenset(
    {
        "true", "false", "null", "none", "nil", "undefined",
        "str", "string", "bytes", "int", "bool", "boolean", "float", "number", "any", "object",
        "secretstr", "optional", "required",
    }
)  # fmt: skip


def _key_start(text: str, end: int) -> int:
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
        start -= 1
    return start


def _last_name(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1].lstrip("_").lower()


def _redacted_value(text: str, key_start: int, key_end: int, value: re.Match[str]) -> str | None:
    """The replacement for ``value`` (separator included), or ``None`` to leave it alone."""
    sep = value["sep"]
    for group in ("dq", "sq", "eq"):
        quote = value[group]
        if quote is not None:
            if value[group + "v"] in ("", REDACTED):
                return None
            return f"{sep}{quote}{REDACTED}{quote}"
    bare = value["bare"]
    key = text[_key_start(text, key_start) : key_end]
    if (
        bare.lower() in _NOT_A_SECRET
        or bare.startswith(("$", "%"))  # $TOKEN, ${{ secrets.X }}, %TOKEN%
        or text[value.end() : value.end() + 1] in ("(", "[")  # get_token(), os.environ["X"]
        or (len(bare) < 4 and bare.lstrip("-").isdigit())  # token = 0, retries = -1
        # token=token, password=args.password, self.token = self._token
        or _last_name(bare) == _last_name(key)
    ):
        return None
    return f"{sep}{REDACTED}"


def _scrub_key_values(text: str, lowered: str) -> str:
    """Redact the values of ``key=value``, ``"key": "value"`` and ``KEY: value`` pairs with secret keys."""
    finder, haystack = (_KEY_END, lowered) if len(lowered) == len(text) else (_KEY_END_I, text)
    pieces: list[str] = []
    done = 0
    for key in finder.finditer(haystack):
        if key.start() < done:  # inside a value we already redacted
            continue
        value = _VALUE.match(text, key.end())
        if value is None:
            continue
        replacement = _redacted_value(text, key.start(), key.end(), value)
        if replacement is not None:
            pieces += (text[done : key.end()], replacement)
            done = value.end()
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def _sub(pattern: str, replacement: str, flags: int = 0) -> Callable[[str, str], str]:
    compiled = re.compile(pattern, flags)
    return lambda text, _lowered: compiled.sub(replacement, text)


# (case-sensitive needles, case-insensitive needles, function of (text, lower-cased text)). A rule runs only
# when one of its needles occurs (case-insensitive ones are looked up in the lower-cased text), so text with
# nothing secret-looking costs a few substring searches. Every pattern is linear: the classes on either side
# of each repetition are disjoint, or the repetition is bounded. Specific token formats come first; the
# generic key/value rule then leaves already redacted values alone.
_RULES: tuple[tuple[tuple[str, ...], tuple[str, ...], Callable[[str, str], str]], ...] = (
    (
        ("-----BEGIN",),
        (),
        _sub(
            # A block cut off before its END line is redacted to the end of the text.
            r"(-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)[\s\S]*?"
            r"(-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
            rf"\1{REDACTED}\2",
        ),
    ),
    (("eyJ",), (), _sub(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", REDACTED)),
    (
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        (),
        _sub(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})", REDACTED),
    ),
    (("sk-",), (), _sub(r"\bsk-[A-Za-z0-9_-]{32,}", REDACTED)),  # OpenAI sk-, sk-proj-; Anthropic sk-ant-
    (("AKIA", "ASIA"), (), _sub(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", REDACTED)),
    (("xox",), (), _sub(r"\bxox[baprs]-[A-Za-z0-9-]{10,}", REDACTED)),
    (("AIza",), (), _sub(r"\bAIza[A-Za-z0-9_-]{35}", REDACTED)),
    (
        (),
        ("authorization",),
        _sub(
            r"""(authorization\\?["']?[ \t]*[:=][ \t]*\\?["']?[ \t]*"""
            r"""(?:(?:bearer|basic|token|digest|negotiate)[ \t]+)?)[^\s"'\\,]+""",
            rf"\1{REDACTED}",
            re.IGNORECASE,
        ),
    ),
    # A bare "Bearer <token>" outside an Authorization header; the token must look random (has a digit).
    (
        ("Bearer ",),
        (),
        _sub(r"\b(Bearer[ \t]+)(?=[A-Za-z._~+/-]{0,200}\d)[A-Za-z0-9._~+/-]{16,}=*", rf"\1{REDACTED}"),
    ),
    # scheme://user:password@host -> scheme://user:[REDACTED]@host
    (("://",), (), _sub(r"(://[^\s:/@]*:)[^\s/@?#]+@", rf"\1{REDACTED}@")),
    ((), _KEYWORD_NEEDLES, _scrub_key_values),
)


def scrub(text: str) -> str:
    """Replace obvious secrets in ``text`` with ``[REDACTED]``, keeping key names where there are any.

    Recognised: GitHub tokens, OpenAI/Anthropic keys, AWS access key ids, Slack tokens, Google API keys,
    JWTs, PEM private key blocks, ``Authorization`` header credentials, passwords in URLs, and the values of
    ``key=value`` / ``"key": "value"`` / ``KEY: value`` pairs whose key names a password, secret, token,
    API key, access key or private key. This is a safety net for opted-in content, not a guarantee.
    """
    lowered: str | None = None  # text.lower(), computed once unless a rule changes the text
    for needles, lower_needles, rule in _RULES:
        if needles and not any(needle in text for needle in needles):
            continue
        if lower_needles:
            if lowered is None:
                lowered = text.lower()
            if not any(needle in lowered for needle in lower_needles):
                continue
        scrubbed = rule(text, lowered or "")
        if scrubbed != text:
            text, lowered = scrubbed, None
    return text


def truncate(text: str, max_length: int) -> str:
    """Keep the first ``max_length`` characters of ``text`` and say how many were dropped.

    The result is ``text`` itself when it fits, else ``text[:max_length] + "…[truncated N chars]"``.
    """
    if len(text) <= max_length:
        return text
    return f"{text[:max_length]}…[truncated {len(text) - max_length} chars]"


def shrink(text: str, max_length: int) -> str:
    """Captured ``text`` cut again to about ``max_length`` characters, with the truncation marker; a JSON object or
    array stays valid JSON (its trailing items give way, as in :func:`capture_json`).

    The exporter's last resort (:mod:`copilot_otel.deliver.export`) for a record larger than a collector takes in one
    request: only already captured (scrubbed) content is cut, never anything added.
    """
    if len(text) <= max_length:
        return text
    value = _maybe_json(text)
    if value is not text:
        fitted = _fit(value, max_length)
        if fitted is not _DROP:
            return _dumps(fitted)
    return truncate(text, max_length)


def _scrub_truncate(text: str, max_length: int) -> str:
    """``truncate(scrub(text), max_length)``, scrubbing only what can end up in the result (plus a margin)."""
    cut = max_length + _SCRUB_MARGIN
    if len(text) <= cut:
        return truncate(scrub(text), max_length)
    head = scrub(text[:cut])
    return f"{head[:max_length]}…[truncated {max(len(head) - max_length, 0) + len(text) - cut} chars]"


def _utf8_safe(text: str) -> str:
    """Replace lone surrogates, which neither orjson nor OTLP can encode."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def capture_text(text: str | None, kind: ContentKind, policy: ContentPolicy) -> str | None:
    """Return ``text`` scrubbed and cut to ``policy.max_length``, or ``None`` if it may not be captured."""
    if text is None or not policy.allows(kind):
        return None
    return _utf8_safe(_scrub_truncate(text, policy.max_length))


# --- capture_json ---------------------------------------------------------------------------------------

_MARKER_ENTRY = {TRUNCATED_KEY: TRUNCATED_VALUE}
# Size of ,"…":"truncated" (in a dict) and ,{"…":"truncated"} (in a list), in characters.
_DICT_MARKER_SIZE = 1 + len(orjson.dumps(_MARKER_ENTRY).decode()) - 2
_LIST_MARKER_SIZE = 1 + len(orjson.dumps(_MARKER_ENTRY).decode())
# i64/u64 range: orjson cannot serialise integers outside it.
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def _dumps(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8")


def _maybe_json(text: str) -> object:
    """Return the parsed value if ``text`` is a JSON object or array, else ``text``."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return orjson.loads(text)
        except ValueError:  # orjson.JSONDecodeError, including lone surrogates
            pass
    return text


class _Sanitizer:
    """Copy a JSON-like value: scrubbed, leaves truncated, keys sorted, stopped once clearly over budget.

    ``remaining`` counts down a lower bound of the serialised size, so anything the walk leaves out would
    not have fitted into ``max_length`` anyway; that keeps a 100 000-item list as cheap as a short one.
    """

    __slots__ = ("leaf_length", "remaining")

    def __init__(self, max_length: int) -> None:
        self.leaf_length = max(max_length // 4, MIN_LEAF_LENGTH)
        self.remaining = max_length

    def string(self, text: str) -> str:
        text = _utf8_safe(_scrub_truncate(text, self.leaf_length))
        self.remaining -= len(text) + 2
        return text

    def value(self, value: object, depth: int = 0) -> Any:
        if value is None or isinstance(value, bool):
            self.remaining -= 4
            return value
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, int):
            self.remaining -= 1
            return value if _INT_MIN <= value <= _INT_MAX else str(value)
        if isinstance(value, float):
            self.remaining -= 1
            return value
        if isinstance(value, Mapping):
            return self.mapping(value, depth)
        if isinstance(value, (list, tuple)):
            return self.sequence(value, depth)
        return self.string(_safe_str(value))

    def mapping(self, mapping: Mapping[Any, Any], depth: int) -> Any:
        if depth >= _MAX_DEPTH:
            return self.string(TRUNCATED_KEY)
        self.remaining -= 2
        items = sorted(
            ((key if isinstance(key, str) else _safe_str(key), value) for key, value in mapping.items()),
            key=_first,
        )
        out: dict[str, Any] = {}
        for key, value in items:
            if self.remaining < 0:
                out[TRUNCATED_KEY] = TRUNCATED_VALUE
                break
            safe_key = self.string(key)
            self.remaining -= 1
            if _is_secret_key(key) and not _is_blank(value):
                out[safe_key] = self.string(REDACTED)
            else:
                out[safe_key] = self.value(value, depth + 1)
        return out

    def sequence(self, items: list[Any] | tuple[Any, ...], depth: int) -> Any:
        if depth >= _MAX_DEPTH:
            return self.string(TRUNCATED_KEY)
        self.remaining -= 2
        out: list[Any] = []
        for item in items:
            if self.remaining < 0:
                out.append(dict(_MARKER_ENTRY))
                break
            out.append(self.value(item, depth + 1))
            self.remaining -= 1
        return out


def _is_secret_key(key: str) -> bool:
    return _SECRET_KEY_RE.search(key.lower()) is not None


def _is_blank(value: object) -> bool:
    """Whether a value under a secret-looking key says nothing secret (``null``, a bool, empty)."""
    return value is None or isinstance(value, bool) or (isinstance(value, str) and value in ("", REDACTED))


def _first(item: tuple[str, Any]) -> str:
    return item[0]


def _safe_str(value: object) -> str:
    try:
        return str(value)
    except Exception:  # a broken __str__ must not stop the export
        return f"<{type(value).__qualname__}>"


def _fit(value: Any, budget: int) -> Any:
    """Return ``value`` shortened so that it serialises to at most ``budget`` characters.

    Strings are cut (with a marker); lists and dicts keep their leading items, the first item that does not
    fit is itself shortened into the room left, and a ``"…": "truncated"`` marker is added. Returns
    ``_DROP`` for a scalar that cannot fit; a container always returns at least its marker, which may be
    over a budget smaller than the marker.
    """
    if isinstance(value, str):
        return _fit_string(value, budget)
    if isinstance(value, dict):
        return _fit_dict(value, budget)
    if isinstance(value, list):
        return _fit_list(value, budget)
    return value if len(_dumps(value)) <= budget else _DROP


_DROP = object()


def _fit_string(text: str, budget: int) -> Any:
    if len(_dumps(text)) <= budget:
        return text
    if budget < 3:  # not even room for "…"
        return _DROP
    # Shrink the kept prefix by however much the candidate is over (escapes make JSON longer than text).
    prefix = budget - 2 - len(f"…[truncated {len(text)} chars]")
    while prefix >= 0:
        candidate = f"{text[:prefix]}…[truncated {len(text) - prefix} chars]"
        over = len(_dumps(candidate)) - budget
        if over <= 0:
            return candidate
        prefix -= over
    # No room for the full marker: keep what fits and end with a bare ellipsis.
    prefix = budget - 3
    while prefix >= 0:
        candidate = text[:prefix] + "…"
        over = len(_dumps(candidate)) - budget
        if over <= 0:
            return candidate
        prefix -= over
    return _DROP


def _fit_dict(mapping: dict[str, Any], budget: int) -> dict[str, Any]:
    if len(_dumps(mapping)) <= budget:
        return mapping
    room = budget - 2 - _DICT_MARKER_SIZE + 1  # braces, marker; the marker's comma is counted per entry
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if key == TRUNCATED_KEY:
            break
        key_size = len(_dumps(key)) + 1 + (1 if out else 0)
        size = key_size + len(_dumps(value))
        if size <= room - 1:
            out[key] = value
            room -= size
            continue
        if room - key_size - 1 >= 8:
            shortened = _fit(value, room - key_size - 1)
            if shortened is not _DROP and key_size + len(_dumps(shortened)) <= room - 1:
                out[key] = shortened
        break
    out[TRUNCATED_KEY] = TRUNCATED_VALUE
    return out


def _fit_list(items: list[Any], budget: int) -> list[Any]:
    if len(_dumps(items)) <= budget:
        return items
    room = budget - 2 - _LIST_MARKER_SIZE + 1
    out: list[Any] = []
    for item in items:
        if item == _MARKER_ENTRY:
            break
        sep = 1 if out else 0
        size = sep + len(_dumps(item))
        if size <= room - 1:
            out.append(item)
            room -= size
            continue
        if room - sep - 1 >= 8:
            shortened = _fit(item, room - sep - 1)
            if shortened is not _DROP and sep + len(_dumps(shortened)) <= room - 1:
                out.append(shortened)
        break
    out.append(dict(_MARKER_ENTRY))
    return out


def capture_json(value: object, kind: ContentKind, policy: ContentPolicy) -> str | None:
    """Return ``value`` as a scrubbed, length-bounded JSON string (``None`` if not allowed or ``None``).

    ``value`` is any JSON-like value (dict, list, str, number, bool); a string holding a JSON object or
    array is parsed first, as the CLI sometimes passes tool arguments that way. String leaves are scrubbed
    and cut to ``max(max_length // 4, 64)`` characters, values under secret-looking keys (``password``,
    ``api_key``, ``GITHUB_TOKEN``...) are replaced by ``"[REDACTED]"`` wholesale, and if the document is
    still longer than ``max_length`` trailing list items and dict entries are dropped and a
    ``"…": "truncated"`` entry (a ``{"…": "truncated"}`` item in lists) marks the spot. Keys are sorted.

    The result always parses with ``json.loads`` and is at most ``max(max_length, 24)`` characters long
    (``max_length`` itself whenever ``max_length >= 24``).
    """
    if value is None or not policy.allows(kind):
        return None
    if isinstance(value, str):
        value = _maybe_json(value)
    tree = _Sanitizer(policy.max_length).value(value)
    result = _dumps(tree)
    if len(result) <= policy.max_length:
        return result
    fitted = _fit(tree, policy.max_length)
    if fitted is _DROP:  # a lone number longer than a tiny max_length: nothing shorter would be honest
        return result
    return _dumps(fitted)


# --- argument hashing -----------------------------------------------------------------------------------


def argument_hash(arguments: object) -> str:
    """Return a stable 16-hex-digit hash of tool-call arguments, for spotting repeated identical calls.

    The arguments are canonicalised first: JSON with sorted keys at every level, ``None`` as ``null``, and a
    string holding a JSON object or array parsed, so ``'{"b": 1, "a": 2}'`` and ``{"a": 2, "b": 1}`` hash
    the same. Never raises: values JSON cannot represent are hashed through their ``repr``.
    """
    value = _maybe_json(arguments) if isinstance(arguments, str) else arguments
    try:
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        try:
            data = repr(value).encode("utf-8", "backslashreplace")
        except Exception:  # a broken __repr__: still a hash, never an exception in the fold
            data = type(value).__qualname__.encode()
    return hashlib.blake2b(data, digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class ContentGate:
    """What the agent loop may keep of the content it reads: each text allowed, scrubbed and cut, or ``None``.

    The gate decides *what* may be captured (the policy's kinds, and whether captured content has anywhere to
    go); the projections decide *where* it goes (span attributes, details events). Only the chat's input and
    output messages may go on ``gen_ai.client.inference.operation.details`` events, so only they pass with
    ``events=True`` under ``EVENT_ONLY``; everything else is span content and is not captured at all there.
    """

    policy: ContentPolicy

    def _open(self, events: bool) -> bool:
        policy = self.policy
        return bool(policy.enabled) and (policy.on_spans or (events and policy.on_events))

    def text(self, value: object, kind: ContentKind, *, events: bool = False) -> str | None:
        """``value`` scrubbed and cut if it is a string of a kind that may be captured, else ``None``."""
        if not isinstance(value, str) or not self._open(events):
            return None
        return capture_text(value, kind, self.policy)

    def json(self, value: object, kind: ContentKind, *, events: bool = False) -> str | None:
        """As :meth:`text`, for a JSON-like value: valid, scrubbed, length-bounded JSON text."""
        if value is None or not self._open(events):
            return None
        return capture_json(value, kind, self.policy)

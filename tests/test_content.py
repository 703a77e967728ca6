"""Tests for copilot_otel.content: capture gates, scrubbing, truncation and argument hashing.

Fake secrets are assembled at run time so that the file itself never contains anything a secret scanner
(or GitHub push protection) would flag.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from copilot_otel.common.errors import ConfigError
from copilot_otel.settings.config import load_config
from copilot_otel.settings.content import (
    ContentKind,
    ContentPolicy,
    argument_hash,
    capture_json,
    capture_text,
    scrub,
    truncate,
)

R = "[REDACTED]"
ALL = ContentPolicy(enabled=frozenset(ContentKind))
MASTER_KINDS = frozenset(
    {ContentKind.PROMPTS, ContentKind.RESPONSES, ContentKind.TOOL_ARGUMENTS, ContentKind.TOOL_RESULTS}
)

# --- fake secrets in the real formats ----------------------------------------------------------------------
GH_CLASSIC = "ghp" + "_" + "A1b2C3d4E5f6G7h8I9j0" * 2  # ghp_ + 40 alphanumerics
GH_APP = "ghs" + "_" + "Zz09" * 9
GH_OAUTH = "gho" + "_" + "q" * 36
GH_USER = "ghu" + "_" + "7" * 36
GH_REFRESH = "ghr" + "_" + "AbCd" * 9
GH_PAT = "github" + "_pat_" + "11ABCDEFG0123456789_" + "abcDEF123" * 6
OPENAI = "sk" + "-" + "proj-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3"
OPENAI_LEGACY = "sk" + "-" + "a1B2c3D4e5F6g7H8i9J0" * 2 + "k1L2m3N4"
ANTHROPIC = "sk" + "-ant-api03-" + "x9Y8z7W6v5U4t3S2r1Q0" * 4 + "-AbCdEfAA"
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
SLACK = "xox" + "b-" + "1234567890-0987654321-" + "AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE = "AIza" + "SyD-" + "a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p"
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    "." + "eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
    "." + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "MIIEowIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HcOLBO\nAbCdEf0123456789==\n"


def pem(kind: str) -> str:
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{PEM_BODY}-----END {kind}PRIVATE KEY-----"


def pem_redacted(kind: str) -> str:
    return f"-----BEGIN {kind}PRIVATE KEY-----{R}-----END {kind}PRIVATE KEY-----"


# --- scrub -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # GitHub
        (f"export GH_TOKEN_VALUE {GH_CLASSIC}", f"export GH_TOKEN_VALUE {R}"),
        (f"git clone https://{GH_APP}@github.com/o/r", f"git clone https://{R}@github.com/o/r"),
        (f"tokens: {GH_OAUTH} {GH_USER} {GH_REFRESH}", f"tokens: {R} {R} {R}"),
        (f"pat={GH_PAT}.", f"pat={R}."),
        # OpenAI / Anthropic
        (f"client = OpenAI(api_key_value={OPENAI!r})", f"client = OpenAI(api_key_value='{R}')"),
        (f"OPENAI={OPENAI_LEGACY}", f"OPENAI={R}"),
        (f"use {ANTHROPIC} here", f"use {R} here"),
        # AWS
        (f"aws_access_key_id={AWS_KEY_ID}", f"aws_access_key_id={R}"),
        (f"id {AWS_KEY_ID} in text", f"id {R} in text"),
        (f"aws_secret_access_key = {AWS_SECRET}", f"aws_secret_access_key = {R}"),
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\nnext", f"AWS_SECRET_ACCESS_KEY={R}\nnext"),
        # Slack, Google, JWT
        (f"slack: {SLACK}!", f"slack: {R}!"),
        (f"https://maps.googleapis.com/api?key={GOOGLE}", f"https://maps.googleapis.com/api?key={R}"),
        (f"cookie session {JWT}; Path=/", f"cookie session {R}; Path=/"),
        # PEM private keys, including a block cut off by an earlier truncation
        (f"key:\n{pem('RSA ')}\nafter", f"key:\n{pem_redacted('RSA ')}\nafter"),
        (pem(""), pem_redacted("")),
        (pem("OPENSSH "), pem_redacted("OPENSSH ")),
        (pem("ENCRYPTED "), pem_redacted("ENCRYPTED ")),
        (f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}", f"-----BEGIN EC PRIVATE KEY-----{R}"),
        # Authorization headers
        (
            "curl -H 'Authorization: Bearer abc.def-123_x' https://x",
            f"curl -H 'Authorization: Bearer {R}' https://x",
        ),
        ('{"Authorization": "Basic dXNlcjpwYXNzd29yZA=="}', f'{{"Authorization": "Basic {R}"}}'),
        ("authorization=token deadbeef42", f"authorization=token {R}"),
        ("Proxy-Authorization: Basic Zm9vOmJhcg==", f"Proxy-Authorization: Basic {R}"),
        ("sent Bearer A1b2C3d4E5f6G7h8I9 upstream", f"sent Bearer {R} upstream"),
        # passwords in URLs
        ("postgres://admin:s3cr3t@db.internal:5432/app", f"postgres://admin:{R}@db.internal:5432/app"),
        ("https://user:p%40ss@example.com/x", f"https://user:{R}@example.com/x"),
        ("redis://:onlypass@cache:6379/0", f"redis://:{R}@cache:6379/0"),
        # key = value pairs, keeping the key
        ("password=hunter2&user=bob", f"password={R}&user=bob"),
        ("DB_PASSWORD: hunter2", f"DB_PASSWORD: {R}"),
        ("passwd = 'correct horse'", f"passwd = '{R}'"),
        ('{"client_secret": "abc123", "max_tokens": 100}', f'{{"client_secret": "{R}", "max_tokens": 100}}'),
        ('"apiKey": "k-123"', f'"apiKey": "{R}"'),
        ("x-api-key: abc123", f"x-api-key: {R}"),
        ("APIKEY=abc123", f"APIKEY={R}"),
        ("privateKey='zz top'", f"privateKey='{R}'"),
        ("PRIVATE_KEY=abc", f"PRIVATE_KEY={R}"),
        ("s3_access_key: AKIAFAKE", f"s3_access_key: {R}"),
        ("accessToken=q1w2e3", f"accessToken={R}"),
        ("SECRET_KEY = 'django-insecure-xyz'", f"SECRET_KEY = '{R}'"),
        ("?access_token=abc&state=1", f"?access_token={R}&state=1"),
        ('token := "abc"', f'token := "{R}"'),
        ('escaped {\\"client_secret\\": \\"abc\\"}', f'escaped {{\\"client_secret\\": \\"{R}\\"}}'),
        ("İstanbul password=hunter2", f"İstanbul password={R}"),  # lower() changes the length here
        ('password="token=abc" token=xyz', f'password="{R}" token={R}'),
    ],
)
def test_scrub_redacts(text: str, expected: str) -> None:
    assert scrub(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        # ordinary code that talks about tokens and passwords
        "def login(user: str, password: str | None = None, token: Optional[str] = None) -> bool:",
        "    token = get_token()\n    self.token = token\n    password = getpass.getpass()",
        '    key = os.environ["GITHUB_TOKEN"]\n    client(token=token, password=args.password)',
        "usage = {'input_tokens': 1234, 'output_tokens': 56, 'max_tokens': 4096, 'token_count': 3}",
        'resp = {"usage": {"prompt_tokens": 10, "completion_tokens": 5}, "tokenizer": "cl100k"}',
        "if token == expected_token:\n    return secret_name, password_hash",
        "tokenizer = AutoTokenizer.from_pretrained(name)\nnum_tokens: int = 0",
        "token = 0\nretries = -1\nsecret: true\npassword = None\napi_key = undefined",
        "    env:\n      GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\n      NPM_TOKEN: $NPM_TOKEN",
        "gh auth login --with-token < token.txt; gh auth token --hostname github.com",
        "const token: string = await getToken();\ninterface Creds { password?: string }",
        "Bearer tokens are described in RFC 6750; Bearer authentication is common.",
        "The authorization server issues an access token.",
        # paths, ids, hashes, URLs
        "/home/dev/.ssh/id_ed25519.pub ~/.config/gh/hosts.yml C:\\Users\\dev\\AppData\\Local\\Temp",
        "session 3f2b8c1e-9a4d-4f6e-b7c2-1d0e5a9f8b7c started; event 0c6f3a2e-1b7d-4e8a-9f5c-2d4b6a8c0e1f",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (HEAD -> main) and abbrev 9fceb02",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "git@github.com:octo-org/octo-repo.git ssh://git@github.com:22/octo/repo https://localhost:8080/path",
        "http://[::1]:8080/health and https://example.com/a:b@c?x=1",
        "pip install scikit-learn task-runner-something-quite-long-and-hyphenated-name",
        "AKIAshort AIza-too-short xoxb- sk-short ghp_short eyJhbGciOiJIUzI1NiJ9 (no dots)",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA",
        "ERROR: 404 Not Found: https://api.github.com/repos/o/r/contents/README.md?ref=main",
        "",
    ],
)
def test_scrub_leaves_ordinary_text_alone(text: str) -> None:
    assert scrub(text) == text


def test_scrub_is_idempotent() -> None:
    text = f"a {GH_CLASSIC} b password=x c Authorization: Bearer zzz d {pem('RSA ')} e https://u:p@h"
    once = scrub(text)
    assert scrub(once) == once
    assert "zzz" not in once
    assert "p@h" not in once


def _median_seconds(func: Any, *args: Any, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func(*args)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def test_scrub_is_fast_on_50kb_without_secrets() -> None:
    code = (
        "def handle(request, token_count: int, user: str) -> dict[str, int]:\n"
        "    usage = {'input_tokens': token_count, 'max_tokens': 4096}\n"
        "    path = '/home/dev/project/src/module.py'  # 3f2b8c1e-9a4d-4f6e-b7c2-1d0e5a9f8b7c\n"
        "    return usage if user else {}\n"
    )
    text = (code * (50_000 // len(code) + 1))[:50_000]
    assert scrub(text) == text
    # Typically ~1 ms; the bound only catches a regression to quadratic behaviour.
    assert _median_seconds(scrub, text) < 0.05


@pytest.mark.parametrize(
    "text",
    [
        "a" * 50_000,
        "token=" + "a" * 50_000,
        'token: "' + "a" * 50_000,
        ('token: "' + "a" * 100 + "\n") * 450,
        "x" * 50_000 + "token=1",
        "token" + "." * 50_000,
        "authorization" + " " * 50_000,
        "Bearer " + "a" * 50_000,
        ("eyJ" + "a" * 50 + ".") * 900,
        ("http://a:" + "b" * 40 + " ") * 1_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 1_500,
        ("token= password: secret= api_key= " * 2_000)[:50_000],
    ],
    ids=lambda text: repr(text[:20]),
)
def test_scrub_has_no_catastrophic_backtracking(text: str) -> None:
    assert _median_seconds(scrub, text, repeat=3) < 0.25


# --- truncate / capture_text -------------------------------------------------------------------------------


def test_truncate() -> None:
    assert truncate("abc", 3) == "abc"
    assert truncate("", 16) == ""
    assert truncate("abcdef", 4) == "abcd…[truncated 2 chars]"
    long = "x" * 10_000
    result = truncate(long, 100)
    assert result.startswith("x" * 100)
    assert result == "x" * 100 + "…[truncated 9900 chars]"


def test_capture_text_is_off_by_default() -> None:
    policy = ContentPolicy()
    for kind in ContentKind:
        assert not policy.allows(kind)
        assert capture_text("hello", kind, policy) is None


def test_capture_text_only_for_enabled_kinds() -> None:
    policy = ContentPolicy(enabled=frozenset({ContentKind.PROMPTS}))
    assert capture_text("hello", ContentKind.PROMPTS, policy) == "hello"
    assert capture_text("hello", ContentKind.RESPONSES, policy) is None
    assert capture_text(None, ContentKind.PROMPTS, policy) is None


def test_capture_text_scrubs_before_truncating() -> None:
    policy = ContentPolicy(enabled=frozenset({ContentKind.TOOL_RESULTS}), max_length=100)
    # The token straddles the cut: truncating first would leak its first half.
    text = "a" * 80 + " " + GH_CLASSIC + " " + "b" * 1_000
    result = capture_text(text, ContentKind.TOOL_RESULTS, policy)
    assert result is not None
    assert result.startswith("a" * 80 + " " + R)
    assert "ghp" not in result
    assert result.endswith(" chars]")
    assert len(result) <= 100 + len("…[truncated 1000000 chars]")


def test_capture_text_on_huge_text_scrubs_only_the_kept_part() -> None:
    policy = ContentPolicy(enabled=frozenset({ContentKind.TOOL_RESULTS}), max_length=1_000)
    text = f"password={'p' * 10} " + "token=abc " * 500_000  # 5 MB
    result = capture_text(text, ContentKind.TOOL_RESULTS, policy)
    assert result is not None
    assert result.startswith(f"password={R} token={R} ")
    prefix, _, marker = result.partition("…[truncated ")
    assert len(prefix) == 1_000
    dropped = int(marker.removesuffix(" chars]"))
    # Counted on the scrubbed head plus the unscrubbed rest, so approximate.
    assert abs(dropped - (len(text) - 1_000)) < 0.01 * len(text)
    assert _median_seconds(capture_text, text, ContentKind.TOOL_RESULTS, policy, repeat=3) < 0.05


def test_capture_text_replaces_lone_surrogates() -> None:
    result = capture_text("a\ud800b", ContentKind.PROMPTS, ALL)
    assert result == "a?b"
    assert result.encode("utf-8")


# --- capture_json ------------------------------------------------------------------------------------------


def test_capture_json_respects_the_policy() -> None:
    policy = ContentPolicy(enabled=frozenset({ContentKind.TOOL_ARGUMENTS}))
    assert capture_json({"a": 1}, ContentKind.TOOL_ARGUMENTS, policy) == '{"a":1}'
    assert capture_json({"a": 1}, ContentKind.TOOL_RESULTS, policy) is None
    assert capture_json(None, ContentKind.TOOL_ARGUMENTS, policy) is None
    assert capture_json({"a": 1}, ContentKind.TOOL_ARGUMENTS, ContentPolicy()) is None


def test_capture_json_sorts_keys_and_scrubs() -> None:
    value = {
        "command": f"curl -H 'Authorization: Bearer xyz' https://u:pw@h/ && echo {GH_CLASSIC}",
        "env": {"GITHUB_TOKEN": "anything", "password": {"nested": "obj"}, "token": None, "is_secret": True},
        "usage": {"max_tokens": 100, "tokens": [1, 2]},
        "api_key": 12345,
    }
    result = capture_json(value, ContentKind.TOOL_ARGUMENTS, ALL)
    assert result is not None
    assert json.loads(result) == {
        "api_key": R,
        "command": f"curl -H 'Authorization: Bearer {R}' https://u:{R}@h/ && echo {R}",
        "env": {"GITHUB_TOKEN": R, "is_secret": True, "password": R, "token": None},
        "usage": {"max_tokens": 100, "tokens": [1, 2]},
    }
    assert list(json.loads(result)) == ["api_key", "command", "env", "usage"]


def test_capture_json_parses_string_encoded_arguments() -> None:
    as_dict = capture_json({"path": "/a", "b": [1]}, ContentKind.TOOL_ARGUMENTS, ALL)
    as_text = capture_json('{"path": "/a", "b": [1]}', ContentKind.TOOL_ARGUMENTS, ALL)
    assert as_dict == as_text == '{"b":[1],"path":"/a"}'
    assert capture_json("plain output", ContentKind.TOOL_RESULTS, ALL) == '"plain output"'
    assert capture_json("[not json", ContentKind.TOOL_RESULTS, ALL) == '"[not json"'


def test_capture_json_truncates_long_leaves() -> None:
    policy = ContentPolicy(enabled=frozenset(ContentKind), max_length=1_000)
    result = capture_json({"a": "x" * 5_000, "b": "short"}, ContentKind.TOOL_ARGUMENTS, policy)
    assert result is not None
    assert json.loads(result) == {"a": "x" * 250 + "…[truncated 4750 chars]", "b": "short"}
    # A small max_length still keeps at least 64 characters per leaf (if the whole fits).
    policy = ContentPolicy(enabled=frozenset(ContentKind), max_length=200)
    result = capture_json(["y" * 100], ContentKind.TOOL_ARGUMENTS, policy)
    assert result is not None
    assert json.loads(result) == ["y" * 64 + "…[truncated 36 chars]"]


def test_capture_json_drops_trailing_items_with_a_marker() -> None:
    policy = ContentPolicy(enabled=frozenset(ContentKind), max_length=200)
    result = capture_json(list(range(100_000)), ContentKind.TOOL_RESULTS, policy)
    assert result is not None
    assert len(result) <= 200
    items = json.loads(result)
    assert items[-1] == {"…": "truncated"}
    assert items[:-1] == list(range(len(items) - 1))

    result = capture_json({f"k{i:04}": "v" * 30 for i in range(1_000)}, ContentKind.TOOL_RESULTS, policy)
    assert result is not None
    assert len(result) <= 200
    entries = json.loads(result)
    assert entries.pop("…") == "truncated"
    assert list(entries) == [f"k{i:04}" for i in range(len(entries))]
    assert entries


def test_capture_json_handles_non_json_values() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd password=hunter2"

    value = {"t": (1, 2), "big": 2**70, "odd": Odd(), 3: "int key", "nan": float("nan")}
    result = capture_json(value, ContentKind.TOOL_ARGUMENTS, ALL)
    assert result is not None
    assert json.loads(result) == {
        "3": "int key",
        "big": str(2**70),
        "nan": None,
        "odd": f"odd password={R}",
        "t": [1, 2],
    }


def test_capture_json_survives_deep_nesting() -> None:
    value: Any = "leaf"
    for _ in range(1_000):
        value = [value]
    result = capture_json(value, ContentKind.TOOL_ARGUMENTS, ALL)
    assert result is not None
    json.loads(result)


def test_capture_json_is_fast_on_big_values() -> None:
    value = {
        "content": "line of output\n" * 100_000,
        "items": [{"n": i, "s": "x" * 50} for i in range(50_000)],
    }
    assert _median_seconds(capture_json, value, ContentKind.TOOL_RESULTS, ALL, repeat=3) < 0.05


_JSON_TEXT = st.one_of(
    st.text(max_size=300),
    st.sampled_from([GH_CLASSIC, JWT, "password=hunter2", 'a "quoted\\" \n value', "…", "\u2028\x00\x1f"]),
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _JSON_TEXT,
    lambda children: st.lists(children, max_size=20) | st.dictionaries(_JSON_TEXT, children, max_size=20),
    max_leaves=200,
)


@settings(max_examples=400, deadline=None, database=None)
@given(value=_JSON, max_length=st.integers(min_value=16, max_value=2_000))
def test_capture_json_fuzz_is_valid_and_bounded(value: object, max_length: int) -> None:
    policy = ContentPolicy(enabled=frozenset({ContentKind.TOOL_ARGUMENTS}), max_length=max_length)
    result = capture_json(value, ContentKind.TOOL_ARGUMENTS, policy)
    if value is None:
        assert result is None
        return
    assert result is not None
    json.loads(result)
    assert len(result) <= max(max_length, 24)
    assert GH_CLASSIC not in result
    assert "hunter2" not in result


@settings(max_examples=200, deadline=None, database=None)
@given(value=_JSON)
def test_capture_json_fuzz_keeps_small_values_whole(value: object) -> None:
    """With room to spare, the result is the sorted JSON of the (scrubbed) value."""
    result = capture_json(value, ContentKind.TOOL_ARGUMENTS, ContentPolicy(frozenset(ContentKind), 10**7))
    if value is None:
        return
    assert result is not None
    if isinstance(value, (dict, list)) and "[REDACTED]" not in result and "…" not in result:
        assert result == orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


# --- the content policy of an environment --------------------------------------------------------------

MASTER = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def content_policy(env: dict[str, str]) -> ContentPolicy:
    """The policy ``run``, ``replay`` and ``show`` fold with: that of the Config the CLI loads from ``env``."""
    return load_config(None, env).content


@pytest.mark.parametrize(
    ("value", "enabled", "on_spans", "on_events"),
    [
        (None, frozenset(), True, False),
        ("", frozenset(), True, False),
        ("false", frozenset(), True, False),
        ("FALSE", frozenset(), True, False),
        ("0", frozenset(), True, False),
        ("no", frozenset(), True, False),
        ("NO_CONTENT", frozenset(), True, False),
        ("no_content", frozenset(), True, False),
        ("true", MASTER_KINDS, True, False),
        ("True", MASTER_KINDS, True, False),
        (" 1 ", MASTER_KINDS, True, False),
        ("yes", MASTER_KINDS, True, False),
        ("SPAN_ONLY", MASTER_KINDS, True, False),
        ("EVENT_ONLY", MASTER_KINDS, False, True),
        ("event_only", MASTER_KINDS, False, True),
        ("SPAN_AND_EVENT", MASTER_KINDS, True, True),
    ],
)
def test_from_env_master_switch(
    value: str | None, enabled: frozenset[ContentKind], on_spans: bool, on_events: bool
) -> None:
    env = {} if value is None else {MASTER: value}
    policy = content_policy(env)
    assert policy == ContentPolicy(enabled=enabled, max_length=4_096, on_spans=on_spans, on_events=on_events)


@pytest.mark.parametrize(
    ("master", "emit", "on_spans", "on_events"),
    [
        ("EVENT_ONLY", "false", False, False),
        ("EVENT_ONLY", "TRUE", False, True),
        ("SPAN_AND_EVENT", "0", True, False),
        ("SPAN_AND_EVENT", "", True, True),  # empty = not set: the master switch's default
        # the event exists to carry content; it cannot move content that SPAN_ONLY keeps on spans
        ("SPAN_ONLY", "true", True, False),
        ("true", "true", True, False),
    ],
)
def test_from_env_emit_event_switch(master: str, emit: str, on_spans: bool, on_events: bool) -> None:
    policy = content_policy({MASTER: master, "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT": emit})
    assert (policy.on_spans, policy.on_events) == (on_spans, on_events)
    # with nowhere to put content, nothing is captured
    assert policy.enabled == (MASTER_KINDS if on_spans or on_events else frozenset())


def test_from_env_bad_emit_event_value() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^Expected OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT to be true or false, got 'sometimes'$",
    ):
        content_policy({MASTER: "EVENT_ONLY", "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT": "sometimes"})


def test_from_env_default_is_no_content() -> None:
    assert content_policy({}) == ContentPolicy()
    assert ContentPolicy().enabled == frozenset()


def test_from_env_finer_switches_override_the_master() -> None:
    policy = content_policy(
        {
            MASTER: "true",
            "COPILOT_OTEL_CAPTURE_TOOL_RESULTS": "false",
            "COPILOT_OTEL_CAPTURE_SYSTEM_PROMPT": "TRUE",
            "COPILOT_OTEL_CAPTURE_REASONING": "",  # empty = not set
        }
    )
    assert policy.enabled == {
        ContentKind.PROMPTS,
        ContentKind.RESPONSES,
        ContentKind.TOOL_ARGUMENTS,
        ContentKind.SYSTEM_PROMPT,
    }
    policy = content_policy({"COPILOT_OTEL_CAPTURE_PROMPTS": "1", "COPILOT_OTEL_CAPTURE_REASONING": "yes"})
    assert policy.enabled == {ContentKind.PROMPTS, ContentKind.REASONING}
    assert (policy.on_spans, policy.on_events) == (True, False)
    policy = content_policy({MASTER: "EVENT_ONLY", "COPILOT_OTEL_CAPTURE_PROMPTS": "false"})
    assert policy.enabled == MASTER_KINDS - {ContentKind.PROMPTS}
    assert (policy.on_spans, policy.on_events) == (False, True)


@pytest.mark.parametrize(
    "name",
    [
        "COPILOT_OTEL_CAPTURE_PROMPTS",
        "COPILOT_OTEL_CAPTURE_RESPONSES",
        "COPILOT_OTEL_CAPTURE_TOOL_ARGUMENTS",
        "COPILOT_OTEL_CAPTURE_TOOL_RESULTS",
        "COPILOT_OTEL_CAPTURE_SYSTEM_PROMPT",
        "COPILOT_OTEL_CAPTURE_REASONING",
    ],
)
def test_from_env_each_finer_switch(name: str) -> None:
    kind = ContentKind(name.removeprefix("COPILOT_OTEL_CAPTURE_").lower())
    assert content_policy({name: "true"}).enabled == {kind}
    everything = content_policy({MASTER: "true", name: "true"}).enabled
    assert content_policy({MASTER: "true", name: "false"}).enabled == everything - {kind}
    with pytest.raises(ConfigError, match=rf"^Expected {name} to be true or false, got 'sometimes'$"):
        content_policy({name: "sometimes"})


@pytest.mark.parametrize(("on", "off"), [("on", "off"), ("ON", "Off"), ("yes", "no"), ("1", "0")])
def test_content_switches_take_every_boolean_the_other_settings_take(on: str, off: str) -> None:
    # One boolean parser for every setting: "on" was valid for COPILOT_OTEL_METRICS and an error here.
    assert content_policy({"COPILOT_OTEL_CAPTURE_PROMPTS": on}).enabled == {ContentKind.PROMPTS}
    assert content_policy({MASTER: on}).enabled == MASTER_KINDS
    assert content_policy({MASTER: off}) == ContentPolicy()
    everything = content_policy({MASTER: "SPAN_AND_EVENT", "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT": off})
    assert (everything.on_spans, everything.on_events) == (True, False)


def test_from_env_max_length() -> None:
    assert content_policy({"COPILOT_OTEL_CONTENT_MAX_LENGTH": "16"}).max_length == 16
    assert content_policy({"COPILOT_OTEL_CONTENT_MAX_LENGTH": " 100000 "}).max_length == 100_000
    assert content_policy({"COPILOT_OTEL_CONTENT_MAX_LENGTH": ""}).max_length == 4_096


@pytest.mark.parametrize("value", ["15", "0", "-5", "abc", "1.5", "4k"])
def test_from_env_bad_max_length(value: str) -> None:
    expected = f"Expected COPILOT_OTEL_CONTENT_MAX_LENGTH to be an integer >= 16, got {value!r}"
    with pytest.raises(ConfigError) as info:
        content_policy({"COPILOT_OTEL_CONTENT_MAX_LENGTH": value})
    assert str(info.value) == expected


@pytest.mark.parametrize("value", ["maybe", "2", "span", "SPAN_ONLY,EVENT_ONLY"])
def test_from_env_bad_master_value(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        content_policy({MASTER: value})
    assert str(info.value) == (
        f"Expected {MASTER} to be one of true, false, NO_CONTENT, SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT, "
        f"got {value!r}"
    )


def test_policy_accepts_plain_values_and_rejects_tiny_limits() -> None:
    policy = ContentPolicy(enabled={"prompts", ContentKind.REASONING})  # type: ignore[arg-type]
    assert policy.enabled == {ContentKind.PROMPTS, ContentKind.REASONING}
    assert policy.allows(ContentKind.PROMPTS)
    assert not policy.allows(ContentKind.RESPONSES)
    with pytest.raises(ValueError, match="max_length"):
        ContentPolicy(max_length=8)


# --- argument_hash -----------------------------------------------------------------------------------------


def test_argument_hash_shape_and_null() -> None:
    digest = argument_hash({"a": 1})
    assert len(digest) == 16
    assert int(digest, 16) >= 0
    assert argument_hash(None) == hashlib.blake2b(b"null", digest_size=8).hexdigest()
    assert argument_hash({"a": 1}) == hashlib.blake2b(b'{"a":1}', digest_size=8).hexdigest()


def test_argument_hash_is_canonical() -> None:
    a = {"path": "/x", "options": {"recursive": True, "depth": 2, "filters": [{"b": 1, "a": 2}]}}
    b = {"options": {"filters": [{"a": 2, "b": 1}], "depth": 2, "recursive": True}, "path": "/x"}
    as_string = '{ "options": {"depth": 2, "filters": [{"a": 2, "b": 1}], "recursive": true}, "path": "/x" }'
    assert argument_hash(a) == argument_hash(b) == argument_hash(as_string)
    assert argument_hash([1, {"b": 2, "a": 1}]) == argument_hash('[1, {"a": 1, "b": 2}]')


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ({"path": "/a"}, {"path": "/b"}),
        ({"a": 1}, {"a": "1"}),
        ([1, 2], [2, 1]),
        ({"a": {"b": 1}}, {"a": {"b": 2}}),
        ({}, None),
        ("ls -la", "ls -l"),
        ("null", None),  # a string that is JSON but not an object or array stays a string
    ],
)
def test_argument_hash_differs_for_different_arguments(left: object, right: object) -> None:
    assert argument_hash(left) != argument_hash(right)


def test_argument_hash_never_raises() -> None:
    class BrokenRepr:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    values: list[object] = [2**70, -(2**70), object(), {1: "int key"}, "\ud800", {"s": {1, 2}}, BrokenRepr()]
    for value in values:
        assert len(argument_hash(value)) == 16
    assert argument_hash(2**70) == argument_hash(2**70)
    assert argument_hash(2**70) != argument_hash(2**71)
    assert argument_hash("{not json") == argument_hash("{not json")

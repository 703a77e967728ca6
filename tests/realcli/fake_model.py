"""A scripted fake of the OpenAI chat-completions API for driving the real Copilot CLI.

The real CLI (BYOK mode, ``COPILOT_PROVIDER_TYPE=openai``) sends every model call as
``POST /v1/chat/completions`` with ``stream: true``; this server answers each one with a
scripted, always-streamed reply (see ``shared/reference/real-cli.md`` §4-§6):

* A :class:`Script` is selected by its **marker** (``[[script:<name>]]``): the ``user``
  messages are scanned newest-first and the first one containing a known marker wins.
  Use :func:`prompt_for` to build such a prompt. A sub-agent gets its own prompt (the
  ``task`` tool's ``prompt`` argument), which carries a second marker.
* The **step index** is the number of ``assistant`` messages after that user message, so
  the same request always gets the same reply (CLI retries and resumed sessions stay
  deterministic). Past the last step the script's ``final`` text is sent.
* Tool-call ids are ``call_<script>_<step>_<n>``; they show up verbatim as ``toolCallId``
  in ``events.jsonl``. ``{cwd}`` in a string argument is replaced by the working folder
  named in the system prompt.
* Every request is recorded (credentials redacted) in :attr:`FakeModelServer.requests`
  and, optionally, appended to a JSONL file.

Usage in tests::

    with FakeModelServer() as server:
        run_copilot(..., prompt=prompt_for("tools"), base_url=server.base_url)
        assert [r.script for r in server.requests] == ["tools"] * 3

Standalone: ``python tests/realcli/fake_model.py --port 8765 --log requests.jsonl``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_SCRIPTS",
    "FakeModelServer",
    "RecordedRequest",
    "Script",
    "Step",
    "ToolCall",
    "choose_reply",
    "default_scripts",
    "marker",
    "prompt_for",
    "runaway_script",
    "tool_call_id",
]

# Token counts reported in every usage chunk (the cli-generated fixtures used the same).
PROMPT_TOKENS = 1_200
COMPLETION_TOKENS = 40
# How often a hanging reply sends an SSE comment; short so server shutdown is prompt.
KEEPALIVE_INTERVAL_S = 0.5
# Text sent when no marker matches (or a request carries no tools: a "utility" call).
UNSCRIPTED_TEXT = "OK."
# The CLI marks its history-summarising model call with this header value (real-cli.md §10).
COMPACTION_INTERACTION = "conversation-compaction"
# How the CLI's replacement for a compacted history begins (1.0.102).
COMPACTED_PREFIX = "Some of the conversation history has been summarized"
# Reply to a compaction call; the CLI keeps it as the summary of the history so far.
COMPACTION_TEXT = (
    "<overview>The user asked for a scripted scenario; the assistant ran the requested tools.</overview>"
)
# Cap on recorded requests so a runaway client cannot grow memory without bound.
MAX_RECORDED_REQUESTS = 10_000

_NAME_RE = re.compile(r"^[a-z0-9]+$")
_CWD_RE = re.compile(r"Current working directory: (\S+)")


def marker(name: str) -> str:
    """The phrase that selects script ``name`` when it appears in a user message."""
    return f"[[script:{name}]]"


def prompt_for(name: str, text: str = "") -> str:
    """A prompt that selects script ``name`` (``text`` first, then the marker)."""
    text = text or f"Run the {name} scenario."
    return f"{text} {marker(name)}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the fake model asks for.

    ``arguments`` is sent as a JSON string; ``{cwd}`` inside string values is replaced by
    the working folder parsed from the request's system prompt.
    """

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Step:
    """One scripted model reply.

    Args:
        content: assistant text (may be empty when tools are called).
        tool_calls: tool calls in this reply; several = parallel tool calls.
        delay_s: wait this long before answering (makes live-tailing latency observable).
        hang: answer 200 + SSE headers, then only ``: keep-alive`` comments until the
            client disconnects or the server stops (for abort tests).
        status: a non-200 status answers with an OpenAI-style JSON error body instead.
        prompt_tokens: ``usage.prompt_tokens`` of this reply (default :data:`PROMPT_TOKENS`);
            more than the model's limit (gpt-4.1: 64000) makes the CLI compact.
        completion_tokens: ``usage.completion_tokens`` (default :data:`COMPLETION_TOKENS`).
        reasoning: streamed first as ``reasoning_content`` deltas (what reasoning models send).
        reasoning_tokens: ``usage.completion_tokens_details.reasoning_tokens`` when set.
        cached_tokens: ``usage.prompt_tokens_details.cached_tokens`` when set.
        error_code: with ``status``, the error body's ``code`` (e.g. ``context_length_exceeded``).
        error_message: with ``status``, the error body's ``message``.
        retry_after_s: with ``status``, sent as a ``Retry-After`` header.
        stall: stream the role and text deltas, then only keep-alive comments (a reply the
            user cuts with Ctrl-C mid-stream).
    """

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    delay_s: float = 0.0
    hang: bool = False
    status: int = 200
    prompt_tokens: int = PROMPT_TOKENS
    completion_tokens: int = COMPLETION_TOKENS
    reasoning: str = ""
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    error_code: str | None = None
    error_message: str | None = None
    retry_after_s: float | None = None
    stall: bool = False


@dataclass(frozen=True, slots=True)
class Script:
    """A named sequence of replies, selected by :func:`marker` ``(name)``.

    ``name`` must be lower-case alphanumeric because it is embedded in tool-call ids.
    Requests past the last step get ``Step(final)``; with ``error_status`` set, every
    request is answered with that HTTP error instead.
    """

    name: str
    steps: tuple[Step, ...]
    final: str = "All done."
    error_status: int | None = None

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise ValueError(f"Expected script name to match {_NAME_RE.pattern}, got {self.name!r}")

    def step(self, index: int) -> Step:
        """The reply for step ``index`` (the fixed final text past the end)."""
        if self.error_status is not None:
            return Step(status=self.error_status)
        return self.steps[index] if index < len(self.steps) else Step(content=self.final)


def _bash(command: str, description: str, **extra: Any) -> ToolCall:
    return ToolCall("bash", {"command": command, "description": description, **extra})


def runaway_script(turns: int, *, name: str = "runaway", delay_s: float = 0.0) -> Script:
    """``turns`` model turns, each calling ``bash`` with the identical ``echo loop``, then a final answer."""
    if turns < 0:
        raise ValueError(f"Expected turns >= 0, got {turns!r}")
    step = Step(content="", tool_calls=(_bash("echo loop", "Loop again"),), delay_s=delay_s)
    return Script(name, (step,) * turns, final=f"Stopped after {turns} loops.")


def default_scripts(*, runaway_turns: int = 5, step_delay_s: float = 0.0) -> dict[str, Script]:
    """The standard scenarios, keyed by name.

    Args:
        runaway_turns: how many identical ``bash echo loop`` turns ``runaway`` makes.
        step_delay_s: delay before every scripted reply (0 = answer at once).

    Scripts (tool calls per step; the last step is always a text answer):

    * ``plain``: a text answer.
    * ``tools``: 0: ``bash echo one`` + ``bash echo two`` (parallel); 1: ``bash sleep 1; echo three``.
    * ``failing``: 0: ``view {cwd}/does-not-exist.txt`` (fails: path does not exist).
    * ``subagent``: 0: ``task`` (explore agent, prompt carries ``[[script:subagentchild]]``).
    * ``subagentchild``: 0: ``glob **/*`` in ``{cwd}``; 1: text (the sub-agent's answer).
    * ``runaway``: ``runaway_turns`` turns of ``bash echo loop``.
    * ``hang``: 0: hangs (200 + keep-alive comments only).
    * ``toolhang``: 0: ``bash echo started``; 1: hangs (like the ``aborted`` fixture).
    * ``slowtool``: 0: ``bash echo working...; sleep 30; echo finished`` (abort during a tool).
    * ``exit3``: 0: ``bash exit 3`` (success=true, shell exit code 3).
    * ``error``: every call answers HTTP 500 (the CLI retries 5 times, ~15 s, then exits 1).
    """
    d = step_delay_s
    scripts = [
        Script("plain", (Step(content="Paris is the capital of France.", delay_s=d),)),
        Script(
            "tools",
            (
                Step(
                    content="Let me run two commands.",
                    tool_calls=(_bash("echo one", "Print one"), _bash("echo two", "Print two")),
                    delay_s=d,
                ),
                Step(tool_calls=(_bash("sleep 1; echo three", "Print three slowly"),), delay_s=d),
                Step(content="The commands printed one, two and three.", delay_s=d),
            ),
        ),
        Script(
            "failing",
            (
                Step(
                    content="Let me read that file.",
                    tool_calls=(ToolCall("view", {"path": "{cwd}/does-not-exist.txt"}),),
                    delay_s=d,
                ),
                Step(content="The file does-not-exist.txt does not exist.", delay_s=d),
            ),
        ),
        Script(
            "subagent",
            (
                Step(
                    content="I'll delegate the survey to a helper agent.",
                    tool_calls=(
                        ToolCall(
                            "task",
                            {
                                "name": "surveyor",
                                "agent_type": "explore",
                                "description": "Survey project files",
                                "prompt": prompt_for(
                                    "subagentchild", "List the files in {cwd} and report what you find."
                                ),
                            },
                        ),
                    ),
                    delay_s=d,
                ),
                Step(content="The helper agent finished its survey.", delay_s=d),
            ),
        ),
        Script(
            "subagentchild",
            (
                Step(tool_calls=(ToolCall("glob", {"pattern": "**/*", "paths": "{cwd}"}),), delay_s=d),
                Step(content="I listed the files of the project.", delay_s=d),
            ),
        ),
        runaway_script(runaway_turns, delay_s=d),
        Script("hang", (Step(hang=True),)),
        Script(
            "toolhang",
            (Step(tool_calls=(_bash("echo started", "Start"),), delay_s=d), Step(hang=True)),
        ),
        Script(
            "slowtool",
            (
                Step(
                    content="Running the slow job.",
                    tool_calls=(
                        _bash("echo working...; sleep 30; echo finished", "Slow job", initial_wait=60),
                    ),
                    delay_s=d,
                ),
            ),
        ),
        Script(
            "exit3",
            (Step(tool_calls=(_bash("echo failing >&2; exit 3", "Fail on purpose"),), delay_s=d),),
            final="The command exited with code 3.",
        ),
        Script("error", (), error_status=500),
    ]
    return {s.name: s for s in scripts}


DEFAULT_SCRIPTS: Mapping[str, Script] = default_scripts()


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One HTTP request as the fake server saw it, plus the reply it chose."""

    seq: int
    time: float
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    script: str | None = None
    step_index: int | None = None
    tool_call_ids: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (one line of the request log)."""
        return {
            "seq": self.seq,
            "time": self.time,
            "method": self.method,
            "path": self.path,
            "headers": dict(self.headers),
            "body": self.body,
            "script": self.script,
            "step_index": self.step_index,
            "tool_call_ids": list(self.tool_call_ids),
        }


@dataclass(frozen=True, slots=True)
class _Reply:
    script: str | None
    step_index: int | None
    step: Step
    response_id: str
    cwd: str
    # A compaction call: (script, step index) the summarised history had reached.
    compacts: tuple[str, int] | None = None


def _text(content: Any) -> str:
    """Message content as text (a string, or a list of ``{type: text, text}`` parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def choose_reply(
    body: Any,
    scripts: Mapping[str, Script],
    interaction_type: str | None = None,
    compacted: Mapping[str, int] | None = None,
) -> _Reply:
    """Pick the scripted reply for a chat-completions request body (pure; see module docstring).

    Args:
        body: the request body.
        scripts: the scripts by name.
        interaction_type: the request's ``x-interaction-type`` header. A compaction call is
            answered with :data:`COMPACTION_TEXT`; its reply's ``compacts`` says which script
            and step the summarised history had reached.
        compacted: per script, the step index its history had reached when it was last
            compacted. After a compaction the CLI replaces the history by one user message
            (starting with :data:`COMPACTED_PREFIX`, quoting the prompt with its marker), so
            the steps counted after that message are added to this offset; otherwise the
            script would replay steps (and tool-call ids) it had already sent.
    """
    messages: list[dict[str, Any]] = [m for m in (body or {}).get("messages", []) if isinstance(m, dict)]
    cwd = ""
    for m in messages:
        if m.get("role") == "system" and (found := _CWD_RE.search(_text(m.get("content")))):
            cwd = found.group(1)
            break
    located = _locate(messages, scripts, compacted or {})
    if interaction_type == COMPACTION_INTERACTION:
        text = located[2] if located else ""
        step = Step(content=COMPACTION_TEXT)
        compacts = (located[0].name, located[1]) if located else None
        return _Reply(None, None, step, _response_id("compaction", 0, text), cwd, compacts)
    if not (body or {}).get("tools"):
        return _Reply(None, None, Step(content=UNSCRIPTED_TEXT), _response_id("utility", 0, ""), cwd)
    if located is None:
        return _Reply(None, None, Step(content=UNSCRIPTED_TEXT), _response_id("unscripted", 0, ""), cwd)
    script, step_index, text = located
    return _Reply(
        script.name, step_index, script.step(step_index), _response_id(script.name, step_index, text), cwd
    )


def _locate(
    messages: Sequence[Mapping[str, Any]], scripts: Mapping[str, Script], compacted: Mapping[str, int]
) -> tuple[Script, int, str] | None:
    """``(script, step index, marker message text)`` of the newest user message with a marker."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") != "user":
            continue
        text = _text(messages[index].get("content"))
        for script in scripts.values():
            if marker(script.name) in text:
                step_index = sum(1 for m in messages[index + 1 :] if m.get("role") == "assistant")
                if text.startswith(COMPACTED_PREFIX):
                    step_index += compacted.get(script.name, 0)
                return script, step_index, text
    return None


def _response_id(script: str, step_index: int, user_text: str) -> str:
    # Deterministic per request; the user text (with the CLI's datetime) keeps sessions apart.
    digest = hashlib.sha256(f"{script}/{step_index}/{user_text}".encode()).hexdigest()
    return f"chatcmpl-{digest[:24]}"


def _substitute(value: Any, cwd: str) -> Any:
    if isinstance(value, str):
        return value.replace("{cwd}", cwd or ".")
    if isinstance(value, Mapping):
        return {k: _substitute(v, cwd) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_substitute(v, cwd) for v in value]
    return value


def tool_call_id(script: str, step_index: int, n: int) -> str:
    """The deterministic id of tool call ``n`` in step ``step_index`` of ``script``."""
    return f"call_{script}_{step_index}_{n}"


def sse_frames(reply: _Reply, model: str, created: int) -> Iterator[bytes]:
    """The ``data: …`` frames of a streamed reply (§5 of real-cli.md), ending with ``[DONE]``."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        obj = {
            "id": reply.response_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    step = reply.step
    yield chunk({"role": "assistant", "content": ""})
    if step.reasoning:
        half = len(step.reasoning) // 2
        for piece in (step.reasoning[:half], step.reasoning[half:]):
            if piece:
                yield chunk({"reasoning_content": piece})
    if step.content:
        # Two text deltas, as a real model streams several.
        half = len(step.content) // 2
        for piece in (step.content[:half], step.content[half:]):
            if piece:
                yield chunk({"content": piece})
    if step.stall:
        return
    for n, call in enumerate(step.tool_calls):
        call_id = tool_call_id(reply.script or "unscripted", reply.step_index or 0, n)
        arguments = json.dumps(_substitute(call.arguments, reply.cwd))
        first = {
            "index": n,
            "id": call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [first]})
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            yield chunk({"tool_calls": [{"index": n, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if step.tool_calls else "stop")
    usage: dict[str, Any] = {
        "prompt_tokens": step.prompt_tokens,
        "completion_tokens": step.completion_tokens,
        "total_tokens": step.prompt_tokens + step.completion_tokens,
    }
    if step.reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": step.reasoning_tokens}
    if step.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": step.cached_tokens}
    final = {
        "id": reply.response_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage,
    }
    yield b"data: " + json.dumps(final).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _HTTPServer
    # HTTP/1.0 semantics: one request per connection, the streamed body ends when we close.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the request log is the record

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = bytearray()
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return bytes(data)
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        payload = json.dumps(obj).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        fake = self.server.fake
        fake._record(self, None, None)
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "gpt-4.1", "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found", "type": "not_found", "code": 404}})

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self._read_body()
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        if self.path.split("?")[0].rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            fake._record(self, body, None)
            self._json(404, {"error": {"message": "not found", "type": "not_found", "code": 404}})
            return
        with fake._cond:
            compacted = dict(fake.compacted)
        reply = choose_reply(body, fake.scripts, self.headers.get("x-interaction-type"), compacted)
        if reply.compacts is not None:
            with fake._cond:
                fake.compacted[reply.compacts[0]] = reply.compacts[1]
        fake._record(self, body, reply)
        step = reply.step
        if step.delay_s and fake.stop_event.wait(step.delay_s):
            return
        if step.status != 200:
            error = {
                "message": step.error_message or f"scripted error {step.status}",
                "type": "invalid_request_error" if step.status < 500 else "server_error",
                "code": step.error_code or step.status,
            }
            retry = {"retry-after": f"{step.retry_after_s:g}"} if step.retry_after_s is not None else {}
            self._json(step.status, {"error": error}, retry)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.flush()
        try:
            if step.hang:
                self._hang()
                return
            model = str((body or {}).get("model") or "gpt-4.1")
            for frame in sse_frames(reply, model, int(time.time())):
                self.wfile.write(frame)
                self.wfile.flush()
            if step.stall:
                self._hang()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the CLI went away (abort); nothing to answer

    def _hang(self) -> None:
        """Send only SSE comments until the client disconnects or the server stops."""
        while not self.server.fake.stop_event.wait(KEEPALIVE_INTERVAL_S):
            self.wfile.write(b": keep-alive\n\n")
            self.wfile.flush()


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeModelServer


_REDACTED_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "cookie"})


@dataclass
class FakeModelServer:
    """The fake model server, serving in a background thread while used as a context manager.

    Args:
        scripts: the scripts to serve (default: :func:`default_scripts`).
        port: TCP port on 127.0.0.1 (0 = any free port).
        log_path: if set, every request is also appended to this JSONL file.
    """

    scripts: Mapping[str, Script] = field(default_factory=lambda: dict(DEFAULT_SCRIPTS))
    port: int = 0
    log_path: str | None = None
    requests: list[RecordedRequest] = field(default_factory=list, init=False)
    # Per script, the step its history had reached at its latest compaction (see choose_reply).
    compacted: dict[str, int] = field(default_factory=dict, init=False)
    stop_event: threading.Event = field(default_factory=threading.Event, init=False)
    _httpd: _HTTPServer | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _cond: threading.Condition = field(default_factory=threading.Condition, init=False, repr=False)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the value for ``COPILOT_PROVIDER_BASE_URL``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeModelServer:
        """Bind and start serving in a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("FakeModelServer already started")
        self.stop_event.clear()
        httpd = _HTTPServer(("127.0.0.1", self.port), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="fake-model", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop serving: hanging replies end, the listening socket closes."""
        self.stop_event.set()
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def chat_requests(self, script: str | None = None) -> list[RecordedRequest]:
        """The recorded chat-completions requests, optionally only those for ``script``."""
        with self._cond:
            return [
                r
                for r in self.requests
                if r.method == "POST"
                and r.path.endswith("/chat/completions")
                and (script is None or r.script == script)
            ]

    def wait_for_requests(self, count: int, *, script: str | None = None, timeout_s: float = 30.0) -> bool:
        """Block until at least ``count`` chat requests (for ``script``) arrived; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while len(self.chat_requests(script)) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def _record(self, handler: _Handler, body: Any, reply: _Reply | None) -> None:
        headers = {
            k.lower(): ("<redacted>" if k.lower() in _REDACTED_HEADERS else v)
            for k, v in handler.headers.items()
        }
        ids: tuple[str, ...] = ()
        if reply is not None and reply.script is not None and reply.step_index is not None:
            ids = tuple(
                tool_call_id(reply.script, reply.step_index, n) for n in range(len(reply.step.tool_calls))
            )
        with self._cond:
            if len(self.requests) >= MAX_RECORDED_REQUESTS:
                return
            record = RecordedRequest(
                seq=len(self.requests) + 1,
                time=time.time(),
                method=handler.command,
                path=handler.path,
                headers=headers,
                body=body,
                script=reply.script if reply else None,
                step_index=reply.step_index if reply else None,
                tool_call_ids=ids,
            )
            self.requests.append(record)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record.as_dict()) + "\n")
            self._cond.notify_all()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the default scripts on 127.0.0.1 until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=0, help="TCP port (0 = any free port)")
    parser.add_argument("--log", help="append every request as JSONL to this file")
    parser.add_argument("--runaway-turns", type=int, default=5, help="bash turns of the 'runaway' script")
    parser.add_argument("--step-delay", type=float, default=0.0, help="seconds to wait before every reply")
    args = parser.parse_args(argv)
    scripts = default_scripts(runaway_turns=args.runaway_turns, step_delay_s=args.step_delay)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with FakeModelServer(scripts=scripts, port=args.port, log_path=args.log) as server:
        print(server.base_url, flush=True)
        print("scripts: " + ", ".join(f"{name} -> {marker(name)}" for name in scripts), file=sys.stderr)
        while not stop.wait(1.0):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Small JSON-RPC 2.0 clients for the Copilot CLI's programmatic modes (stdlib only).

Two transports over the child's stdin/stdout:

* **SDK server mode** -- ``copilot --headless --stdio``: JSON-RPC with ``Content-Length``
  framing (the ``vscode-jsonrpc`` framing ``github/copilot-sdk`` uses). The client calls
  ``session.create`` / ``session.send`` / ``session.permissions.*``; the CLI pushes every
  session event as a ``session.event`` notification.
* **Agent Client Protocol** -- ``copilot --acp``: JSON-RPC, one JSON object per line. The
  client calls ``initialize``, ``session/new``, ``session/prompt``, ``session/cancel``,
  ``session/set_model``; the agent streams ``session/update`` notifications and may ask
  ``session/request_permission``.

Both clients keep a **transcript** of every message in both directions (credentials
redacted, see :func:`redact`), so a capture can be replayed or inspected later. Incoming
requests from the CLI are answered by handlers (method name -> callable); a handler may
return :data:`DEFER` and answer later with :meth:`JsonRpcPeer.respond` (used to make a
permission wait visible).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

__all__ = [
    "DEFER",
    "AcpClient",
    "HeadlessClient",
    "JsonRpcError",
    "JsonRpcPeer",
    "PendingCall",
    "TranscriptEntry",
    "redact",
]

Framing = Literal["content-length", "ndjson"]
Handler = Callable[[Any, Any], Any]
"""An incoming-request handler: ``(request_id, params) -> result`` (or :data:`DEFER`)."""

# Keys whose values never reach a transcript (case-insensitive).
_SECRET_KEYS = frozenset(
    {"apikey", "api_key", "bearertoken", "githubtoken", "token", "authorization", "password", "secret"}
)
# How long a request waits for its response unless told otherwise.
DEFAULT_TIMEOUT_S = 30.0
# How long close() waits for the child to exit after stdin is closed, before SIGTERM/SIGKILL.
CLOSE_GRACE_S = 10.0


class _Defer:
    def __repr__(self) -> str:
        return "DEFER"


DEFER: Any = _Defer()
"""Return this from a handler to answer the request later with :meth:`JsonRpcPeer.respond`."""


class JsonRpcError(Exception):
    """The peer answered a request with a JSON-RPC ``error`` object."""

    def __init__(self, method: str, error: Mapping[str, Any]) -> None:
        self.method = method
        self.code = error.get("code")
        self.error = dict(error)
        super().__init__(f"{method}: {error.get('code')} {error.get('message')}")


def redact(value: Any) -> Any:
    """A copy of ``value`` with the values of credential-like keys replaced by ``"<redacted>"``."""
    if isinstance(value, Mapping):
        return {
            k: "<redacted>" if str(k).lower() in _SECRET_KEYS and v else redact(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """One JSON-RPC message as it crossed the pipe."""

    seq: int
    time: float  # wall clock (epoch seconds), to line up with events.jsonl timestamps
    direction: Literal["client->cli", "cli->client"]
    message: Any

    def as_dict(self) -> dict[str, Any]:
        """One line of ``rpc.jsonl``."""
        return {"seq": self.seq, "time": self.time, "direction": self.direction, "message": self.message}


@dataclass
class PendingCall:
    """A request in flight; :meth:`wait` blocks for its result."""

    method: str
    request_id: int
    sent_at: float
    _done: threading.Event = field(default_factory=threading.Event, repr=False)
    _response: dict[str, Any] | None = field(default=None, repr=False)

    def _resolve(self, response: dict[str, Any]) -> None:
        self._response = response
        self._done.set()

    @property
    def done(self) -> bool:
        """True once the response arrived."""
        return self._done.is_set()

    def wait(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
        """The result; raises :class:`JsonRpcError` for an error response, ``TimeoutError`` on timeout."""
        if not self._done.wait(timeout_s):
            raise TimeoutError(f"no response to {self.method} (id {self.request_id}) within {timeout_s} s")
        assert self._response is not None
        if "error" in self._response:
            raise JsonRpcError(self.method, self._response["error"])
        return self._response.get("result")


class JsonRpcPeer:
    """A JSON-RPC 2.0 endpoint talking to a child process over its stdin/stdout.

    A reader thread parses incoming messages: responses resolve :class:`PendingCall` s,
    requests go to :attr:`handlers` (unknown methods get ``-32601``), notifications are
    appended to :attr:`notifications` (wait on them with :meth:`wait_for`) and passed to
    each of :attr:`listeners`.

    Args:
        argv: the command line (the native binary plus its flags).
        cwd: the child's working folder.
        env: the child's complete environment.
        framing: ``"content-length"`` (headless SDK mode) or ``"ndjson"`` (ACP).
        stderr: a binary file the child's stderr is written to.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        framing: Framing,
        stderr: IO[bytes],
    ) -> None:
        self.framing: Framing = framing
        self.handlers: dict[str, Handler] = {}
        self.transcript: list[TranscriptEntry] = []
        self.notifications: list[dict[str, Any]] = []
        # Called on the reader thread for every notification; must not block (start a Timer).
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self._ids = itertools.count(1)
        self._seq = itertools.count(1)
        self._pending: dict[int, PendingCall] = {}
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self.proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read_loop, name="jsonrpc-reader", daemon=True)
        self._reader.start()

    # -- sending -------------------------------------------------------------------------

    def _log(self, direction: Literal["client->cli", "cli->client"], message: Any) -> None:
        entry = TranscriptEntry(next(self._seq), time.time(), direction, redact(message))
        with self._cond:
            self.transcript.append(entry)

    def _write(self, message: dict[str, Any]) -> None:
        payload = json.dumps(message, separators=(",", ":")).encode()
        stdin = self.proc.stdin
        assert stdin is not None
        with self._write_lock:
            self._log("client->cli", message)
            if self.framing == "content-length":
                stdin.write(b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
            else:
                stdin.write(payload + b"\n")
            stdin.flush()

    def call(self, method: str, params: Any = None) -> PendingCall:
        """Send a request and return at once; ``.wait()`` on the result."""
        request_id = next(self._ids)
        pending = PendingCall(method, request_id, time.time())
        with self._cond:
            self._pending[request_id] = pending
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)
        return pending

    def request(self, method: str, params: Any = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
        """Send a request and block for its result."""
        return self.call(method, params).wait(timeout_s)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no response expected)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)

    def respond(self, request_id: Any, result: Any = None, error: Mapping[str, Any] | None = None) -> None:
        """Answer a request the CLI sent (for handlers that returned :data:`DEFER`)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = dict(error)
        else:
            message["result"] = result
        self._write(message)

    # -- receiving -----------------------------------------------------------------------

    def _read_message(self, stdout: IO[bytes]) -> dict[str, Any] | None:
        if self.framing == "ndjson":
            while line := stdout.readline():
                if line.strip():
                    parsed: dict[str, Any] = json.loads(line)
                    return parsed
            return None
        length: int | None = None
        while True:
            header = stdout.readline()
            if not header:
                return None
            header = header.strip()
            if not header:
                if length is not None:
                    break
                continue
            name, _, value = header.decode("ascii", "replace").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        body = stdout.read(length)
        parsed = json.loads(body)
        return parsed

    def _read_loop(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        while True:
            try:
                message = self._read_message(stdout)
            except ValueError:
                continue  # not JSON (a stray log line); nothing to route
            if message is None:
                break
            self._log("cli->client", message)
            self._dispatch(message)
        # EOF: the CLI exited or closed stdout; nothing pending will ever be answered.
        with self._cond:
            orphans, self._pending = list(self._pending.values()), {}
            self._cond.notify_all()
        for pending in orphans:
            pending._resolve({"error": {"code": -32000, "message": "connection closed before a response"}})

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" not in message:
            with self._cond:
                pending = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
            if pending is not None:
                pending._resolve(message)
            return
        if "id" not in message:
            with self._cond:
                self.notifications.append(message)
                self._cond.notify_all()
            for listener in list(self.listeners):
                listener(message)
            return
        handler = self.handlers.get(message["method"])
        if handler is None:
            self.respond(message["id"], error={"code": -32601, "message": f"unhandled: {message['method']}"})
            return
        try:
            result = handler(message["id"], message.get("params"))
        except Exception as exc:  # any handler failure becomes a JSON-RPC error
            self.respond(message["id"], error={"code": -32603, "message": repr(exc)})
            return
        if result is not DEFER:
            self.respond(message["id"], result)

    def wait_for(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        start: int = 0,
    ) -> dict[str, Any]:
        """The first notification (from index ``start``) matching ``predicate``; ``TimeoutError`` if none."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            index = start
            while True:
                while index < len(self.notifications):
                    if predicate(self.notifications[index]):
                        return self.notifications[index]
                    index += 1
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.proc.poll() is not None:
                    raise TimeoutError(f"no matching notification within {timeout_s} s")
                self._cond.wait(min(remaining, 0.5))

    # -- lifecycle -----------------------------------------------------------------------

    def close(self, grace_s: float = CLOSE_GRACE_S) -> int:
        """Close stdin (the CLI then shuts down), wait, escalate to SIGTERM/SIGKILL; the exit code."""
        with contextlib.suppress(BrokenPipeError, OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        for stop in (None, self.proc.terminate, self.proc.kill):
            if stop is not None:
                stop()
            try:
                code = self.proc.wait(grace_s)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            code = self.proc.wait()
        self._reader.join(grace_s)
        return code

    def __enter__(self) -> JsonRpcPeer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class HeadlessClient(JsonRpcPeer):
    """``copilot --headless --stdio``: the SDK server protocol (``github/copilot-sdk``)."""

    def __init__(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stderr: IO[bytes]) -> None:
        super().__init__(argv, cwd=cwd, env=env, framing="content-length", stderr=stderr)

    def session_events(self, session_id: str, start: int = 0) -> list[dict[str, Any]]:
        """The ``session.event`` payloads (``{type, data, id, …}``) received so far for ``session_id``."""
        with self._cond:
            return [
                n["params"]["event"]
                for n in self.notifications[start:]
                if n.get("method") == "session.event"
                and (n.get("params") or {}).get("sessionId") == session_id
            ]

    def wait_for_event(
        self,
        session_id: str,
        event_type: str,
        where: Callable[[dict[str, Any]], bool] = lambda _e: True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        start: int = 0,
    ) -> dict[str, Any]:
        """The first ``session.event`` of ``event_type`` (matching ``where``) for the session."""

        def match(n: dict[str, Any]) -> bool:
            params = n.get("params") or {}
            event = params.get("event") or {}
            return (
                n.get("method") == "session.event"
                and params.get("sessionId") == session_id
                and event.get("type") == event_type
                and where(event)
            )

        event: dict[str, Any] = self.wait_for(match, timeout_s, start)["params"]["event"]
        return event

    def create_session(self, **params: Any) -> dict[str, Any]:
        """``session.create`` (params as in the SDK: ``sessionId``, ``model``, ``provider``, …)."""
        result: dict[str, Any] = self.request("session.create", params, timeout_s=60.0)
        return result

    def send(self, session_id: str, prompt: str, mode: str | None = None) -> PendingCall:
        """``session.send``; ``mode`` is ``"immediate"`` (steering) or ``"enqueue"`` (queued)."""
        params: dict[str, Any] = {"sessionId": session_id, "prompt": prompt}
        if mode is not None:
            params["mode"] = mode
        return self.call("session.send", params)

    def answer_permission(self, session_id: str, request_id: str, result: Mapping[str, Any]) -> PendingCall:
        """``session.permissions.handlePendingPermissionRequest`` for one ``permission.requested``."""
        params = {"sessionId": session_id, "requestId": request_id, "result": dict(result)}
        return self.call("session.permissions.handlePendingPermissionRequest", params)


class AcpClient(JsonRpcPeer):
    """``copilot --acp``: the Agent Client Protocol (newline-delimited JSON-RPC)."""

    def __init__(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stderr: IO[bytes]) -> None:
        super().__init__(argv, cwd=cwd, env=env, framing="ndjson", stderr=stderr)

    def initialize(self) -> dict[str, Any]:
        """``initialize`` with protocol version 1 and no client file-system or terminal capabilities."""
        params = {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            "clientInfo": {"name": "copilot-otel-capture", "version": "0"},
        }
        result: dict[str, Any] = self.request("initialize", params, timeout_s=60.0)
        return result

    def new_session(self, cwd: Path, **extra: Any) -> dict[str, Any]:
        """``session/new`` in ``cwd`` with no MCP servers."""
        result: dict[str, Any] = self.request(
            "session/new", {"cwd": str(cwd), "mcpServers": [], **extra}, timeout_s=60.0
        )
        return result

    def prompt(self, session_id: str, text: str) -> PendingCall:
        """``session/prompt`` with one text block; the response (``stopReason``) comes when the turn ends."""
        return self.call(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )

    def cancel(self, session_id: str) -> None:
        """``session/cancel`` (a notification)."""
        self.notify("session/cancel", {"sessionId": session_id})

    def set_model(self, session_id: str, model_id: str) -> Any:
        """``session/set_model`` (unstable in the ACP spec)."""
        return self.request("session/set_model", {"sessionId": session_id, "modelId": model_id})

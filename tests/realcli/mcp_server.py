"""A tiny stdio MCP server (stdlib only) for driving the real Copilot CLI's MCP tool path.

Speaks JSON-RPC 2.0, one message per line on stdin/stdout (the MCP stdio transport), and
offers four tools so every outcome the CLI records is exercised:

* ``echo`` ``{text}``: answers the text back (success).
* ``add`` ``{a, b}``: answers the sum (success, with ``structuredContent``).
* ``fail`` ``{reason}``: a tool result with ``isError: true`` (a failure the tool reports).
* ``boom`` ``{}``: a JSON-RPC error response (``-32000``), not a tool result at all.

Every request it receives is appended as JSONL to ``$SHAPES_MCP_LOG`` when that is set.
Run by the CLI through ``--additional-mcp-config``; see ``tests/realcli/shapes.py``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

SERVER_NAME = "shapes-mcp"
SERVER_VERSION = "1.0.0"
# What we answer when the client does not say which protocol revision it wants.
DEFAULT_PROTOCOL = "2025-06-18"
# JSON-RPC error codes (https://www.jsonrpc.org/specification#error_object).
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SERVER_ERROR = -32000

TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Echo the given text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "Text to echo."}},
            "required": ["text"],
        },
    },
    {
        "name": "add",
        "description": "Add two integers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
    {
        "name": "fail",
        "description": "Always fails with a tool error (isError).",
        "inputSchema": {"type": "object", "properties": {"reason": {"type": "string"}}},
    },
    {
        "name": "boom",
        "description": "Always answers with a JSON-RPC error.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


def _text_result(text: str, *, is_error: bool = False, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error, **extra}


def call_tool(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(result, error)`` of ``tools/call`` for tool ``name``: exactly one of them is set."""
    if name == "echo":
        return _text_result(str(arguments.get("text", ""))), None
    if name == "add":
        total = int(arguments.get("a", 0)) + int(arguments.get("b", 0))
        return _text_result(str(total), structuredContent={"sum": total}), None
    if name == "fail":
        reason = arguments.get("reason") or "no reason given"
        return _text_result(f"fail: the tool refused ({reason})", is_error=True), None
    if name == "boom":
        return None, {"code": SERVER_ERROR, "message": "boom: the server blew up on purpose"}
    return None, {"code": INVALID_PARAMS, "message": f"Unknown tool: {name}"}


def handle(message: dict[str, Any]) -> dict[str, Any] | None:
    """The response to one JSON-RPC message (``None`` for notifications)."""
    method = message.get("method")
    params = message.get("params") or {}
    if "id" not in message:
        return None  # a notification (notifications/initialized, …): nothing to answer
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion") or DEFAULT_PROTOCOL,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result, error = call_tool(str(params.get("name")), dict(params.get("arguments") or {}))
    else:
        error = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
    if error is not None:
        reply["error"] = error
    else:
        reply["result"] = result
    return reply


def main() -> int:
    """Serve JSON-RPC lines on stdin/stdout until stdin closes."""
    log_path = os.environ.get("SHAPES_MCP_LOG")
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if log_path:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(message) + "\n")
        reply = handle(message)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

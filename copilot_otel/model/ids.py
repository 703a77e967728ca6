"""Deterministic trace and span ids.

Replaying the same log must give byte-identical spans, so that a span exported twice (after a crash between
export and checkpoint) collapses into one downstream. Ids are therefore hashes of stable facts from the log
(session id, event ids, tool call ids), never random numbers.
"""

from __future__ import annotations

from hashlib import blake2b


def _digest(size: int, parts: tuple[str, ...]) -> int:
    value = int.from_bytes(
        blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=size).digest(), "big"
    )
    # 0 is the OTel "invalid id"; a hash landing on it (p = 2**-64) is nudged to stay valid.
    return value or 1


def trace_id(session_id: str, prompt_key: str) -> int:
    """The 128-bit trace id of one prompt (one trace per human prompt)."""
    return _digest(16, (session_id, "trace", prompt_key))


def span_id(session_id: str, *parts: str) -> int:
    """A 64-bit span id from the session id and whatever makes the span unique in that session."""
    return _digest(8, (session_id, *parts))

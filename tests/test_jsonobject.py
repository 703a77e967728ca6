"""The one check that a JSON document is an object (copilot_otel.common.jsonobject): what it returns, and the three
ways it refuses, in words that follow a path."""

from __future__ import annotations

import json

import pytest

from copilot_otel.common.jsonobject import NotAJsonObject, json_object


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"a": 1}', {"a": 1}),
        ('{"a": [1, {"b": null}]}\n', {"a": [1, {"b": None}]}),
        # What the json module writes for a dead letter orjson refused: read back exact, NaN included.
        (json.dumps({"big": 2**70, "nan": float("nan")}).encode(), {"big": 2**70}),
    ],
)
def test_an_object_is_returned_as_parsed(data: bytes | str, expected: dict[str, object]) -> None:
    parsed = json_object(data)
    assert {key: value for key, value in parsed.items() if key != "nan"} == expected
    assert type(parsed.get("big", 0)) is int


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b" \n", "empty"),
        (b"{not json", "not valid JSON: "),
        (b"\xff\xfe{", "not valid JSON: "),
        (b"[" * 100_000, "not valid JSON: "),
        (b"[1, 2]", "not a JSON object"),
        (b"null", "not a JSON object"),
        (b'"text"', "not a JSON object"),
    ],
)
def test_anything_else_is_one_error_that_completes_a_path(data: bytes, message: str) -> None:
    with pytest.raises(NotAJsonObject) as info:
        json_object(data)
    assert str(info.value).startswith(message)
    assert isinstance(info.value, ValueError)  # callers that skip bad lines keep their one except

"""The record decorator: the dataclass behaviour the package relies on, built without dataclasses' cost."""

from __future__ import annotations

from dataclasses import field

import pytest

from copilot_otel.model.records import RecordBase, SpanRecord, field_names, record, replace


@record
class _Base(RecordBase):
    a: int
    b: str = "b"


@record
class _Child(_Base):
    c: list[int] = field(default_factory=list)
    d: tuple[int, ...] = ()


def test_init_takes_positional_and_keyword_arguments_with_defaults() -> None:
    one = _Child(1)
    assert (one.a, one.b, one.c, one.d) == (1, "b", [], ())
    two = _Child(2, "x", [3], d=(4,))
    assert (two.a, two.b, two.c, two.d) == (2, "x", [3], (4,))
    with pytest.raises(TypeError):
        _Child()  # type: ignore[call-arg]  # a is required
    with pytest.raises(TypeError):
        _Child(1, nope=2)  # type: ignore[call-arg]


def test_a_default_factory_gives_each_record_its_own_value() -> None:
    first, second = _Child(1), _Child(2)
    first.c.append(1)
    assert second.c == []


def test_records_are_slotted_compare_by_value_and_are_unhashable() -> None:
    one = _Child(1)
    with pytest.raises(AttributeError):
        one.e = 5  # type: ignore[attr-defined]  # slots: no instance dict
    assert not hasattr(one, "__dict__")
    assert _Child(1, c=[2]) == _Child(1, c=[2])
    assert _Child(1) != _Child(2)
    assert _Base(1) != _Child(1)  # another class is never equal
    with pytest.raises(TypeError):
        hash(one)
    assert repr(_Child(1)) == "_Child(a=1, b='b', c=[], d=())"


def test_field_names_and_replace_follow_the_declaration_order() -> None:
    assert field_names(_Child) == ("a", "b", "c", "d")
    assert field_names(SpanRecord)[:3] == ("trace_id", "span_id", "parent_span_id")
    one = _Child(1, "x", [1])
    other = replace(one, b="y")
    assert (other.a, other.b, other.c) == (1, "y", [1])
    assert one.b == "x"  # the original is unchanged


def test_what_records_do_not_support_fails_loudly() -> None:
    with pytest.raises(TypeError, match="init fields"):

        @record
        class _NoInit(RecordBase):
            a: int = field(init=False)

"""How a typed record becomes the JSON of the results file and the store, and back: one cattrs
converter in its own shape (a field's name is its key, a nested record a nested object), with
one hook per value type where reading is stricter than cattrs' default.

Reading is strict where no promise says otherwise (docs/results-schema.md): a missing key gives
the field's default, a key no field holds is left out, an int reads as a float and null in a
float field as NaN; any other value of the wrong type is a :class:`RecordError` naming its key
path, in one line. Written JSON is strict (:mod:`.jsontext`). Pure: no pytest.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, Self

import cattrs
from cattrs.cols import homogenous_tuple_structure_factory, list_structure_factory

from .errors import DataError
from .jsontext import restored


class RecordError(DataError):
    """A record's dict holds a value of the wrong type: ``KEY.PATH: what was expected``."""


converter = cattrs.Converter(unstruct_collection_overrides={tuple: list}, detailed_validation=True)
"""Tuples are written as lists, enums as their values, records as their dicts."""


def wrong(expected: str, value: Any) -> TypeError:
    return TypeError(f"expected {expected}, got {type(value).__name__} {value!r}"[:160])


def _number(value: Any, _: type) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong("a number", value)
    return float(value)


def _exactly(kind: type, expected: str) -> Callable[[Any, type], Any]:
    def structure(value: Any, _: type) -> Any:
        if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind):
            raise wrong(expected, value)
        return value

    return structure


def json_object(value: Any, _: Any = None) -> dict[str, Any]:
    """A JSON object as a dict; TypeError for anything else."""
    if not isinstance(value, Mapping):
        raise wrong("an object", value)
    return dict(value)


def _int_or_float(value: Any, hint: Any) -> int | float | None:
    """``int | float``: a count stays an int (a concurrency), a float a float (a rate)."""
    if value is None and type(None) in typing.get_args(hint):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong("a number", value)
    return value


def _list_of(hint: Any, _: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """A list or variadic tuple field: only a JSON list (cattrs would take a text's letters)."""
    tuple_hint = typing.get_origin(hint) is tuple
    factory = homogenous_tuple_structure_factory if tuple_hint else list_structure_factory
    items = factory(hint, converter)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise wrong("a list", value)
        return items(value, hint)

    return structure


def _is_list(hint: Any) -> bool:
    origin: Any = typing.get_origin(hint)
    return origin is list or (origin is tuple and typing.get_args(hint)[-1:] == (Ellipsis,))


converter.register_structure_hook_factory(_is_list, _list_of)
converter.register_structure_hook(float, _number)
converter.register_structure_hook_func(
    lambda t: {int, float} <= set(typing.get_args(t)) <= {int, float, type(None)}, _int_or_float
)
converter.register_structure_hook(int, _exactly(int, "an integer"))
converter.register_structure_hook(str, _exactly(str, "text"))
converter.register_structure_hook(bool, _exactly(bool, "true or false"))
converter.register_structure_hook_func(
    lambda t: t in (dict[str, Any], Mapping[str, Any]), json_object
)
converter.register_structure_hook(StrEnum, lambda value, cls: cls(value))  # not as text
converter.register_unstructure_hook(StrEnum, lambda value: value.value)


def located(error: Exception) -> tuple[str, str]:
    """Where cattrs' first error is (``stats.repeats[0]``, "" at the top), and what it is."""
    first = cattrs.transform_error(
        error,
        path="$",
        format_exception=lambda exc, _: (
            f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        ),
    )[0]
    problem, _, where = first.rpartition(" @ ")
    return where.removeprefix("$").removeprefix("."), problem


def one_line(error: Exception) -> str:
    """cattrs' first error as ``stats.repeats[0].ttft.p50_ms: expected a number, got str 'x'``."""
    where, problem = located(error)
    return f"{where}: {problem}" if where else problem


class Record:
    """A typed record (a frozen dataclass) written and read by :data:`converter`."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-friendly dict of the results file and the store."""
        return typing.cast(dict[str, Any], converter.unstructure(self))

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """The record of a dict :meth:`to_dict` wrote (None: a missing dict, read as ``{}``);
        a value of the wrong type raises :class:`RecordError` naming its key path."""
        if data is not None and not isinstance(data, Mapping):
            raise RecordError(str(wrong("an object", data)))
        try:
            return converter.structure(restored({} if data is None else data), cls)
        except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as error:
            raise RecordError(one_line(error)) from None

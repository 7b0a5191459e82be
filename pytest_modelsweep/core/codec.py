"""How a typed record becomes the JSON of the results file and the store, and back: one cattrs
converter, with one hook per value type where our JSON differs from cattrs' default.

A :class:`Record` subclass (a frozen dataclass) opts in by declaring fields only; where its JSON
differs, a field's metadata (:func:`key`) says so (docs/architecture.md, "Records and their
JSON"). Reading is strict where no promise says otherwise (docs/results-schema.md); written JSON
is strict (:func:`strict_json`). Pure: no pytest.
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

import cattrs
from cattrs.cols import homogenous_tuple_structure_factory, list_structure_factory
from cattrs.gen import make_dict_structure_fn, override

from .errors import DataError


class RecordError(DataError):
    """A record's dict holds a value of the wrong type: ``KEY.PATH: what was expected``."""


converter = cattrs.Converter(unstruct_collection_overrides={tuple: list}, detailed_validation=True)
"""Tuples are written as lists, enums as their values, records as their dicts."""


def _wrong(expected: str, value: Any) -> TypeError:
    return TypeError(f"expected {expected}, got {type(value).__name__} {value!r}"[:160])


def _number(value: Any, _: type) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong("a number", value)
    return float(value)


def _exactly(kind: type, expected: str) -> Callable[[Any, type], Any]:
    def structure(value: Any, _: type) -> Any:
        if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind):
            raise _wrong(expected, value)
        return value

    return structure


def _object(value: Any, _: type) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _wrong("an object", value)
    return dict(value)


def number_or_none(value: Any) -> float | None:
    """A JSON number (not a bool) as a float, anything else as None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def int_or_none(value: Any) -> int | None:
    """A JSON integer (not a bool), anything else as None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int_or_float(value: Any, hint: Any) -> int | float | None:
    """``int | float``: a count stays an int (a concurrency), a float a float (a rate)."""
    if value is None and type(None) in typing.get_args(hint):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong("a number", value)
    return value


def _list_of(hint: Any, _: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """A list or variadic tuple field: only a JSON list (cattrs would take a text's letters)."""
    items = (
        homogenous_tuple_structure_factory
        if typing.get_origin(hint) is tuple
        else list_structure_factory
    )(hint, converter)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise _wrong("a list", value)
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
converter.register_structure_hook_func(lambda t: t in (dict[str, Any], Mapping[str, Any]), _object)
converter.register_structure_hook(StrEnum, lambda value, cls: cls(value))  # not as text
converter.register_unstructure_hook(StrEnum, lambda value: value.value)
for _json in (dict, list):  # a JSON object or list field is written as it is
    converter.register_unstructure_hook(_json, lambda value: value)


NON_FINITE = "non_finite"
"""The key listing what a written object held that JSON cannot: path → ``nan``/``inf``/``-inf``."""


def finite(value: Any) -> Any:
    """``value`` with each NaN or infinity as None; an object that held one lists them under
    :data:`NON_FINITE` (``stats.repeats[0].fidelity``: ``nan``), beside those listed before."""
    found: dict[str, str] = {}

    def walk(item: Any, path: str) -> Any:
        if isinstance(item, float) and not math.isfinite(item):
            found[path] = repr(item)
            return None
        if isinstance(item, Mapping):
            return {k: walk(v, f"{path}.{k}" if path else str(k)) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(item)]
        return item

    written = walk(value, "")
    if found and isinstance(written, dict):
        before = written.get(NON_FINITE)
        written[NON_FINITE] = {**(before if isinstance(before, dict) else {}), **found}
    return written


def strict_json(value: Any, **options: Any) -> str:
    """JSON text every parser reads (:func:`finite`); a non-finite float left is a ValueError."""
    return json.dumps(finite(value), allow_nan=False, **options)


def check_fields(data: Any, cls: type, read: Callable[[Any], Any] | None = None) -> None:
    """Raise :class:`RecordError` (``KEY: expected ...``) where ``data`` is not an object or
    holds a value of the wrong type for a field of the dataclass ``cls``; ``read`` (the
    class's own reader) must take it too. A key no field holds, or one left out, is no error."""
    if not isinstance(data, Mapping):
        raise RecordError(str(_wrong("an object", data)))
    for name, hint, structure in _field_readers(cls):
        if name in data:
            try:
                structure(data[name], hint)
            except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as error:
                where, problem = _located(error)
                raise RecordError(
                    f"{name}{'' if where.startswith('[') or not where else '.'}{where}: {problem}"
                ) from None
    if read is not None:
        try:
            read(data)
        except (KeyError, TypeError, ValueError) as error:
            raise RecordError(
                f"{'missing key ' if isinstance(error, KeyError) else ''}{error}"[:200]
            ) from None


_FIELD_READERS: dict[type, list[tuple[str, Any, Callable[[Any, Any], Any]]]] = {}


def _field_readers(cls: type) -> list[tuple[str, Any, Callable[[Any, Any], Any]]]:
    """Each field of the dataclass ``cls``: its name, type and the converter's reader."""
    if cls not in _FIELD_READERS:
        hints = typing.get_type_hints(cls)
        _FIELD_READERS[cls] = [
            (spec.name, hints[spec.name], converter.get_structure_hook(hints[spec.name]))
            for spec in fields(cls)
        ]
    return _FIELD_READERS[cls]


# --------------------------------------------------------------------------- field metadata


Hook = tuple[Callable[[Any], dict[str, Any]], Callable[[Mapping[str, Any]], Any]]
"""A field's own keys: ``write(record)`` gives them, ``read(record's dict)`` the field's value."""


def key(
    name: str | None = None,
    *,
    omit_none: bool = False,
    when: str | None = None,
    rest: bool = False,
    hook: Hook | None = None,
) -> dict[str, Any]:
    """A field's metadata: its key (default: its name), absent when None, written only while
    the bool field ``when`` is true (or the attribute ``when`` is not None), the rest of the
    dict (every key no other field holds), or the keys its ``hook`` writes and reads."""
    return {"key": name, "omit_none": omit_none, "when": when, "rest": rest, "hook": hook}


_FLAT: dict[type, Hook] = {}


def flat(
    cls: type, write: Callable[[Any], dict[str, Any]], read: Callable[[Mapping[str, Any]], Any]
) -> None:
    """Write ``cls`` values into their parent's dict (``write``), and read them from it
    (``read``: None when the parent holds none)."""
    _FLAT[cls] = (write, read)


@dataclass(frozen=True)
class _Entry:
    """One key of a record's dict: the attribute it comes from and how it is written."""

    name: str
    key: str
    omit_none: bool = False
    when: str | None = None
    hook: Hook | None = None
    rest: bool = False
    derived: bool = False


def _flat_hook(name: str, hint: Any) -> Hook | None:
    """The hook of a field whose type is :func:`flat` (or None)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next((a for a in typing.get_args(hint) if a is not type(None)), None)
    if hint not in _FLAT:
        return None
    write, read = _FLAT[hint]
    return (
        lambda record: {} if getattr(record, name) is None else write(getattr(record, name)),
        read,
    )


def _plan(cls: type[Record]) -> tuple[_Entry, ...]:
    """The keys a record writes, in order (a ``rest`` field first)."""
    if cls not in _PLANS:
        _PLANS[cls] = _planned(cls)
    return _PLANS[cls]


_PLANS: dict[type, tuple[_Entry, ...]] = {}


def _planned(cls: type[Record]) -> tuple[_Entry, ...]:
    hints = typing.get_type_hints(cls)
    specs = {spec.name: spec for spec in fields(cls) if spec.name != "shape"}
    flags = {spec.metadata.get("when") for spec in specs.values()}
    names = list(cls.order)
    if not names:
        for name in specs:
            names += [name, *(d for d, after in cls.derived.items() if after == name)]
        names += [name for name, after in cls.derived.items() if after is None]
    entries: list[_Entry] = []
    for name in names:
        if name not in specs:
            entries.append(_Entry(name, name, derived=True))
        elif not (name in flags and hints[name] is bool):
            meta = specs[name].metadata
            entries.append(
                _Entry(
                    name,
                    meta.get("key") or name,
                    meta.get("omit_none", False),
                    meta.get("when"),
                    meta.get("hook") or _flat_hook(name, hints[name]),
                    meta.get("rest", False),
                )
            )
    return tuple(sorted(entries, key=lambda entry: not entry.rest))


def declared_keys(cls: type[Record]) -> frozenset[str]:
    """The top-level keys a record of ``cls`` names itself (its fields' and derived keys; not
    those a ``rest`` field or a hook holds)."""
    return frozenset(
        entry.key.split(".", 1)[0] for entry in _plan(cls) if not entry.rest and not entry.hook
    )


def _written(record: Record) -> dict[str, Any]:
    """The dict of a record's fields (and derived keys), by its plan."""
    data: dict[str, Any] = {}
    for entry in _plan(record.layout()):
        value = getattr(record, entry.name)
        if entry.derived and callable(value):
            value = value()
        flag = getattr(record, entry.when) if entry.when else True
        if flag is None or flag is False or (entry.omit_none and value is None):
            continue
        if entry.rest:
            data.update(converter.unstructure(value))
        elif entry.hook:
            data.update(entry.hook[0](record))
        elif "." in entry.key:
            outer, inner = entry.key.split(".", 1)
            data.setdefault(outer, {})[inner] = converter.unstructure(value)
        else:
            data[entry.key] = converter.unstructure(value)
    return data


def _synthetic(entry: _Entry) -> str:
    """The key a hooked, flag or rest field is read under (the reader puts it there)."""
    return f"<{entry.name}>"


def _structure_fn(cls: type[Record]) -> Callable[[Mapping[str, Any]], Record]:
    """cattrs' generated reader of ``cls``, after the dict is prepared for its special fields."""
    if cls not in _READERS:
        _READERS[cls] = _reader(cls)
    return _READERS[cls]


_READERS: dict[type, Callable[[Mapping[str, Any]], Record]] = {}


def _reader(cls: type[Record]) -> Callable[[Mapping[str, Any]], Record]:
    plan = [entry for entry in _plan(cls) if not entry.derived]
    unread = {spec.name for spec in fields(cls)} - {entry.name for entry in plan}
    flags = {entry.when: entry.key for entry in plan if entry.when in unread}
    special = [entry for entry in plan if entry.hook or entry.rest] + [
        _Entry(name, name) for name in flags
    ]
    nested = [entry for entry in plan if "." in entry.key]
    renamed: dict[str, Any] = {name: override(omit=True) for name in unread - flags.keys()}
    renamed.update({entry.name: override(rename=entry.key) for entry in plan})
    renamed.update(
        {
            entry.name: override(
                rename=_synthetic(entry),
                struct_hook=((lambda value, _: value) if entry.hook else None),
            )
            for entry in special
        }
    )
    generated: Callable[[Mapping[str, Any], type], Record] = make_dict_structure_fn(
        cls, converter, _cattrs_detailed_validation=True, **renamed
    )
    known = {entry.key for entry in _plan(cls) if not entry.rest}

    def structure(data: Mapping[str, Any]) -> Record:
        if not isinstance(data, Mapping):
            raise _wrong("an object", data)
        if special or nested:
            prepared = dict(data)
            for entry in nested:
                outer, inner = entry.key.split(".", 1)
                if isinstance(data.get(outer), Mapping) and inner in data[outer]:
                    prepared[entry.key] = data[outer][inner]
            for entry in special:
                prepared[_synthetic(entry)] = (
                    {k: v for k, v in data.items() if k not in known}
                    if entry.rest
                    else flags[entry.name] in data
                    if entry.name in flags
                    else entry.hook[1](data)
                    if entry.hook
                    else data
                )
            data = prepared
        return generated(data, cls)

    return structure


def _one_line(error: Exception) -> str:
    """``stats.repeats[0].ttft.p50_ms: expected a number, got str 'x'``."""
    where, problem = _located(error)
    return f"{where}: {problem}" if where else problem


def _located(error: Exception) -> tuple[str, str]:
    """Where in the dict cattrs' first error is (``stats.repeats[0]``, "" at the top), and
    what it is."""

    def text(exc: BaseException, _: type | None) -> str:
        if isinstance(exc, KeyError):
            return f"missing key {exc}"
        return str(exc)

    first = cattrs.transform_error(error, path="$", format_exception=text)[0]
    problem, _, where = first.rpartition(" @ ")
    return where.removeprefix("$").removeprefix(".").replace("<", "").replace(">", ""), problem


# --------------------------------------------------------------------------- records


def _same(a: Any, b: Any) -> bool:
    """Whether two JSON values write the same text: same types, same key order, NaN = NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@dataclass(frozen=True)
class Shape:
    """What a record read from a dict keeps of it, so that it writes that dict back key for key
    in its order (docs/results-schema.md): ``source`` the dict, ``read`` what the record's
    fields wrote of it then. A key no field writes back the same (a user's own figure, a value
    of another type, a key the writer leaves out) is written as read; a field changed since
    (``dataclasses.replace``) writes its new value, also under a key the dict lacked."""

    source: Mapping[str, Any] | None = None
    read: Mapping[str, Any] = field(default_factory=dict)

    @property
    def kept(self) -> dict[str, Any]:
        """The keys of the dict that no field writes back the same."""
        return {
            k: v
            for k, v in (self.source or {}).items()
            if k not in self.read or not _same(self.read[k], v)
        }

    def apply(self, written: dict[str, Any]) -> dict[str, Any]:
        if self.source is None:
            return written
        changed = {
            k: v for k, v in written.items() if k not in self.read or not _same(v, self.read[k])
        }
        out = {
            k: changed.get(k, v)
            for k, v in self.source.items()
            if k in written or k not in self.read
        }
        out.update((k, v) for k, v in changed.items() if k not in out)
        return out


RecordT = TypeVar("RecordT", bound="Record")


@dataclass(frozen=True)
class Record:
    """A typed record with ``to_dict``/``from_dict``, written and read by :data:`converter`
    (the module's docstring says how a field changes its key)."""

    derived: ClassVar[Mapping[str, str | None]] = {}
    """Properties (or methods) written too: name → the field they follow (None: the end)."""
    order: ClassVar[tuple[str, ...]] = ()
    """The fields and properties written, in order, where they differ from the above."""
    shape: Shape = field(default_factory=Shape, compare=False, repr=False, kw_only=True)

    def layout(self) -> type[Record]:
        """The class whose fields' metadata and order write this record (its own)."""
        return type(self)

    def written(self) -> dict[str, Any]:
        """The record's keys as its writer writes them (JSON values)."""
        return _written(self)

    @classmethod
    def read(cls: type[RecordT], data: Mapping[str, Any]) -> RecordT:
        """The record of a dict (raises cattrs' errors; :meth:`from_dict` makes them one line)."""
        return typing.cast(RecordT, _structure_fn(cls)(data))

    def to_dict(self) -> dict[str, Any]:
        """The JSON-friendly dict of the results file and the store."""
        return self.shape.apply(self.written())

    @classmethod
    def from_dict(cls: type[RecordT], data: Any) -> RecordT:
        """The record of a dict written by :meth:`to_dict` (of any earlier version; None: a
        missing dict, read as ``{}``); a value of the wrong type raises :class:`RecordError`
        naming its key."""
        try:
            return _kept(cls, {} if data is None else data)
        except RecordError:
            raise
        except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as error:
            raise RecordError(_one_line(error)) from None


def _kept(cls: type[RecordT], data: Mapping[str, Any]) -> RecordT:
    record = cls.read(data)
    return replace(record, shape=Shape(dict(data), record.written()))


converter.register_structure_hook_func(
    lambda t: isinstance(t, type) and issubclass(t, Record), lambda data, cls: _kept(cls, data)
)
converter.register_unstructure_hook_func(
    lambda t: isinstance(t, type) and issubclass(t, Record), lambda record: record.to_dict()
)

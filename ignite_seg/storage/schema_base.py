"""The machinery of the file records in :mod:`ignite_seg.storage.schemas`: keys checked, arrays and JSON converted.

A record is a frozen dataclass. Its fields are the file's keys; a field with a default may be absent
from a file written by an older version (or by hand) and reads as that default, unless the reading
is ``strict`` (the tests'), which refuses an unknown key and a missing one that the writer always writes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, TypeVar

import numpy as np

from ..exceptions import IgniteSegError
from .atomic import named_damage, write_npz

__all__ = ["SchemaError", "NpzRecord", "JsonSection", "check_keys", "optional", "absent_ok", "section"]

N = TypeVar("N", bound="NpzRecord")
J = TypeVar("J", bound="JsonSection")


class SchemaError(IgniteSegError, ValueError):
    """A file in ``hparams/`` does not hold the keys its record expects."""


def optional(**meta: Any) -> Any:
    """A field an older folder may lack (read as ``None``)."""
    return field(default=None, metadata=meta)


def absent_ok() -> Any:
    """A field the writer itself leaves out while it is ``None`` (a step not reached yet)."""
    return field(default=None, metadata={"absent_ok": True})


def check_keys(cls: type, keys: set[str], strict: bool, what: str) -> None:
    """Refuse unknown keys (strict) and missing ones: required always, any written one when strict."""
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    unknown = sorted(keys - names)
    if strict and unknown:
        raise SchemaError(f"{what} holds key(s) {unknown} that {cls.__name__} does not know (it knows "
                          f"{sorted(names)}); add them to the record in ignite_seg/schemas.py")
    for f in fields:
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.name not in keys and (required or (strict and not f.metadata.get("absent_ok"))):
            raise SchemaError(f"{what} lacks the key {f.name!r} of {cls.__name__}; a file the tuner wrote has "
                              "it: re-run the tune, or read the folder with a matching ignite_seg version")


class NpzRecord:
    """``to_npz()``/``from_npz()`` for a frozen dataclass of arrays and 0-d scalars.

    A scalar field names its Python type in its metadata (``scalar=int``); ``None`` fields are not written.
    """

    #: set by ``@dataclass`` on every subclass (declared here so that type checkers know a record is one)
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_npz(self) -> dict[str, np.ndarray]:
        return {f.name: np.asarray(getattr(self, f.name)) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}

    @classmethod
    def from_npz(cls: type[N], arrays: Mapping[str, Any], *, strict: bool = False) -> N:
        check_keys(cls, set(arrays), strict, cls.__name__)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in arrays:
                scalar: Callable[[Any], Any] | None = f.metadata.get("scalar")
                values[f.name] = scalar(np.asarray(arrays[f.name]).item()) if scalar else np.asarray(arrays[f.name])
        return cls(**values)

    @classmethod
    def coerce(cls: type[N], data: N | Mapping[str, Any] | None) -> N | None:
        """A record from a record, a mapping of arrays (read leniently) or ``None``."""
        return data if data is None or isinstance(data, cls) else cls.from_npz(data)  # type: ignore[arg-type]

    def write(self, path: str | Path) -> None:
        write_npz(path, **self.to_npz())

    @classmethod
    def read(cls: type[N], path: str | Path, *, strict: bool = False) -> N | None:
        """The record in ``path``, or ``None`` when the file does not exist."""
        try:
            with named_damage(Path(path)), np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except FileNotFoundError:
            return None
        return cls.from_npz(arrays, strict=strict)


class JsonSection:
    """``to_json()``/``from_json()`` for a frozen dataclass that is (part of) a JSON file.

    A field whose metadata holds ``load`` is a nested section: ``load(value, strict)`` reads it.
    Fields made with :func:`absent_ok` are left out while ``None``.
    """

    #: set by ``@dataclass`` on every subclass (declared here so that type checkers know a record is one)
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get("absent_ok"):
                continue
            out[f.name] = _json_value(value)
        return out

    @classmethod
    def from_json(cls: type[J], data: Mapping[str, Any], *, strict: bool = False) -> J:
        if not isinstance(data, Mapping):
            raise SchemaError(f"{cls.__name__} must be a JSON object, got {type(data).__name__}")
        check_keys(cls, set(data), strict, cls.__name__)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                load = f.metadata.get("load")
                value = data[f.name]
                values[f.name] = load(value, strict) if load and value is not None else value
        return cls(**values)


def _json_value(value: Any) -> Any:
    if isinstance(value, JsonSection):
        return value.to_json()
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def section(cls: type[JsonSection]) -> Callable[[Any, bool], Any]:
    """The ``load`` of a field that holds a nested ``cls``."""
    return lambda value, strict: cls.from_json(value, strict=strict)

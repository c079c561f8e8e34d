"""A mixin for the frozen settings dataclasses: to and from the JSON records in run.json."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, TypeVar

__all__ = ["JsonRecord"]

R = TypeVar("R", bound="JsonRecord")


class JsonRecord:
    """``to_dict()`` for run.json, JSON's own values (a tuple field as a list, as it reads back);
    ``from_dict()`` ignores keys the class does not know."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = dataclasses.asdict(self)  # type: ignore[call-overload]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})

"""A mixin for the frozen settings dataclasses: to and from the JSON records in run.json."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, TypeVar

__all__ = ["JsonRecord"]

R = TypeVar("R", bound="JsonRecord")


class JsonRecord:
    """``to_dict()`` for run.json; ``from_dict()`` ignores keys the class does not know."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})

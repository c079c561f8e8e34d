"""A mixin for the frozen settings dataclasses: to and from the JSON records in run.json."""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping, TypeVar

__all__ = ["JsonRecord"]

R = TypeVar("R", bound="JsonRecord")


class JsonRecord:
    """``to_dict()`` for run.json, JSON's own values (a tuple field as a list, as it reads back);
    ``from_dict()`` ignores keys the class does not know.

    Keys, like ``repr``, come in the order a reader looks for them: the fields the record declares
    itself first (a recipe's learning rates, batch size, epochs), then those of the parts it
    inherits (:class:`~ignite_seg.config.recipe_options.RecipeOptions`: optimizer, updates, schedule).
    """

    #: set by ``@dataclass`` on every subclass (declared here so that type checkers know a record is one)
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    def _ordered_names(cls) -> list[str]:
        own = cls.__dict__.get("__annotations__", {})
        names = [f.name for f in dataclasses.fields(cls)]
        return [n for n in names if n in own] + [n for n in names if n not in own]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = dataclasses.asdict(self)
        return {k: list(data[k]) if isinstance(data[k], tuple) else data[k] for k in self._ordered_names()}

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._ordered_names())
        return f"{type(self).__qualname__}({values})"

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

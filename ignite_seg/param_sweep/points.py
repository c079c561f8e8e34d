"""The points of a sweep: checked, labelled, and applied to a loader spec.

A point is a dict of keyword arguments (``{"hidden": 32}``) or a tuple of positional arguments
(``(32, "relu")``); a grid ``{"hidden": [8, 32], "act": ["relu", "tanh"]}`` is the list of every
combination of its values (the first key varying slowest). A point's arguments are added to
one loader's (``vary``, the model loader by default): positional ones after the loader's own,
keyword ones over the loader's own.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from ..config.specs import LoaderSpec
from ..exceptions import ConfigError, ConfigTypeError

__all__ = ["SweepPoint", "check_points", "check_vary", "point_spec", "param_table", "VARY_CHOICES", "Vary"]

Vary = Literal["model", "dataset", "loss"]
VARY_CHOICES: tuple[str, ...] = ("model", "dataset", "loss")


@dataclass(frozen=True)
class SweepPoint:
    """One point: its index, the loader arguments it adds and a readable label."""

    index: int
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return ", ".join(parts)

    def to_json(self) -> str:
        """The point as JSON (arguments that are not JSON values are written as their ``repr``)."""
        return json.dumps({"args": list(self.args), "kwargs": dict(self.kwargs)}, default=repr, sort_keys=True)


def check_vary(vary: Any) -> Vary:
    if vary not in VARY_CHOICES:
        raise ConfigError(f"vary must be one of {VARY_CHOICES} (the loader each point's arguments go to), "
                          f"got {vary!r}.")
    return vary  # type: ignore[no-any-return]


def check_points(points: Any, grid: Any) -> tuple[SweepPoint, ...]:
    """The points of ``points=`` or ``grid=`` (exactly one of them), each checked.

    Raises:
        ConfigError: both or neither given, an empty list or grid, a repeated point.
        ConfigTypeError: a point that is neither a dict with string keys nor a tuple/list.
    """
    if (points is None) == (grid is None):
        raise ConfigError("sweep: pass exactly one of points=[{...}, ...] (a list of loader arguments) and "
                          f"grid={{name: [values]}}, got points={points!r} and grid={grid!r}.")
    raw = _expand_grid(grid) if grid is not None else points
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Sequence) or not raw:
        raise ConfigError(f"points must be a non-empty list of dicts or tuples of loader arguments, got {raw!r}; "
                          "e.g. points=[{'hidden': 8}, {'hidden': 32}].")
    out = tuple(_one_point(k, value) for k, value in enumerate(raw))
    seen: dict[str, int] = {}
    for p in out:
        key = p.to_json()
        if key in seen:
            raise ConfigError(f"points[{p.index}] ({p.label}) repeats points[{seen[key]}]; each point runs once, "
                              "use trials= for repetitions.")
        seen[key] = p.index
    return out


def _expand_grid(grid: Any) -> list[dict[str, Any]]:
    if not isinstance(grid, Mapping) or not grid or not all(isinstance(k, str) for k in grid):
        raise ConfigError(f"grid must be a non-empty dict {{argument name: [values]}}, got {grid!r}.")
    for name, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ConfigError(f"grid[{name!r}] must be a non-empty list of values, got {values!r}.")
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


def _one_point(k: int, value: Any) -> SweepPoint:
    if isinstance(value, Mapping):
        if not all(isinstance(name, str) for name in value):
            raise ConfigTypeError(f"points[{k}] must have string keys (keyword arguments), got {value!r}.")
        return SweepPoint(index=k, kwargs=dict(value))
    if isinstance(value, (tuple, list)):
        return SweepPoint(index=k, args=tuple(value))
    raise ConfigTypeError(f"points[{k}] must be a dict of keyword arguments or a tuple of positional arguments, "
                          f"got {value!r} ({type(value).__name__}); e.g. {{'hidden': 32}} or (32,).")


def point_spec(base: LoaderSpec, point: SweepPoint) -> LoaderSpec:
    """``base`` with the point's arguments added (positional after, keywords over the loader's)."""
    return dataclasses.replace(base, args=tuple(base.args) + point.args, kwargs={**base.kwargs, **point.kwargs})


def param_table(points: Sequence[SweepPoint]) -> tuple[list[str], np.ndarray]:
    """The parameter names (``arg0``... for positional ones, then keyword names in first-seen order)
    and a (K, P) float table of their values, NaN where not a number or not set."""
    n_args = max((len(p.args) for p in points), default=0)
    names = [f"arg{i}" for i in range(n_args)]
    for p in points:
        names.extend(k for k in p.kwargs if k not in names)
    table = np.full((len(points), len(names)), np.nan)
    for row, p in enumerate(points):
        values = {**{f"arg{i}": a for i, a in enumerate(p.args)}, **p.kwargs}
        for col, name in enumerate(names):
            table[row, col] = _number(values.get(name))
    return names, table


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return math.nan
    return float(value)

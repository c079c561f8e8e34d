"""ignite-simple's ``hyperparams`` module: preset factories returning settings a script may change.

``hyperparams.slow()`` returns a :class:`HyperparameterSettings` whose fields can be assigned
(``hparams.lr_sweep_len = 20.``), as ignite-simple's scripts do; ``train()`` and ``sweep()`` turn
it into the frozen :class:`ignite_seg.HyperparameterSettings` (``to_settings()``). Every field of
ours can be set; ignite-simple's fields without a counterpart here (``lr_width_only_gradients``,
``batch_pt_min_inits``, ``warmup_lr``, ``warmup_batch``, ``warmup_pts``) are accepted with a
warning and have no effect (docs/migrating.md). A name that is neither raises ``AttributeError``.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from .config.hyperparameters import HyperparameterSettings as FrozenSettings
from .config.presets import get_preset

__all__ = ["HyperparameterSettings", "fastest", "fast", "slow", "slowest", "get_settings", "IGNITE_SIMPLE_ONLY"]

#: ignite-simple's settings with no counterpart in ignite_seg (set: warned about, ignored).
IGNITE_SIMPLE_ONLY = ("lr_width_only_gradients", "batch_pt_min_inits", "warmup_lr", "warmup_batch", "warmup_pts")


class HyperparameterSettings:
    """A mutable view of a tuner preset; ``to_settings()`` gives the frozen record ``train()`` uses."""

    def __init__(self, settings: FrozenSettings) -> None:
        object.__setattr__(self, "_settings", settings)
        object.__setattr__(self, "_ignored", {})

    def __getattr__(self, name: str) -> Any:
        settings = object.__getattribute__(self, "_settings")
        if name in object.__getattribute__(self, "_ignored"):
            return self._ignored[name]
        if name in {f.name for f in dataclasses.fields(settings)}:
            return getattr(settings, name)
        raise AttributeError(f"hyperparameter settings have no field {name!r}; the fields are "
                             f"{[f.name for f in dataclasses.fields(settings)]}")

    def __setattr__(self, name: str, value: Any) -> None:
        settings = object.__getattribute__(self, "_settings")
        if name in {f.name for f in dataclasses.fields(settings)}:
            object.__setattr__(self, "_settings", dataclasses.replace(settings, **{name: value}))
        elif name in IGNITE_SIMPLE_ONLY:
            warnings.warn(f"hparams.{name} is an ignite-simple setting with no counterpart in ignite_seg; it is "
                          "ignored (docs/migrating.md lists what replaces it)", UserWarning, stacklevel=2)
            self._ignored[name] = value
        else:
            raise AttributeError(f"hyperparameter settings have no field {name!r}; set one of "
                                 f"{[f.name for f in dataclasses.fields(settings)]}")

    def to_settings(self) -> FrozenSettings:
        """The frozen record with every change made so far (checked as any settings are)."""
        return object.__getattribute__(self, "_settings")  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"hyperparams.HyperparameterSettings({self.to_settings()!r})"


def fastest() -> HyperparameterSettings:
    return HyperparameterSettings(get_preset("fastest"))


def fast() -> HyperparameterSettings:
    return HyperparameterSettings(get_preset("fast"))


def slow() -> HyperparameterSettings:
    return HyperparameterSettings(get_preset("slow"))


def slowest() -> HyperparameterSettings:
    return HyperparameterSettings(get_preset("slowest"))


def get_settings(preset: str | HyperparameterSettings) -> HyperparameterSettings:
    """ignite-simple's ``get_settings``: a preset name or settings, as mutable settings."""
    return preset if isinstance(preset, HyperparameterSettings) else HyperparameterSettings(get_preset(preset))

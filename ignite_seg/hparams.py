"""Hyperparameter records: fixed recipes and the tuner's presets.

``FixedHyperparameters`` is a recipe the user already knows (no tuning). ``HyperparameterSettings``
controls the tuner; the named presets live in :data:`PRESETS`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

from .exceptions import ConfigError, ConfigTypeError

__all__ = [
    "FixedHyperparameters",
    "HyperparameterSettings",
    "PRESETS",
    "get_preset",
    "resolve_hyperparameters",
]

OptimizerName = Literal["sgd", "adamw"]


@dataclass(frozen=True)
class FixedHyperparameters:
    """A complete training recipe, used as is (no tuning).

    Trials train with a triangular cyclical learning rate that goes from ``lr_start`` to
    ``lr_end`` and back every ``cycle_size_epochs`` epochs, for ``epochs`` epochs in total.
    ``optimizer`` is plain SGD (with optional ``momentum``) or AdamW; ``weight_decay``,
    ``grad_clip_norm`` (clip the gradient norm) and ``amp`` (mixed precision: float16 with a
    gradient scaler on CUDA, bfloat16 on the CPU) are options of the trainer.

    Example:
        >>> hp = FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=32,
        ...                           cycle_size_epochs=4, epochs=8)
        >>> hp.batch_size
        32
    """

    lr_start: float
    lr_end: float
    batch_size: int
    cycle_size_epochs: float
    epochs: int
    optimizer: OptimizerName = "sgd"
    momentum: float = 0.0
    weight_decay: float = 0.0
    grad_clip_norm: float | None = None
    amp: bool = False

    def __post_init__(self) -> None:
        for name in ("lr_start", "lr_end", "cycle_size_epochs", "momentum", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigTypeError(
                    f"FixedHyperparameters.{name} must be a number, got {value!r} "
                    f"({type(value).__name__})."
                )
        for name in ("batch_size", "epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigTypeError(
                    f"FixedHyperparameters.{name} must be an int, got {value!r} "
                    f"({type(value).__name__})."
                )
        if not (self.lr_start > 0 and self.lr_end > 0):
            raise ConfigError(
                f"FixedHyperparameters needs positive learning rates, got lr_start={self.lr_start!r}, "
                f"lr_end={self.lr_end!r}; pass values such as lr_start=0.01, lr_end=0.1."
            )
        if self.batch_size < 1:
            raise ConfigError(f"FixedHyperparameters.batch_size must be >= 1, got {self.batch_size!r}.")
        if self.epochs < 1:
            raise ConfigError(f"FixedHyperparameters.epochs must be >= 1, got {self.epochs!r}.")
        if not self.cycle_size_epochs > 0:
            raise ConfigError(
                f"FixedHyperparameters.cycle_size_epochs must be > 0, got {self.cycle_size_epochs!r}."
            )
        if self.optimizer not in ("sgd", "adamw"):
            raise ConfigError(
                f"FixedHyperparameters.optimizer must be 'sgd' or 'adamw', got {self.optimizer!r}."
            )
        if self.momentum < 0 or self.weight_decay < 0:
            raise ConfigError(
                "FixedHyperparameters.momentum and weight_decay must be >= 0, got "
                f"momentum={self.momentum!r}, weight_decay={self.weight_decay!r}."
            )
        if not isinstance(self.amp, bool):
            raise ConfigTypeError(f"FixedHyperparameters.amp must be True or False, got {self.amp!r}.")
        if self.grad_clip_norm is not None and not self.grad_clip_norm > 0:
            raise ConfigError(
                f"FixedHyperparameters.grad_clip_norm must be None or > 0, got {self.grad_clip_norm!r}."
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FixedHyperparameters:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class HyperparameterSettings:
    """Settings of the tuner. Customise a preset with ``dataclasses.replace``.

    Example:
        >>> import dataclasses
        >>> s = dataclasses.replace(get_preset("fast"), lr_min_inits=3)
        >>> s.lr_min_inits
        3
    """

    # LR range test
    lr_start: float = 1e-5
    lr_end: float = 10.0
    lr_sweep_len: float = 2.0
    lr_min_inits: int = 2
    initial_batch_size: int = 64
    diverge_th: float = 4.0
    # batch size search
    batch_start: int = 16
    batch_end: int = 512
    batch_pts: int = 4
    batch_sweep_len: float = 2.0
    batch_rn_min_inits: int = 1
    rescan_lr_after_bs: bool = False
    # schedule of the final trials
    min_epochs: int = 10
    max_epochs: int = 100
    # optimizer of the final trials (and of the tuning runs)
    optimizer: OptimizerName = "sgd"
    momentum: float = 0.0
    weight_decay: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HyperparameterSettings:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _fastest() -> HyperparameterSettings:
    return HyperparameterSettings(lr_min_inits=1, batch_pts=0, lr_sweep_len=1.0, min_epochs=5)


def _fast() -> HyperparameterSettings:
    return HyperparameterSettings()


def _slow() -> HyperparameterSettings:
    return HyperparameterSettings(lr_min_inits=4, batch_pts=6, batch_rn_min_inits=2)


def _slowest() -> HyperparameterSettings:
    return HyperparameterSettings(
        lr_min_inits=8, batch_pts=8, batch_rn_min_inits=4, rescan_lr_after_bs=True
    )


#: Named presets, each a function returning a fresh ``HyperparameterSettings``.
PRESETS: dict[str, Callable[[], HyperparameterSettings]] = {
    "fastest": _fastest,
    "fast": _fast,
    "slow": _slow,
    "slowest": _slowest,
}


def get_preset(name: str) -> HyperparameterSettings:
    """Return the tuner preset called ``name`` (one of :data:`PRESETS`)."""
    try:
        return PRESETS[name]()
    except KeyError:
        raise ConfigError(
            f"hyperparameters={name!r} is not a preset; use one of {sorted(PRESETS)}, a "
            "HyperparameterSettings or a FixedHyperparameters."
        ) from None


def resolve_hyperparameters(value: Any) -> HyperparameterSettings | FixedHyperparameters:
    """Turn the ``hyperparameters`` argument of ``train()`` into a settings record."""
    if isinstance(value, (HyperparameterSettings, FixedHyperparameters)):
        return value
    if isinstance(value, str):
        return get_preset(value)
    if isinstance(value, Mapping):
        try:
            return FixedHyperparameters(**value)
        except TypeError as exc:
            raise ConfigTypeError(
                f"hyperparameters={dict(value)!r} is not a valid fixed recipe ({exc}); pass "
                "lr_start, lr_end, batch_size, cycle_size_epochs and epochs."
            ) from None
    raise ConfigTypeError(
        f"hyperparameters must be a preset name ({', '.join(sorted(PRESETS))}), a "
        f"HyperparameterSettings or a FixedHyperparameters, got {value!r} ({type(value).__name__})."
    )

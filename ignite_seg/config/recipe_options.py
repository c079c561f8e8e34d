"""The parts of a training recipe that are not tuned numbers, each one record declared once.

:class:`OptimizerSpec` (optimizer, momentum, weight decay, AdamW's betas and eps),
:class:`TrainingOptions` (that plus gradient clipping and AMP: every update, of the trials and of
the tuning runs alike), :class:`ScheduleSpec` (the LR schedule's shape and warmup) and
:class:`RecipeOptions` (all of them and the EMA of the weights). :class:`FixedHyperparameters` and
:class:`HyperparameterSettings` inherit :class:`RecipeOptions`, so their public constructors take
these fields as flat keywords (``FixedHyperparameters(..., optimizer="adamw", eps=1e-6)``,
``dataclasses.replace(preset, momentum=0.9)``) while the code that uses one part reads it as one
record: ``hp.optimizer_spec``, ``hp.options``, ``hp.schedule_spec``. Importing this module imports no torch.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal, TypeVar

__all__ = [
    "OptimizerName", "ScheduleName", "SCHEDULES", "OptimizerSpec", "TrainingOptions", "ScheduleSpec",
    "RecipeOptions",
]

OptimizerName = Literal["sgd", "adamw"]
ScheduleName = Literal["triangular", "one-cycle", "cosine", "inv-sqrt", "constant", "noam"]
#: The schedules, in the order the docs list them (docs/usage.md, "Schedules").
SCHEDULES: tuple[str, ...] = ("triangular", "one-cycle", "cosine", "inv-sqrt", "constant", "noam")

P = TypeVar("P", bound="_Part")


class _Part:
    """A part read out of a record that holds its fields (a recipe or the tuner's settings)."""

    #: set by ``@dataclass`` on every subclass (declared here so that type checkers know a part is one)
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    def values(cls, record: Any) -> dict[str, Any]:
        """The part's fields of ``record`` by name: keyword arguments of any record that holds the part."""
        return {f.name: getattr(record, f.name) for f in fields(cls)}

    @classmethod
    def of(cls: type[P], record: Any) -> P:
        """The part of ``record`` as its own record (checked already where ``record`` was built)."""
        return cls(**cls.values(record))


@dataclass(frozen=True, kw_only=True)
class OptimizerSpec(_Part):
    """The optimizer: plain SGD (with ``momentum``) or AdamW (with ``betas`` and ``eps``), and ``weight_decay``.

    Example:
        >>> from ignite_seg import FixedHyperparameters
        >>> FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=8, cycle_size_epochs=1, epochs=2,
        ...                      optimizer="adamw").optimizer_spec
        OptimizerSpec(optimizer='adamw', momentum=0.0, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-08)
    """

    optimizer: OptimizerName = "sgd"
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8


@dataclass(frozen=True, kw_only=True)
class TrainingOptions(OptimizerSpec):
    """The options of every optimizer update, one record shared by the trials and the tuning runs:
    the optimizer, ``grad_clip_norm`` (``None``: no clipping) and ``amp`` (mixed precision).

    Example:
        >>> from ignite_seg import FixedHyperparameters
        >>> FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=8, cycle_size_epochs=1, epochs=2,
        ...                      amp=True).options.amp
        True
    """

    grad_clip_norm: float | None = None
    amp: bool = False


@dataclass(frozen=True, kw_only=True)
class ScheduleSpec(_Part):
    """The shape of the trials' LR schedule (its learning rates and length are the recipe's numbers):
    ``schedule`` after a linear warmup from 0 over ``warmup_epochs`` or ``warmup_steps`` (one of the two)."""

    schedule: ScheduleName = "triangular"
    warmup_epochs: float = 0.0
    #: warmup counted in optimizer steps (instead of warmup_epochs; the "noam" schedule's W)
    warmup_steps: int = 0


@dataclass(frozen=True, kw_only=True)
class RecipeOptions(ScheduleSpec, TrainingOptions):
    """Everything of a recipe but its tuned numbers (LR range, batch size, epochs): the update options,
    the schedule's shape and ``ema_decay`` (``None``: off). A fixed recipe and the tuner's settings
    both hold it; the tuner copies it into the recipe it chooses (``RecipeOptions.values(settings)``)."""

    ema_decay: float | None = None

    @property
    def optimizer_spec(self) -> OptimizerSpec:
        """The optimizer as one record."""
        return OptimizerSpec.of(self)

    @property
    def options(self) -> TrainingOptions:
        """The options of every update (optimizer, clipping, AMP), for the tuning runs and the trials."""
        return TrainingOptions.of(self)

    @property
    def schedule_spec(self) -> ScheduleSpec:
        """The schedule's shape and warmup as one record."""
        return ScheduleSpec.of(self)

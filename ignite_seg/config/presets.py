"""The tuner's named presets and the resolution of ``train(hyperparameters=...)``.

Each preset is a named function returning a fresh :class:`HyperparameterSettings`; customise one
with ``dataclasses.replace(get_preset("fast"), field=...)``.
"""
from __future__ import annotations

import difflib
from typing import Any, Callable, Mapping

from ..exceptions import ConfigError, ConfigTypeError
from .hyperparameters import FixedHyperparameters, HyperparameterSettings

__all__ = ["PRESETS", "get_preset", "resolve_hyperparameters"]


# The cost caps of each preset (issue 25: lr_sweep_max_examples, lr_holdout_evals,
# batch_sweep_max_examples). The sweep caps sit just above what each preset's ``lr_sweep_len``
# epochs take on the digits benchmark (1,293 items trained on: 3,879, 7,758, 10,344, 12,930
# examples; 243-810 steps at batch 16, twice that for a rescan at batch 8), so small jobs keep
# the sweeps that were measured good, and a sweep never grows past them however large the
# dataset (fastai and Lightning take 100 steps). A cap in steps moved digits' range: its rescan
# at batch 8 cut from 970 to 500 steps raised lr_end by ~50% (bench/RESULTS.md, session 8). One
# measurement of the 512-item held-out slice costs about 16 training steps of a small CNN at
# batch 16 (bench/tune_cost.py), so ``lr_holdout_evals`` keeps the sampling of the held-out curve
# to about the sweep's own cost or less; the curve is smoothed over a tenth of the sweep, several
# samples. The batch candidates' examples sit above digits' 2-3 epochs (2,586-3,879 examples).


def _fastest() -> HyperparameterSettings:
    """Three short sweeps from one initialisation, the range chosen on the training loss, the batch
    size from the noise scale, no runs (no batch-size runs, no length check).

    Its 3-epoch sweeps are too short for the held-out loss: there the range came out 25% lower on the
    regression benchmark (val 0.867 vs 0.895), and per-repeat initialisations moved the noise scale
    across a batch-grid boundary on one digits seed (bench/RESULTS.md, tuner session 2). A third
    repeat (was 2) narrowed the spread of lr_end at a given batch size over 10 seeds (regression CV
    25% -> 18%, digits 7% -> 4.5%; tuner session 3) for ~0.5 s more on a warm 2-core pool.
    """
    return HyperparameterSettings(lr_min_inits=3, lr_shared_init=True, lr_choose_on="train", lr_sweep_len=3.0,
                                  lr_sweep_min_iters=150, batch_pts=0, length_runs=0,
                                  lr_sweep_max_examples=4000, lr_holdout_evals=32, batch_sweep_max_examples=4096)


def _fast() -> HyperparameterSettings:
    """Four sweeps, three candidates halved twice, a rescan at the chosen batch size."""
    return HyperparameterSettings(
        lr_min_inits=4, lr_sweep_len=6.0, batch_pts=3, batch_rn_min_inits=1, batch_sweep_len=2.0,
        rescan_lr_after_bs=True,
        lr_sweep_max_examples=8000, lr_holdout_evals=32, batch_sweep_max_examples=4096,
    )


def _slow() -> HyperparameterSettings:
    """Four longer sweeps, four candidates with two repeats each, a rescan."""
    return HyperparameterSettings(
        lr_min_inits=4, lr_sweep_len=8.0, lr_sweep_min_iters=300, batch_pts=4, batch_rn_min_inits=2,
        batch_sweep_len=2.0, rescan_lr_after_bs=True,
        lr_sweep_max_examples=10500, lr_holdout_evals=64, batch_sweep_max_examples=8192,
    )


def _slowest() -> HyperparameterSettings:
    """Six long sweeps, five candidates with three repeats and longer runs, a rescan."""
    return HyperparameterSettings(
        lr_min_inits=6, lr_sweep_len=10.0, lr_sweep_min_iters=400, batch_pts=5, batch_rn_min_inits=3,
        batch_sweep_len=3.0, rescan_lr_after_bs=True,
        lr_sweep_max_examples=13000, lr_holdout_evals=96, batch_sweep_max_examples=12288,
    )


# Named presets, each a function returning a fresh ``HyperparameterSettings``.
PRESETS: dict[str, Callable[[], HyperparameterSettings]] = {
    "fastest": _fastest,
    "fast": _fast,
    "slow": _slow,
    "slowest": _slowest,
}


def get_preset(name: str) -> HyperparameterSettings:
    """Return the tuner preset called ``name`` (one of :data:`PRESETS`).

    Raises:
        ConfigError: ``name`` is not a preset; the message lists the valid names.

    Example:
        >>> get_preset("fastest").batch_pts
        0
    """
    if not isinstance(name, str):
        raise ConfigTypeError(f"a preset name must be a string, got {name!r} ({type(name).__name__}).")
    try:
        return PRESETS[name]()
    except KeyError:
        close = difflib.get_close_matches(name, PRESETS, n=1)
        raise ConfigError(
            f"hyperparameters={name!r} is not a preset{f' (did you mean {close[0]!r}?)' if close else ''}; use "
            f"one of {sorted(PRESETS)}, a HyperparameterSettings or a FixedHyperparameters."
        ) from None


def resolve_hyperparameters(value: Any) -> HyperparameterSettings | FixedHyperparameters:
    """Turn the ``hyperparameters`` argument of ``train()`` into a settings record."""
    if callable(getattr(value, "to_settings", None)):  # ignite_seg.hyperparams' mutable settings
        value = value.to_settings()
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

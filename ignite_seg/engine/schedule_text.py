"""One sentence saying which learning-rate schedule a recipe trains with, for the log and the reports.

The numbers come from the trainer's own scheduler (:func:`ignite_seg.engine.schedules.simulate_lrs`),
so the sentence stays true to whatever :mod:`ignite_seg.engine.schedules` maps ``[lr_start, lr_end]`` to.
Importing this module imports no torch (the analysis imports it; a reanalysis with nothing to do needs none).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..config.hyperparameters import FixedHyperparameters

__all__ = ["describe_schedule", "as_recipe", "PEAK_ONLY"]

#: Schedules that read only ``lr_end`` (constant holds it; noam's warmup climbs to it and decays from it): their
#: ``lr_start`` is not used (:mod:`ignite_seg.engine.schedules`).
PEAK_ONLY = ("constant", "noam")

#: Steps per epoch of the simulation (the run's own count is not recorded; the values at the
#: schedule's start, peak and end do not depend on it beyond rounding).
STEPS_PER_EPOCH = 40


def as_recipe(hp: FixedHyperparameters | Mapping[str, Any]) -> FixedHyperparameters:
    """The recipe, from itself or a mapping of its fields (``final.json``; ``batch_size`` may be absent)."""
    if isinstance(hp, FixedHyperparameters):
        return hp
    return FixedHyperparameters.from_dict({"batch_size": 1, **hp})


def describe_schedule(hp: FixedHyperparameters | Mapping[str, Any]) -> str:
    """What the trials' learning rate does, e.g. ``"linear warmup from 0 over 2 epochs, then cosine
    decay from 0.01 to 0.001; 40 epochs"`` or ``"triangular cycles between 0.01 and 0.1, 2 cycles of
    4 epochs; 8 epochs"``.

    Example:
        >>> describe_schedule(FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=8,
        ...                                        cycle_size_epochs=4, epochs=8))
        'triangular cycles between 0.01 and 0.1, 2 cycles of 4 epochs; 8 epochs'
    """
    h = as_recipe(hp)
    warm = f"linear warmup from 0 over {_warmup_span(h)}, then " if h.warmup_epochs > 0 or h.warmup_steps > 0 else ""
    if h.schedule == "noam":  # its own warmup: linear up to the peak over W steps, then peak * sqrt(W / k)
        return f"noam: linear up to {_g(h.lr_end)} over W = {_warmup_span(h)}, then {_g(h.lr_end)} · sqrt(W / k); " \
               f"{h.epochs} epochs"
    if h.schedule == "triangular":  # its closed form: no simulation (and no torch) needed
        n = h.epochs / h.cycle_size_epochs
        what = (f"triangular cycles between {_g(h.lr_start)} and {_g(h.lr_end)}, {_g(n)} cycle{'' if n == 1 else 's'} "
                f"of {_g(h.cycle_size_epochs)} epochs")
        return f"{warm}{what}; {h.epochs} epochs"
    first, peak, last = _simulated_points(h)
    what = {"one-cycle": f"one-cycle: up from {first} to {peak}, then down to {last}",
            "cosine": f"cosine decay from {first} to {last}",
            "inv-sqrt": f"inverse-square-root decay from {first} to {last}"}.get(h.schedule, f"constant at {first}")
    return f"{warm}{what}; {h.epochs} epochs"


def _simulated_points(h: FixedHyperparameters) -> tuple[str, str, str]:
    """The schedule's first, peak and last LR after any warmup, read off the trainer's own scheduler."""
    from .schedules import ONE_CYCLE_FINAL_DIV, simulate_lrs, warmup_steps  # torch: only for these schedules

    lrs = simulate_lrs(h, STEPS_PER_EPOCH)
    w = warmup_steps(h, STEPS_PER_EPOCH) if h.warmup_epochs > 0 or h.warmup_steps > 0 else 0
    body = lrs[max(w - 1, 0):]  # step w - 1 is the schedule's first
    nominal = (h.lr_start, h.lr_end, h.lr_start / ONE_CYCLE_FINAL_DIV)
    first, peak, last = (_g(_snap(float(v), nominal)) for v in (body[0], np.max(body), body[-1]))
    return first, peak, last


def _warmup_span(h: FixedHyperparameters) -> str:
    return f"{h.warmup_steps} steps" if h.warmup_steps else f"{_g(h.warmup_epochs)} epochs"


def _snap(value: float, nominal: tuple[float, ...], tol: float = 0.02) -> float:
    """``value``, or the nominal LR within ``tol`` (relative) of it: the simulation's last step lands a
    fraction of a step short of where the run's schedule ends (e.g. cosine at ``lr_start``)."""
    near = min(nominal, key=lambda v: abs(value - v))
    return near if abs(value - near) <= tol * near else value


def _g(value: float) -> str:
    return f"{float(value):.3g}"

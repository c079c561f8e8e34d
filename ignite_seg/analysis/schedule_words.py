"""The summary's words for the final trials' schedule (light: no torch unless a one-cycle needs its constants)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ._mpl import fmt

__all__ = ["schedule_text"]


def schedule_text(hp: Mapping[str, Any]) -> str:
    """The summary's words for the final trials' schedule (``final.json``'s fields), warmup included.

    Example:
        >>> schedule_text({"epochs": 12, "schedule": "noam", "lr_start": 1e-4, "lr_end": 1e-3, "warmup_steps": 60})
        '12 epochs, noam: linear up to the peak lr_end = 0.001 over W = 60 warmup steps, then 0.001 · sqrt(W / k)'
        >>> schedule_text({"epochs": 12, "schedule": "cosine", "lr_start": 1e-4, "lr_end": 1e-3, "warmup_epochs": 1.0})
        '12 epochs, cosine from lr_end = 0.001 down to lr_start = 0.0001, after a linear warmup from 0 over 1 epochs'
    """
    start, end = fmt(float(hp.get("lr_start", np.nan))), fmt(float(hp.get("lr_end", np.nan)))
    name = hp.get("schedule", "triangular")
    steps, epochs = int(hp.get("warmup_steps", 0) or 0), float(hp.get("warmup_epochs", 0.0) or 0.0)
    span = f"{steps} warmup steps" if steps else f"{fmt(epochs)} warmup epochs"
    shapes = {
        "triangular": f"triangular cycles of {fmt(float(hp.get('cycle_size_epochs', np.nan)))} epochs between "
                      f"lr_start = {start} and lr_end = {end}",
        "one-cycle": _one_cycle_text(start, end) if name == "one-cycle" else "",
        "cosine": f"cosine from lr_end = {end} down to lr_start = {start}",
        "inv-sqrt": f"inverse square root from lr_end = {end} down to lr_start = {start}",
        "constant": f"constant at lr_end = {end}",
        "noam": f"noam: linear up to the peak lr_end = {end} over W = {span}, then {end} · sqrt(W / k)",
    }
    text = f"{hp.get('epochs')} epochs, {shapes.get(name, name)}"
    if name != "noam" and (steps or epochs > 0):
        text += f", after a linear warmup from 0 over {steps} steps" if steps else \
            f", after a linear warmup from 0 over {fmt(epochs)} epochs"
    return text


def _one_cycle_text(start: str, end: str) -> str:
    from ..engine.schedules import ONE_CYCLE_FINAL_DIV, ONE_CYCLE_PEAK  # the trainer's own constants

    return (f"one-cycle from lr_start = {start} up to lr_end = {end} over {int(ONE_CYCLE_PEAK * 100)}% of the "
            f"steps, then down to lr_start / {fmt(ONE_CYCLE_FINAL_DIV)}")

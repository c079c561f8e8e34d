"""Sweeps over loader arguments: :func:`sweep` runs ``train()`` at every point on one pool."""
from __future__ import annotations

from .points import SweepPoint
from .run import SweepResult, sweep

__all__ = ["sweep", "SweepResult", "SweepPoint"]

"""ignite-simple's ``gen_sweep``: ``sweeper.sweep`` and ``param_selectors.FixedSweep`` over :func:`ignite_seg.sweep`."""
from __future__ import annotations

from . import param_selectors, sweeper

__all__ = ["sweeper", "param_selectors"]

"""The analysis settings' former home, kept importable: they live in :mod:`ignite_seg.config.analysis`."""
from __future__ import annotations

from ..config.analysis import ALIASES, ANALYSIS_PRESETS, LEVELS, AnalysisSettings, resolve_analysis

__all__ = ["AnalysisSettings", "ANALYSIS_PRESETS", "ALIASES", "LEVELS", "resolve_analysis"]

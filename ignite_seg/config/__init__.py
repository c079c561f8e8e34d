"""Layer 1, what the user asks for, checked: the settings records, the presets, the loader specs and the
argument checks shared by the entry points."""
from __future__ import annotations

from .._lazy import lazy_exports

#: What the layer exposes: name -> its module (imported on first use).
_EXPORTS = {
    "JsonRecord": "records",
    "FixedHyperparameters": "hyperparameters",
    "HyperparameterSettings": "hyperparameters",
    "PRESETS": "presets",
    "get_preset": "presets",
    "resolve_hyperparameters": "presets",
    "AnalysisSettings": "analysis",
    "ANALYSIS_PRESETS": "analysis",
    "resolve_analysis": "analysis",
    "LoaderSpec": "specs",
    "normalize_spec": "specs",
    "check_int": "checks",
    "check_bool": "checks",
    "check_choice": "checks",
    "check_trials": "checks",
    "check_device": "checks",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

"""ignite_seg: tuned, parallel, recorded and analysed PyTorch training with pytorch-ignite.

The public API is re-exported here; importing the package has no side effects.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .analysis import analyze  # noqa: E402
from .analysis.settings import ANALYSIS_PRESETS, AnalysisSettings  # noqa: E402
from .api import TrainResult, TrialSummary, load_model, train  # noqa: E402
from .exceptions import (  # noqa: E402
    AnalysisUnavailableError,
    ConfigError,
    ConfigTypeError,
    FolderError,
    FolderLockedError,
    IgniteSegError,
    TuningError,
)
from .hparams import PRESETS, FixedHyperparameters, HyperparameterSettings, get_preset  # noqa: E402

__all__ = [
    "__version__",
    "train",
    "analyze",
    "load_model",
    "TrainResult",
    "TrialSummary",
    "FixedHyperparameters",
    "HyperparameterSettings",
    "PRESETS",
    "get_preset",
    "AnalysisSettings",
    "ANALYSIS_PRESETS",
    "IgniteSegError",
    "ConfigError",
    "ConfigTypeError",
    "FolderError",
    "FolderLockedError",
    "AnalysisUnavailableError",
    "TuningError",
]

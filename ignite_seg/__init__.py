"""ignite_seg: tuned, parallel, recorded and analysed PyTorch training with pytorch-ignite.

The public API is re-exported here; importing the package has no side effects. The names that
need torch (``train``, ``load_model``, their records) are imported on first use (PEP 562), so
``python -m ignite_seg.reanalyze`` and ``import ignite_seg`` stay cheap.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ._version import __version__
from .analysis import analyze
from .config.analysis import ANALYSIS_PRESETS, AnalysisSettings
from .config.hyperparameters import FixedHyperparameters, HyperparameterSettings
from .config.presets import PRESETS, get_preset
from .exceptions import (
    AnalysisUnavailableError,
    ConfigError,
    ConfigTypeError,
    FolderError,
    FolderLockedError,
    IgniteSegError,
    TuningError,
)

if TYPE_CHECKING:  # the lazy names, typed for checkers and editors
    from .param_sweep import SweepResult, sweep
    from .trainer import Data, TrainResult, TrialSummary, load_model, train
    from .tuner import RangeTestResult, TuneResult, lr_range_test, tune

_LAZY = {
    "Data": "trainer", "train": "trainer", "load_model": "trainer", "TrainResult": "trainer", "TrialSummary": "trainer",
    "tune": "tuner", "TuneResult": "tuner", "lr_range_test": "tuner", "RangeTestResult": "tuner",
    "sweep": "param_sweep", "SweepResult": "param_sweep",
}


#: ignite-simple's modules (``import ignite_seg as ignite_simple``; ``ignite_simple.utils.split``), imported on use.
_SUBMODULES = ("helper", "utils", "hyperparams", "gen_sweep")


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))

__all__ = [
    "__version__",
    "train",
    "Data",
    "tune",
    "TuneResult",
    "sweep",
    "SweepResult",
    "lr_range_test",
    "RangeTestResult",
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

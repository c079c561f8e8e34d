"""Layer 3, what runs inside a worker: one trial (ignite engine and handlers), the tuner's worker tasks,
the recipe check, the batching of data and the scoring of perf."""
from __future__ import annotations

from .._lazy import lazy_exports

#: What the layer exposes: name -> its module (imported on first use).
_EXPORTS = {
    "run_trial": "trainer",
    "create_trainer": "trainer",
    "TrialTask": "trial_records",
    "TrialOutcome": "trial_records",
    "Data": "batching",
    "Scorer": "scoring",
    "AccuracyStyle": "scoring",
    "ACCURACY_STYLES": "scoring",
    "probe_recipe": "probe",
    "run_lr_sweep": "sweeps",
    "run_batch_trial": "sweeps",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

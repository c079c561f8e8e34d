"""Layer 4, the tuner: its pipeline (choose_recipe: LR range test -> batch size -> rescan -> schedule ->
recipe check), the LR range test on live objects, and the pure algorithms it runs."""
from __future__ import annotations

from .._lazy import lazy_exports

#: What the layer exposes: name -> its module (imported on first use).
_EXPORTS = {
    "choose_recipe": "recipe",
    "holdout_indices": "recipe",
    "lr_range_test": "lr_finder",
    "RangeTestResult": "lr_finder",
    "choose_lr_range": "lr_range",
    "geometric_lrs": "lr_range",
    "batch_candidates": "batch_search",
    "scale_lr": "batch_search",
    "pooled_noise_scale": "noise_scale",
    "choose_schedule": "schedule",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

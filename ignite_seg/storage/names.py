"""The names of the run folder's files and folders: one place, used by every writer and reader.

Layout::

    folder/run.json  hparams/  trials/<i>/  results.npz  throughtimes.npz  analysis/
"""
from __future__ import annotations

__all__ = [
    "RUN_JSON", "HPARAMS", "TRIALS", "ANALYSIS", "RESULTS_NPZ", "THROUGHTIMES_NPZ", "RESULT_JSON",
    "THROUGHTIME_NPZ", "HIDDEN_NPZ", "ERROR_TXT", "CHECKPOINT_NAME", "MODEL_PT", "MODEL_INIT_PT",
    "MODEL_RAW_PT", "MODEL_BEST_PT", "FINAL_JSON", "MISC_JSON", "LR_NPZ", "LR_INITIAL_NPZ", "BS_NPZ", "SAMPLED_NPZ",
]

# the run folder
RUN_JSON = "run.json"
HPARAMS = "hparams"
TRIALS = "trials"
ANALYSIS = "analysis"
RESULTS_NPZ = "results.npz"
THROUGHTIMES_NPZ = "throughtimes.npz"

# a trial folder, trials/<i>/
RESULT_JSON = "result.json"
THROUGHTIME_NPZ = "throughtime.npz"
HIDDEN_NPZ = "hidden.npz"
ERROR_TXT = "error.txt"
#: A trial's mid-trial checkpoint, written by its worker (engine/checkpoints.py), removed once the
#: trial's ``result.json`` is written.
CHECKPOINT_NAME = "checkpoint.pt"
MODEL_PT = "model.pt"
MODEL_INIT_PT = "model_init.pt"
MODEL_RAW_PT = "model_raw.pt"
MODEL_BEST_PT = "model_best.pt"

# the tuner's files, hparams/
FINAL_JSON = "final.json"
MISC_JSON = "misc.json"
LR_NPZ = "lr_vs_perf.npz"
LR_INITIAL_NPZ = "lr_vs_perf_initial.npz"
BS_NPZ = "bs_vs_perf.npz"
SAMPLED_NPZ = "bs_sampled.npz"

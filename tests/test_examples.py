"""The worked examples run as a user runs them (a subprocess from the repository root), on tiny settings."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def test_the_sequence_tagging_example_trains_with_warmup_ema_and_the_best_checkpoint_by_iou(tmp_path):
    folder = tmp_path / "seq" / "current"
    out = subprocess.run(
        [sys.executable, "examples/sequence_tagging.py", "--trials", "2", "--cores", "2", "--epochs", "3",
         "--n-train", "200", "--analysis", "none", "--folder", str(folder)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "best snapshot at epoch" in out.stdout and "model_best.pt" in out.stdout
    run = json.loads((folder / "run.json").read_text())
    assert (run["best_metric"], run["best_mode"]) == ("iou", "max")
    hp = run["hyperparameters"]
    assert hp["warmup_epochs"] == 1.0 and hp["ema_decay"] == 0.98 and hp["schedule"] == "cosine"
    with np.load(folder / "results.npz") as r, np.load(folder / "throughtimes.npz") as tt:
        best = tt["metric_iou_val"].argmax(axis=1)
        np.testing.assert_array_equal(r["best_epoch"], tt["epochs"][best])
    for tid in (0, 1):
        assert (folder / "trials" / str(tid) / "model_best.pt").is_file()
        assert (folder / "trials" / str(tid) / "model_raw.pt").is_file()  # the EMA run keeps the raw weights

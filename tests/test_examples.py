"""The worked examples run as a user runs them (a subprocess from the repository root), on tiny settings."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def test_the_sequence_tagging_example_reads_like_the_reference_recipe_and_keeps_the_best_by_the_mean(tmp_path):
    folder = tmp_path / "seq" / "current"
    out = subprocess.run(
        [sys.executable, "examples/sequence_tagging.py", "--trials", "2", "--cores", "2", "--epochs", "3",
         "--n-train", "200", "--analysis", "none", "--folder", str(folder)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "best snapshot at epoch" in out.stdout and "model_best.pt" in out.stdout
    assert "trial 0 epoch 3/3: train loss" in out.stderr and "| noisy loss" in out.stderr  # the per-epoch line
    run = json.loads((folder / "run.json").read_text())
    assert (run["best_metric"], run["best_mode"], run["best_over"]) == ("perf", "max", "mean")
    assert run["val_only_metrics"] == ["iou"] and run["val_names"] == ["clean", "noisy"]
    hp = run["hyperparameters"]
    assert (hp["schedule"], hp["warmup_steps"], hp["ema_decay"], hp["betas"]) == ("noam", 60, 0.99, [0.9, 0.98])
    with np.load(folder / "results.npz") as r, np.load(folder / "throughtimes.npz") as tt:
        mean = (tt["perfs_val"] + tt["perfs_val_noisy"]) / 2
        np.testing.assert_array_equal(r["best_epoch"], tt["epochs"][mean.argmax(axis=1)])
        assert np.isnan(tt["metric_iou_train"]).all() and not np.isnan(tt["metric_iou_val_noisy"]).any()
    for tid in (0, 1):
        assert (folder / "trials" / str(tid) / "model_best.pt").is_file()
        assert (folder / "trials" / str(tid) / "model_raw.pt").is_file()  # the EMA run keeps the raw weights

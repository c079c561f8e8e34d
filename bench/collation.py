"""Collation cost against the number of trials: appending is O(1) per trial, so the total is linear.

    python bench/collation.py [--snapshots 401]

For T trials of S snapshots each, times ``Collator.add`` for every trial, then ``arrays()`` and
writing both npz files, and prints the time per trial (flat when collation is linear).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from common import machine

from ignite_seg.storage.atomic import write_npz
from ignite_seg.storage.collate import CURVE_KEYS, Collator
from ignite_seg.storage.records import TrialResult


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--snapshots", type=int, default=401)
    args = ap.parse_args()
    s = args.snapshots
    epochs = np.arange(s) / 10
    rng = np.random.default_rng(0)
    print(f"machine: {machine()}; {s} snapshots per trial")
    for t in (100, 1000, 5000):
        curves = {k: rng.random(s) for k in CURVE_KEYS}
        result = TrialResult(trial_id=0, status="completed", seconds=1.0,
                             metrics={"loss_train": 0.1, "loss_val": 0.2, "perf_train": 0.9, "perf_val": 0.8})
        c = Collator({"snapshots_per_epoch": 10}, smooth_window=11)
        t0 = time.perf_counter()
        for i in range(t):
            c.add(i, result, {"epochs": epochs, **curves})
        t1 = time.perf_counter()
        results, tt = c.arrays()
        with tempfile.TemporaryDirectory() as d:
            write_npz(Path(d) / "results.npz", **results)
            write_npz(Path(d) / "throughtimes.npz", **tt)
        t2 = time.perf_counter()
        print(f"  T={t:5d}: add {1e6 * (t1 - t0) / t:6.1f} us/trial, arrays+write {1e3 * (t2 - t1):7.1f} ms "
              f"({1e6 * (t2 - t1) / t:6.1f} us/trial), total {1e6 * (t2 - t0) / t:6.1f} us/trial")


if __name__ == "__main__":
    main()

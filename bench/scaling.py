"""Parallel scaling and worker start-up, measured side by side in one run.

* 2 trials on 2 cores vs 1 trial on 1 core (wall of the whole ``train()``; ideal ratio 1.0);
* time from the ``train()`` call to the first trial's start (worker start-up);
* peak RSS of the driver and of the largest worker.

    python bench/scaling.py [--epochs 80] [--repeats 2]
"""
from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from common import DIGITS, machine

import ignite_seg


def one(folder: str, trials: int, cores: int, hp) -> tuple[float, float, float]:
    t0 = time.time()
    res = ignite_seg.train(DIGITS["model"], DIGITS["dataset"], DIGITS["loss"], folder=folder, hyperparameters=hp,
                           analysis="none", trials=trials, trials_strict=True, cores=cores, seed=0)
    wall = time.time() - t0
    starts = [json.loads((Path(folder) / "trials" / str(t.trial_id) / "result.json").read_text())["started_at"]
              for t in res.trials]
    trial_s = max(t.seconds for t in res.trials)
    return wall, min(starts) - t0, trial_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=80)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=32, cycle_size_epochs=8,
                                         epochs=args.epochs)
    rows: dict[str, list[tuple[float, float, float]]] = {"1 trial / 1 core": [], "2 trials / 2 cores": []}
    for r in range(args.repeats):
        rows["1 trial / 1 core"].append(one(f"/tmp/bench_scaling/a{r}", 1, 1, hp))
        rows["2 trials / 2 cores"].append(one(f"/tmp/bench_scaling/b{r}", 2, 2, hp))
    best = {k: min(v) for k, v in rows.items()}
    print(f"machine: {machine()}; digits MLP, {args.epochs} epochs, best of {args.repeats}")
    for k, (wall, first, trial_s) in best.items():
        print(f"  {k:20s} wall {wall:6.2f} s   call->first trial start {first:5.2f} s   slowest trial {trial_s:5.2f} s")
    print(f"  scaling ratio (2 on 2 / 1 on 1): {best['2 trials / 2 cores'][0] / best['1 trial / 1 core'][0]:.3f}x wall,"
          f" {best['2 trials / 2 cores'][2] / best['1 trial / 1 core'][2]:.3f}x trial time")
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"  peak RSS: driver {me:.0f} MiB, largest worker {kids:.0f} MiB")


if __name__ == "__main__":
    main()

"""Parallel scaling and worker start-up, measured side by side in one run.

* 2 trials on 2 cores vs 1 trial on 1 core (wall of the whole ``train()``; ideal ratio 1.0),
  each in a fresh Python process ("cold": what a user's script sees) and again in the same
  process ("warm": the fork server already holds torch, as for a second ``train()`` call);
* time from the ``train()`` call to the first trial's start (worker start-up; ``train`` is imported
  before the clock starts, as a script's ``from ignite_seg import train`` does, and that import
  time is printed beside it);
* peak RSS of the driver and of the largest worker.

    python bench/scaling.py [--epochs 80] [--repeats 2]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from common import DIGITS, machine

import ignite_seg


def one(folder: str, trials: int, cores: int, epochs: int) -> dict[str, float]:
    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=32, cycle_size_epochs=8, epochs=epochs)
    t_import = time.time()
    train = ignite_seg.train  # imports torch, as `from ignite_seg import train` at a script's top does
    t0 = time.time()
    res = train(DIGITS["model"], DIGITS["dataset"], DIGITS["loss"], folder=folder, hyperparameters=hp,
                           analysis="none", trials=trials, trials_strict=True, cores=cores, seed=0)
    wall = time.time() - t0
    starts = [json.loads((Path(folder) / "trials" / str(t.trial_id) / "result.json").read_text())["started_at"]
              for t in res.trials]
    return {"wall": wall, "first_start": min(starts) - t0, "import": t0 - t_import, "trial": max(t.seconds for t in res.trials),
            "rss_driver": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_worker": max(json.loads((Path(folder) / "trials" / str(t.trial_id) / "result.json").read_text())
                              .get("peak_rss_mib") or 0 for t in res.trials)}


def cold(folder: str, trials: int, cores: int, epochs: int) -> dict[str, float]:
    """``one`` in a fresh interpreter; the wall includes nothing of the interpreter's own start."""
    out = subprocess.run([sys.executable, __file__, "--one", json.dumps([folder, trials, cores, epochs])],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=80)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(*json.loads(args.one))))
        return
    configs = {"1 trial / 1 core": (1, 1), "2 trials / 2 cores": (2, 2)}
    rows: dict[str, list[dict[str, float]]] = {}
    for r in range(args.repeats):
        for name, (t, c) in configs.items():
            rows.setdefault(f"cold {name}", []).append(cold(f"/tmp/bench_scaling/cold{r}_{t}", t, c, args.epochs))
    one("/tmp/bench_scaling/prime", 1, 2, 1)  # start this process's fork server
    for r in range(args.repeats):
        for name, (t, c) in configs.items():
            rows.setdefault(f"warm {name}", []).append(one(f"/tmp/bench_scaling/warm{r}_{t}", t, c, args.epochs))
    best = {k: min(v, key=lambda d: d["wall"]) for k, v in rows.items()}
    print(f"machine: {machine()}; digits MLP, {args.epochs} epochs, best of {args.repeats}")
    for k, d in best.items():
        print(f"  {k:26s} wall {d['wall']:6.2f} s   call->first trial start {d['first_start']:5.2f} s   "
              f"slowest trial {d['trial']:5.2f} s   (import of train before the call {d['import']:4.2f} s)")
    for kind in ("cold", "warm"):
        a, b = best[f"{kind} 1 trial / 1 core"], best[f"{kind} 2 trials / 2 cores"]
        print(f"  {kind} scaling ratio (2 on 2 / 1 on 1): {b['wall'] / a['wall']:.3f}x wall, "
              f"{b['trial'] / a['trial']:.3f}x trial time")
    c = best["cold 2 trials / 2 cores"]
    print(f"  peak RSS (cold, 2 trials / 2 cores): driver {c['rss_driver']:.0f} MiB, largest worker {c['rss_worker']:.0f} MiB")


if __name__ == "__main__":
    main()

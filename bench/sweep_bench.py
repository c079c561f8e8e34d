"""A sweep of 3 points x 3 trials on 2 cores: ignite_seg.sweep (one pool) vs a loop of train() calls.

Run from the repository root::

    PYTHONPATH=.:tests nice python bench/sweep_bench.py [--cores 2] [--preset fastest] [--out out/bench/sweep]

Both runs do the same work (same points, seeds, preset: each point tuned, then 3 trials). The
loop starts a new worker pool for each point, as a script calling ``train()`` per point does;
``sweep()`` starts one for the whole sweep. Printed: the wall time of each, and an estimate of
the time with no idle core: the tunings' wall time (from the loop: call start to the first
trial's start) plus the trials' summed seconds divided by the cores. Goal: sweep <= 1.15 x that.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

POINTS = [{"n_hidden": 8}, {"n_hidden": 32}, {"n_hidden": 128}]
LOADERS = (("tasks", "mlp", (), {"n_in": 16}), ("tasks", "blobs", (), {"n_train": 2048, "n_val": 512, "n_in": 16}),
           ("torch.nn", "CrossEntropyLoss", (), {}))


def trial_seconds(folder: Path) -> list[float]:
    return [json.loads(p.read_text())["seconds"] for p in sorted(folder.glob("trials/*/result.json"))]


def first_trial_start(folder: Path) -> float:
    return min(json.loads(p.read_text())["started_at"] for p in folder.glob("trials/*/result.json"))


def run_sweep(root: Path, args: argparse.Namespace) -> dict[str, float]:
    import ignite_seg

    t0 = time.perf_counter()
    ignite_seg.sweep(*LOADERS, folder=root, points=POINTS, hyperparameters=args.preset, analysis="images",
                     trials=3, trials_strict=True, cores=args.cores, seed=0)
    wall = time.perf_counter() - t0
    secs = [s for k in range(len(POINTS)) for s in trial_seconds(root / "points" / str(k))]
    return {"wall": wall, "trial_seconds": sum(secs), "trials": len(secs)}


def run_loop(root: Path, args: argparse.Namespace) -> dict[str, float]:
    import dataclasses

    import ignite_seg
    from ignite_seg.config.specs import normalize_spec
    from ignite_seg.param_sweep.points import SweepPoint, point_spec
    from ignite_seg.param_sweep.run import point_seed

    t0 = time.perf_counter()
    tunings, secs = 0.0, []
    for k, point in enumerate(POINTS):
        model = point_spec(normalize_spec(LOADERS[0], "model_loader"), SweepPoint(k, kwargs=point))
        start = time.time()
        ignite_seg.train(dataclasses.replace(model), LOADERS[1], LOADERS[2], folder=root / str(k),
                         hyperparameters=args.preset, analysis="none", trials=3, trials_strict=True,
                         cores=args.cores, seed=point_seed(0, k))
        tunings += first_trial_start(root / str(k)) - start
        secs += trial_seconds(root / str(k))
    return {"wall": time.perf_counter() - t0, "tunings": tunings, "trial_seconds": sum(secs), "trials": len(secs)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--preset", default="fastest")
    parser.add_argument("--out", default="out/bench/sweep")
    args = parser.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    loop = run_loop(out / "loop", args)
    swept = run_sweep(out / "sweep", args)
    ideal = loop["tunings"] + swept["trial_seconds"] / args.cores
    print(json.dumps({"loop": loop, "sweep": swept, "no_idle_estimate": ideal,
                      "sweep_over_estimate": swept["wall"] / ideal, "sweep_over_loop": swept["wall"] / loop["wall"]},
                     indent=1))


if __name__ == "__main__":
    main()

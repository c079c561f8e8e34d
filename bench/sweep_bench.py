"""A sweep of 3 points x 3 trials on 2 cores: ignite_seg.sweep with its points overlapping (the default,
``max_concurrent_points=2``) vs one point at a time (``max_concurrent_points=1``), and optionally a
loop of train() calls (``--loop``, a new pool per point, as a script calling ``train()`` per point does).

Run from the repository root::

    PYTHONPATH=.:tests nice python bench/sweep_bench.py [--cores 2] [--preset fastest] [--out out/bench/sweep] [--loop]

Every run does the same work (same points, seeds, preset: each point tuned, then 3 trials). Printed
per run: the wall time; the workers' busy seconds (the trials' ``seconds`` from result.json plus
the tunings' task seconds from misc.json) and their idle share over the whole run, ``1 - busy /
(cores x wall)``; the idle share in the trial phase (first trial start to last trial end, from
``started_at`` and ``seconds``: a ratio within one run, robust to the load); and the wall against
"9 trials + 3 tunings": the tunings' wall (misc.json of the one-at-a-time run: an overlapped tuning's
wall includes its waits for a worker) plus the run's trial seconds / cores.
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


def trial_spans(folder: Path) -> list[tuple[float, float]]:
    out = []
    for p in sorted(folder.glob("trials/*/result.json")):
        res = json.loads(p.read_text())
        out.append((res["started_at"], res["started_at"] + res["seconds"]))
    return out


def idle_share(spans: list[tuple[float, float]], cores: int) -> float:
    """The workers' idle share from the first start to the last end of ``spans``."""
    window = max(e for _, e in spans) - min(s for s, _ in spans)
    return 1 - sum(e - s for s, e in spans) / (cores * window)


def tuning(folder: Path) -> tuple[float, float]:
    """(task seconds, wall seconds) of a point's tuning, from misc.json."""
    compute = json.loads((folder / "hparams" / "misc.json").read_text())["compute"]
    return compute["total_task_seconds"], compute["total_wall_seconds"]


def run_sweep(root: Path, args: argparse.Namespace, at_once: int) -> dict[str, float]:
    import ignite_seg

    t0 = time.perf_counter()
    ignite_seg.sweep(*LOADERS, folder=root, points=POINTS, hyperparameters=args.preset, analysis="images",
                     trials=3, trials_strict=True, cores=args.cores, seed=0, max_concurrent_points=at_once)
    wall = time.perf_counter() - t0
    folders = [root / "points" / str(k) for k in range(len(POINTS))]
    spans = [s for f in folders for s in trial_spans(f)]
    trial_secs = sum(e - s for s, e in spans)
    tune = [tuning(f) for f in folders]
    busy = trial_secs + sum(t for t, _ in tune)
    return {"wall": wall, "trial_seconds": trial_secs, "trials": len(spans),
            "tuning_task_seconds": sum(t for t, _ in tune), "tuning_wall_seconds": sum(w for _, w in tune),
            "idle_share_whole_run": 1 - busy / (args.cores * wall),
            "idle_share_trial_phase": idle_share(spans, args.cores),
            "idle_share_trial_phase_per_point": [idle_share(trial_spans(f), args.cores) for f in folders],
            "packed_estimate": busy / args.cores, "wall_over_packed": wall * args.cores / busy,
            "final_perf_val": [json.loads(p.read_text())["perf_val"] for f in folders
                               for p in sorted(f.glob("trials/*/result.json"))]}


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
    parser.add_argument("--loop", action="store_true", help="also a loop of train() calls (session 8's baseline)")
    args = parser.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    report: dict[str, object] = {}
    if args.loop:
        report["loop"] = run_loop(out / "loop", args)
    report["sweep_one_at_a_time"] = one = run_sweep(out / "sweep_1", args, at_once=1)
    report["sweep_overlapping"] = both = run_sweep(out / "sweep_2", args, at_once=2)
    report["overlapping_over_one_at_a_time"] = both["wall"] / one["wall"]
    # "9 trials + 3 tunings" with the tunings at their one-at-a-time wall (an overlapped tuning's wall
    # includes its waits for a worker) and each run's own trials packed on the cores
    for run in (one, both):
        run["goal_estimate"] = one["tuning_wall_seconds"] + run["trial_seconds"] / args.cores
        run["wall_over_goal"] = run["wall"] / run["goal_estimate"]
    report["same_final_perf_val"] = both["final_perf_val"] == one["final_perf_val"]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

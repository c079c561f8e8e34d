"""Issue 25's goals, one task x recipe per call: tuned (``fast``) against the untuned default, the
re-evaluated grid best of the same recipe, and Optuna TPE given the same compute.

For ``--task T --recipe R`` in one run on one 2-worker pool:

1. **grid** of the recipe family (cached in ``--cache`` as ``goals_grid_<R>_<T>.json``; the SGD recipe
   reuses issue 18's ``grid_<T>.json`` where it exists): ``--peaks`` peak LRs x ``--batches`` x 2 seeds,
   the tuner's epochs (:func:`bench.tune_quality._epochs`). SGD cells: triangular from peak / 3 to the
   peak (issue 18's family); the other recipes' cells (AdamW, momentum SGD): ``lr_start = peak / 10``,
   ``lr_end = peak``, the recipe's optimizer, momentum, schedule, warmup and weight decay,
   ``cycle_size_epochs = epochs``;
2. **re-evaluation** (cached, ``goals_reeval_<R>_<T>.json``): the grid's ``--top`` best cells with
   ``--reeval-seeds`` fresh seeds (the grid best is the maximum of many noisy means);
3. **tune** with ``fast`` + the recipe (seed ``--seed``), then 2 trials of the tuned recipe;
4. the **untuned default**: Adam (AdamW, weight decay 0) at 1e-3, batch 64, constant LR, the tuned
   recipe's epochs, 2 trials;
5. **Optuna TPE** over (log peak, batch 8..128) of the grid's family, each candidate trained once
   and scored on the validation set, until it has used the tune's worker CPU seconds; its best
   recipe then trains 2 fresh seeds (:func:`bench.tq_anchors.tpe_anchor`).

The pool is made as ``train()`` makes it (workers forked with ``WORKER_PRELOAD`` imported; before session 11
each worker imported ``torch._dynamo`` and ignite's engine chain at its first task, ~1 CPU-s each, which the
tune's first tasks paid); that import's CPU in this process is added once to the tune's.
Worker CPU seconds (:func:`bench.tune_quality.worker_cpu_seconds`) are measured for each part; the
compute share is (tuning + trials) / the CPU of issue 18's grid size (10 peaks x 5 batches x 2 seeds =
100 cells), taken from the cached SGD grid where it exists and else from this grid's mean cell.

Run from the repository root; results go to ``--out`` (JSON) and one line to stdout::

    PYTHONPATH=. python bench/tq_goals.py --task cnn --recipe adamw-cosine --out out/goals
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

RECIPES = {
    "sgd": {},
    "adamw-cosine": {"optimizer": "adamw", "weight_decay": 0.01, "schedule": "cosine", "warmup_epochs": 2.0},
    "adamw-inv-sqrt": {"optimizer": "adamw", "weight_decay": 0.01, "schedule": "inv-sqrt", "warmup_epochs": 2.0,
                       "betas": (0.9, 0.98)},
    # what a recurrent net's recipe adds (session 15: the gru task); for --parts tune,anchor (no grid of these)
    "sgd-clip": {"grad_clip_norm": 1.0},
    "adamw-cosine-clip": {"optimizer": "adamw", "weight_decay": 0.01, "schedule": "cosine", "warmup_epochs": 2.0,
                          "grad_clip_norm": 1.0},
    # the image classifier's recipe users bring most (torchvision's references: SGD, momentum 0.9, weight decay,
    # cosine from the first step); session 22, added before any tune of it was looked at
    "sgd-momentum-cosine": {"optimizer": "sgd", "momentum": 0.9, "weight_decay": 5e-4, "schedule": "cosine",
                            "warmup_epochs": 0.0},
    # fastai's fit_one_cycle (Adam with decoupled weight decay 0.01, betas 0.9/0.99, one cycle up then down, its own
    # warmup); session 24, added before any tune of it was looked at
    "adamw-one-cycle": {"optimizer": "adamw", "weight_decay": 0.01, "betas": (0.9, 0.99), "schedule": "one-cycle",
                        "warmup_epochs": 0.0},
    # the untuned default's own family, tuned: Adam (AdamW without weight decay, torch's default betas) at a constant
    # LR, no warmup; only the peak and the batch size differ from the anchor (session 25, added before looking)
    "adam-constant": {"optimizer": "adamw", "weight_decay": 0.0, "schedule": "constant", "warmup_epochs": 0.0},
}
#: issue 18's grid size, the base of the compute share
GRID_CELLS = 100
TRIALS = 2


def settings(recipe: str) -> Any:
    from ignite_seg.config.presets import get_preset

    return dataclasses.replace(get_preset("fast"), **RECIPES[recipe])


def cell_hparams(recipe: str, peak: float, batch: int, epochs: int, cycle: float) -> Any:
    """The grid family's recipe at ``peak`` and ``batch``."""
    from bench.tune_quality import GRID_LR_RATIO
    from ignite_seg import FixedHyperparameters

    if recipe == "sgd":
        return FixedHyperparameters(lr_start=peak / GRID_LR_RATIO, lr_end=peak, batch_size=batch,
                                    cycle_size_epochs=cycle, epochs=epochs)
    r = RECIPES[recipe]
    return FixedHyperparameters(lr_start=peak / 10, lr_end=peak, batch_size=batch, cycle_size_epochs=float(epochs),
                                epochs=epochs, optimizer=r["optimizer"], weight_decay=r["weight_decay"],
                                schedule=r["schedule"], warmup_epochs=r["warmup_epochs"],
                                betas=r.get("betas", (0.9, 0.999)), momentum=r.get("momentum", 0.0))


def perfs_of(outcomes: list[Any]) -> np.ndarray:
    from bench.tune_quality import val_perfs

    return val_perfs(outcomes)


def preload_cpu_seconds() -> float:
    """CPU seconds of this process importing what train() preloads before it forks its workers."""
    import importlib

    from ignite_seg.api import WORKER_PRELOAD

    t0 = time.process_time()
    for name in WORKER_PRELOAD:
        importlib.import_module(name)
    return time.process_time() - t0


def summary(perfs: np.ndarray) -> dict[str, Any]:
    ok = perfs[np.isfinite(perfs)]
    # a failed (diverged) trial counts as its task's worst: not dropped from the mean
    return {"perfs": perfs.tolist(), "mean": float(ok.mean()) if ok.size else float("nan"),
            "sem": float(ok.std(ddof=1) / math.sqrt(ok.size)) if ok.size > 1 else float("nan"),
            "failed": int((~np.isfinite(perfs)).sum())}


def run_cells(runner: Any, task: dict[str, Any], jobs: list[tuple[Any, int]]) -> tuple[np.ndarray, float]:
    from bench.tune_quality import _run_trials, worker_cpu_seconds

    cpu0 = worker_cpu_seconds()
    outs = _run_trials(runner, task, jobs)
    return perfs_of(outs), worker_cpu_seconds() - cpu0


def grid(runner: Any, task: dict[str, Any], args: Any, epochs: int, cycle: float) -> dict[str, Any]:
    peaks = [float(v) for v in np.geomspace(args.peak_lo, args.peak_hi, args.peaks)]
    batches = [int(b) for b in args.batches.split(",")]
    cells = [(p, b, s) for p in peaks for b in batches for s in (0, 1)]
    t0 = time.perf_counter()
    perf, cpu = run_cells(runner, task, [(cell_hparams(args.recipe, p, b, epochs, cycle), 1000 + s) for p, b, s in cells])
    mean = perf.reshape(len(peaks), len(batches), 2).mean(axis=2)
    best = np.unravel_index(np.nanargmax(mean), mean.shape)
    res = {"task": args.task, "recipe": args.recipe, "epochs": epochs, "lrs": peaks, "batches": batches,
           "perf": perf.reshape(len(peaks), len(batches), 2).tolist(), "perf_mean": mean.tolist(),
           "best_perf": float(mean[best]), "best_lr": peaks[best[0]], "best_batch": batches[best[1]],
           "worker_cpu_seconds": cpu, "wall_seconds": time.perf_counter() - t0, "cells": len(cells),
           "failed_or_diverged": int(np.isnan(perf).sum())}
    print(f"[grid {args.task} {args.recipe}] {len(cells)} cells: best {res['best_perf']:.4f} at peak "
          f"{res['best_lr']:.3g}, batch {res['best_batch']}; {cpu:.0f} worker CPU-s", flush=True)
    return res


def reeval(runner: Any, task: dict[str, Any], g: dict[str, Any], args: Any, cycle: float) -> dict[str, Any]:
    mean = np.array(g["perf_mean"])
    order = np.argsort(np.nan_to_num(mean, nan=-1.0), axis=None)[::-1][:args.top]
    rows = []
    for flat in order:
        i, j = np.unravel_index(flat, mean.shape)
        lr, bs = g["lrs"][i], g["batches"][j]
        hp = cell_hparams(args.recipe, lr, bs, g["epochs"], cycle)
        perf, cpu = run_cells(runner, task, [(hp, 3000 + k) for k in range(args.reeval_seeds)])
        rows.append({"lr": lr, "batch": bs, "grid_perf": float(mean[i, j]), **summary(perf), "worker_cpu_seconds": cpu})
        print(f"[reeval {args.task} {args.recipe}] peak {lr:.3g} batch {bs}: grid {mean[i, j]:.4f}, "
              f"{args.reeval_seeds} seeds {rows[-1]['mean']:.4f} ± {rows[-1]['sem']:.4f}", flush=True)
    best = max(rows, key=lambda r: r["mean"])
    return {"cells": rows, "best_fresh_perf": best["mean"], "best_fresh_sem": best["sem"], "seeds": args.reeval_seeds}


def overrides(pairs: list[str]) -> dict[str, Any]:
    """``--set NAME=VALUE`` pairs as settings fields (each VALUE a Python literal).

    Example:
        >>> overrides(["lr_sweep_max_examples=None", "length_runs=1"])
        {'lr_sweep_max_examples': None, 'length_runs': 1}
    """
    import ast

    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set takes NAME=VALUE, got {pair!r}")
        out[name.strip()] = ast.literal_eval(value.strip())
    return out


def main() -> None:
    from bench.tq_anchors import tpe_anchor
    from bench.tq_plateau_tasks import PLATEAU_TASKS
    from bench.tq_robust import ROBUST_TASKS
    from bench.tq_unseen_tasks import UNSEEN_TASKS
    from bench.tq_user_tasks import USER_TASKS
    from bench.tune_quality import TASKS, _epochs, _facts, _run_trials, _specs, seconds_of, worker_cpu_seconds
    from ignite_seg import FixedHyperparameters
    from ignite_seg.api import WORKER_PRELOAD
    from ignite_seg.runtime.tasks import TaskRunner
    from ignite_seg.storage.run_folder import RunFolder
    from ignite_seg.tuning.recipe import choose_recipe

    TASKS.update(ROBUST_TASKS)
    TASKS.update(UNSEEN_TASKS)
    TASKS.update(PLATEAU_TASKS)
    TASKS.update(USER_TASKS)
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", required=True)
    ap.add_argument("--recipe", default="sgd", choices=sorted(RECIPES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peaks", type=int, default=5)
    ap.add_argument("--peak-lo", type=float, default=1e-3)
    ap.add_argument("--peak-hi", type=float, default=0.1)
    ap.add_argument("--batches", default="8,32")
    ap.add_argument("--reeval-seeds", type=int, default=4)
    ap.add_argument("--top", type=int, default=2, help="grid cells re-evaluated")
    ap.add_argument("--no-tpe", action="store_true")
    ap.add_argument("--parts", default="grid,tune,anchor,tpe")
    ap.add_argument("--length-runs", type=int, default=None,
                    help="the tuner's length_runs (default: the preset's; 0: no length check, as before session 14)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override one of the tuner's settings (HyperparameterSettings; VALUE a Python literal, e.g. "
                         "--set lr_sweep_max_examples=None); repeatable: an experiment's variant, not the bench's")
    ap.add_argument("--keep", default=None, help="keep the tune's folder here (hparams/: misc.json, every task's "
                    "curves in tasks/) instead of a temporary one")
    ap.add_argument("--cache", default="bench/tune_quality_cache")
    ap.add_argument("--out", default="out/goals")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    task = TASKS[args.task]
    cache, out_dir = Path(args.cache), Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    out_path = out_dir / f"goals_{args.recipe}_{args.task}_s{args.seed}.json"
    out: dict[str, Any] = json.loads(out_path.read_text()) if out_path.exists() else {}
    out.update(task=args.task, recipe=args.recipe, seed=args.seed)
    parts = args.parts.split(",")
    n_train = _facts(task)["n_train"]
    cycle, epochs = _epochs(n_train)
    out["n_train"] = n_train

    def save() -> None:
        out_path.write_text(json.dumps(out, indent=1, default=str))

    # the pool as train() makes it: the workers start with what a task imports (torch._dynamo, which the
    # first optimizer of a process imports, and ignite's engine chain), imported once here; that import's
    # CPU counts once in the tune's (a train() call pays it once, in the calling process)
    imports_cpu = preload_cpu_seconds()
    with TaskRunner(2, preload=WORKER_PRELOAD) as runner:
        # 1-2. the grid and its re-evaluation (cached)
        old = cache / f"grid_{args.task}.json"
        gpath = old if args.recipe == "sgd" and old.exists() else cache / f"goals_grid_{args.recipe}_{args.task}.json"
        if "grid" in parts and not gpath.exists():
            gpath.write_text(json.dumps(grid(runner, task, args, epochs, cycle), indent=1))
        if gpath.exists():
            g = json.loads(gpath.read_text())
            rold = cache / f"reeval_{args.task}.json"
            rpath = rold if gpath == old else cache / f"goals_reeval_{args.recipe}_{args.task}.json"
            if not rpath.exists():
                rpath.write_text(json.dumps(reeval(runner, task, g, args, cycle), indent=1))
            r = json.loads(rpath.read_text())
            cells = g.get("cells") or int(np.array(g["perf_mean"]).size * 2)
            out["grid"] = {"path": str(gpath), "cells": cells, "peaks": len(g["lrs"]), "batches": g["batches"],
                           "epochs": g["epochs"], "best_perf": g["best_perf"], "best_lr": g["best_lr"],
                           "best_batch": g["best_batch"], "worker_cpu_seconds": g["worker_cpu_seconds"],
                           "cpu_100_cells": g["worker_cpu_seconds"] * GRID_CELLS / cells,
                           "reeval_best": r["best_fresh_perf"], "reeval_seeds": r["seeds"],
                           "reeval_cells": [(c["lr"], c["batch"], c.get("mean", c.get("fresh_perf_mean")))
                                            for c in r["cells"]]}
            save()
        # 3. tune + trials
        if "tune" in parts and "tuned" not in out:
            with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="ignite_seg_goals_")
                  ) as tmp:
                rf, t0, cpu0 = RunFolder(tmp), time.perf_counter(), worker_cpu_seconds()
                s = settings(args.recipe)
                if args.length_runs is not None:
                    s = dataclasses.replace(s, length_runs=args.length_runs)
                s = dataclasses.replace(s, **overrides(args.set))
                hp = choose_recipe(runner, rf, s, _specs(task), accuracy_style=task["style"],
                          facts=_facts(task), seed=args.seed, device="cpu")
                tune_cpu, tune_wall = worker_cpu_seconds() - cpu0 + imports_cpu, time.perf_counter() - t0
                misc = json.loads((rf.hparams / "misc.json").read_text())
            perf, trials_cpu = run_cells(runner, task, [(hp, 2000 + t) for t in range(TRIALS)])
            steps = misc["steps"]
            out["tuned"] = {**summary(perf), "recipe": hp.to_dict(), "tune_cpu": tune_cpu, "imports_cpu": imports_cpu,
                            "tune_wall": tune_wall,
                            "trials_cpu": trials_cpu, "task_seconds": misc["compute"]["total_task_seconds"],
                            "lr_range": steps.get("lr_range"), "lr_rescan": steps.get("lr_rescan"),
                            "guard": steps.get("guard"), "length": steps.get("length"),
                            "batch_size": steps.get("batch_size"), "schedule": steps.get("schedule")}
            save()
            print(f"[tuned {args.task} {args.recipe}] {out['tuned']['mean']:.4f} ± {out['tuned']['sem']:.4f}, "
                  f"lr {hp.lr_start:.3g} -> {hp.lr_end:.3g}, batch {hp.batch_size}, {hp.epochs} epochs; tune "
                  f"{tune_cpu:.0f} CPU-s ({tune_wall:.0f} s wall), trials {trials_cpu:.0f} CPU-s", flush=True)
        # 4. the untuned default
        if "anchor" in parts and "untuned" not in out:
            e = out["tuned"]["recipe"]["epochs"] if "tuned" in out else epochs
            adam = FixedHyperparameters(lr_start=1e-3, lr_end=1e-3, batch_size=64, cycle_size_epochs=float(e),
                                        epochs=e, optimizer="adamw", weight_decay=0.0, schedule="constant")
            perf, cpu = run_cells(runner, task, [(adam, 5000 + t) for t in range(TRIALS)])
            out["untuned"] = {**summary(perf), "cpu": cpu}
            save()
            print(f"[untuned {args.task}] {out['untuned']['mean']:.4f} ± {out['untuned']['sem']:.4f}", flush=True)
        # the grid's CPU measured beside the tune: one cell at each of issue 18's 5 batch sizes (at the
        # re-evaluated best peak), x 20 = a 100-cell grid's CPU (a cell's cost is set by its batch size)
        if ("calib" in parts or "tune" in parts) and "calib" not in out and gpath.exists():
            peak = max(r["cells"], key=lambda c: c.get("mean", c.get("fresh_perf_mean", -1)))["lr"]
            jobs = [(cell_hparams(args.recipe, peak, b, epochs, cycle), 9000 + b) for b in (8, 16, 32, 64, 128)]
            perf, cpu = run_cells(runner, task, jobs)
            out["calib"] = {"peak": peak, "cpu_5_cells": cpu, "cpu_100_cells": cpu * GRID_CELLS / 5,
                            "perfs": perf.tolist()}
            save()
            print(f"[calib {args.task} {args.recipe}] 5 cells (b8..128) {cpu:.0f} CPU-s: a 100-cell grid "
                  f"~{cpu * 20:.0f} CPU-s", flush=True)
        # 5. TPE at equal compute
        if "tpe" in parts and "tpe" not in out and "tuned" in out:
            g_lrs = json.loads(gpath.read_text())["lrs"]
            bounds = (float(min(g_lrs)), float(max(g_lrs)))

            def run(cells: list[tuple[float, int, int]]) -> list[tuple[float, float]]:
                cpu0 = worker_cpu_seconds()
                outs = _run_trials(runner, task, [(cell_hparams(args.recipe, lr, bs, epochs, cycle), s)
                                                  for lr, bs, s in cells])
                cpu, wall = worker_cpu_seconds() - cpu0, sum(seconds_of(o) for o in outs) or 1.0
                return [(p, cpu * seconds_of(o) / wall) for p, o in zip(perfs_of(outs), outs)]

            budget = out["tuned"]["tune_cpu"]
            res = tpe_anchor(run, bounds, (8, 16, 32, 64, 128), budget, seed=args.seed, trials=TRIALS)
            if "missing" not in res:
                res.update(summary(np.array(res["fresh_perfs"])))
            out["tpe"] = res
            save()
            print(f"[tpe {args.task} {args.recipe}] {res.get('mean', float('nan')):.4f} ± "
                  f"{res.get('sem', float('nan')):.4f} after {len(res.get('history', []))} candidates "
                  f"({res.get('spent_cpu', 0):.0f} CPU-s of {budget:.0f}); best {res.get('best')}", flush=True)
    save()


if __name__ == "__main__":
    main()

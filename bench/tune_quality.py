"""Benchmark of the tuner: regret against a grid, compute, stability over seeds, speed.

Run from the repository root (the machine should be otherwise idle; timings are wall clock)::

    PYTHONPATH=. python bench/tune_quality.py --part all --out out/bench

Parts:

* ``grid``: the final-trial recipe (triangular cyclical LR from ``lr/3`` to ``lr`` and back, the
  tuner's epoch count) at 10 log-spaced peak LRs x 5 batch sizes x 2 seeds, on every task.
  Grid-best = the best cell's mean validation perf over its 2 seeds.
* ``presets``: each preset tunes with 5 seeds; each tuned recipe trains 2 trials. Regret =
  grid-best - mean validation perf of those 10 trials. Compute = the tuner's worker seconds
  (mean over seeds) / the grid's worker seconds. Stability = CV of the chosen ``lr_end`` and
  the spread of the chosen batch sizes in candidate steps.
* ``speed``: ``train(..., "fastest", trials=2, analysis="none", cores=2)`` on digits, 3 times,
  each with a fresh process pool: the tuning wall time (from misc.json) and the whole call.

* ``stability`` (not in ``all``): tune only, ``--seeds`` seeds (10) per preset: the lr_end CV over
  all seeds and over those at the most common batch size (the range test's own spread).

* ``reeval``: the grid's 3 best cells re-run with 10 fresh seeds (the grid-best is the maximum of
  50 noisy means, so it overstates its own recipe: the winner's curse).

Tasks (``--tasks``): ``digits`` and ``regression`` (sessions 1-4), and the five of issue 18 in
:mod:`bench.tq_tasks`: ``cnn``, ``noisy_regression``, ``tiny``, ``binary``, ``sequence``.

Compute is also counted as worker CPU seconds (:func:`worker_cpu_seconds`: user + system time of
the pool's processes over the part), which a ``/usr/bin/time`` of the caller misses.

Issue 18's run (the grid and its re-evaluation are cached in ``bench/tune_quality_cache/``, computed
once; ``--anchors`` adds Optuna TPE given ``fast``'s worker CPU and Prodigy, see :mod:`bench.tq_anchors`)::

    PYTHONPATH=. python bench/tune_quality.py --part presets --presets fast --preset-seeds 2 --anchors \
        --tasks cnn,noisy_regression,tiny,binary,sequence --cache bench/tune_quality_cache --out out/tq \
        --keep out/tq/kept

Results are printed and written as JSON to ``--out``; ``bench/RESULTS.md`` reports them.
(Progress bars go to stderr: ``2>/dev/null`` to hide them.)
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

TASKS: dict[str, dict[str, Any]] = {
    "digits": {
        "model": ("examples.digits", "model", (), {}),
        "dataset": ("examples.digits", "dataset", (), {}),
        "loss": ("torch.nn", "CrossEntropyLoss", (), {}),
        "style": "classification",
        "lrs": np.geomspace(0.01, 3.0, 10),
    },
    "regression": {
        "model": ("bench.tune_quality", "regression_model", (), {}),
        "dataset": ("bench.tune_quality", "regression_dataset", (), {}),
        "loss": ("torch.nn", "MSELoss", (), {}),
        "style": "inv-loss",
        "lrs": np.geomspace(0.003, 1.0, 10),
    },
}



def val_perfs(outcomes: list[Any]) -> np.ndarray:
    """Each trial outcome's final val perf (``result.json``'s ``perf_val``); NaN where it did not complete."""
    return np.array([o.result.metrics.get("perf_val", np.nan) if o.status == "completed" else np.nan
                     for o in outcomes])


def seconds_of(outcome: Any) -> float:
    """A trial outcome's wall seconds (0 when it did not record them)."""
    return float(outcome.result.seconds or 0.0)

def _bench_task(name: str, style: str, lrs: np.ndarray, loss: tuple[Any, ...] | None = None) -> dict[str, Any]:
    """A task of :mod:`bench.tq_tasks` (its loaders ``<name>_model``, ``<name>_dataset``)."""
    return {"model": ("bench.tq_tasks", f"{name}_model", (), {}),
            "dataset": ("bench.tq_tasks", f"{name}_dataset", (), {}),
            "loss": loss or ("torch.nn", "MSELoss" if style == "inv-loss" else "CrossEntropyLoss", (), {}),
            "style": style, "lrs": lrs}


TASKS.update({
    "cnn": _bench_task("cnn", "classification", np.geomspace(0.01, 3.0, 10)),
    "noisy_regression": _bench_task("noisy_regression", "inv-loss", np.geomspace(0.003, 1.0, 10)),
    "tiny": _bench_task("tiny", "classification", np.geomspace(0.01, 3.0, 10)),
    "binary": _bench_task("binary", "classification", np.geomspace(0.01, 3.0, 10)),
    "sequence": _bench_task("sequence", "classification", np.geomspace(0.01, 3.0, 10),
                            loss=("bench.tq_tasks", "sequence_loss", (), {})),
})
GRID_BATCHES = (8, 16, 32, 64, 128)
GRID_SEEDS = (0, 1)
PRESET_SEEDS = (0, 1, 2, 3, 4)
TRIALS_PER_TUNE = 2
#: grid cells use one triangular cycle from lr / GRID_LR_RATIO up to lr and back
GRID_LR_RATIO = 3.0


def regression_model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1))


def regression_dataset(n_train: int = 2000, n_val: int = 500, seed: int = 0) -> tuple[TensorDataset, TensorDataset]:
    """A smooth nonlinear target of 8 inputs with noise (MSE of the best model ~ 0.01)."""
    g = torch.Generator().manual_seed(seed)
    w1, w2 = torch.randn(8, 1, generator=g) / math.sqrt(8), torch.randn(8, 1, generator=g) / math.sqrt(8)

    def make(n: int) -> TensorDataset:
        x = torch.randn(n, 8, generator=g)
        y = torch.sin(2 * x @ w1) + 0.5 * (x @ w2) ** 2 + 0.1 * torch.randn(n, 1, generator=g)
        return TensorDataset(x, y)

    return make(n_train), make(n_val)


def worker_cpu_seconds() -> float:
    """User + system CPU seconds of this process's descendants now alive (the fork server and the
    pool's workers): the difference over a part is the workers' compute, which neither the caller's
    ``/usr/bin/time`` nor ``RUSAGE_CHILDREN`` (only reaped children) sees. A worker that dies in
    between takes its seconds with it."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            cpu = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += cpu.user + cpu.system
    return total


def _specs(task: dict[str, Any]) -> dict[str, Any]:
    from ignite_seg.config.specs import normalize_spec

    return {k: normalize_spec(task[k], f"{k}_loader") for k in ("model", "dataset", "loss")}


def _facts(task: dict[str, Any]) -> dict[str, Any]:
    from ignite_seg.engine.probe import probe_recipe

    s = _specs(task)
    return probe_recipe(s["model"], s["dataset"], s["loss"], task["style"])


def _epochs(n_train: int) -> tuple[float, int]:
    """The schedule every preset chooses for this dataset (they share the schedule fields)."""
    from ignite_seg.config.presets import get_preset
    from ignite_seg.tuning.schedule import choose_schedule

    p = get_preset("fast")
    return choose_schedule(n_train, train_examples=p.train_examples, min_epochs=p.min_epochs,
                           max_epochs=p.max_epochs, cycles=p.cycles)


def _run_trials(runner: Any, task: dict[str, Any], recipes: list[tuple[Any, int]]) -> list[Any]:
    """Run one trial per (FixedHyperparameters, seed) on the runner; outcomes in input order."""
    from ignite_seg.engine.trainer import TrialSetup, TrialTask, run_trial

    specs = _specs(task)
    setup = TrialSetup(model=specs["model"], dataset=specs["dataset"], loss=specs["loss"], accuracy_style=task["style"],
                       device="cpu", snapshots_per_epoch=1)
    tasks = [
        TrialTask(trial_id=i, setup=setup, hparams=hp, seed=seed, threads=runner.task_threads)
        for i, (hp, seed) in enumerate(recipes)
    ]
    out: dict[int, Any] = {}
    for res in runner.map_unordered(run_trial, tasks, key=lambda t: t.trial_id):
        out[res.trial_id] = res
    return [out[i] for i in range(len(tasks))]


def part_grid(runner: Any, name: str) -> dict[str, Any]:
    from ignite_seg import FixedHyperparameters

    task = TASKS[name]
    n_train = _facts(task)["n_train"]
    cycle, epochs = _epochs(n_train)
    cells = [(lr, bs, seed) for lr in task["lrs"] for bs in GRID_BATCHES for seed in GRID_SEEDS]
    recipes = [
        (FixedHyperparameters(lr_start=float(lr) / GRID_LR_RATIO, lr_end=float(lr), batch_size=bs,
                              cycle_size_epochs=cycle, epochs=epochs), 1000 + seed)
        for lr, bs, seed in cells
    ]
    t0, cpu0 = time.perf_counter(), worker_cpu_seconds()
    outcomes = _run_trials(runner, task, recipes)
    wall, cpu = time.perf_counter() - t0, worker_cpu_seconds() - cpu0
    perf = val_perfs(outcomes)
    perf = perf.reshape(len(task["lrs"]), len(GRID_BATCHES), len(GRID_SEEDS))
    mean = perf.mean(axis=2)
    best = np.unravel_index(np.nanargmax(mean), mean.shape)
    seconds = float(sum(seconds_of(o) for o in outcomes))
    result = {
        "task": name, "epochs": epochs, "lrs": task["lrs"].tolist(), "batches": list(GRID_BATCHES),
        "perf_mean": mean.tolist(), "perf": perf.tolist(),
        "best_perf": float(mean[best]), "best_lr": float(task["lrs"][best[0]]), "best_batch": GRID_BATCHES[best[1]],
        "worker_seconds": seconds, "worker_cpu_seconds": cpu, "wall_seconds": wall, "examples": n_train * epochs * len(cells),
        "failed_or_diverged": int(np.isnan(perf).sum()),
    }
    print(f"[grid {name}] best {result['best_perf']:.4f} at lr {result['best_lr']:.3g}, batch "
          f"{result['best_batch']}; {seconds:.0f} worker-s ({cpu:.0f} worker CPU-s), {wall:.0f} s wall", flush=True)
    return result


def part_reeval(runner: Any, name: str, grid: dict[str, Any], top: int = 3, seeds: int = 10) -> dict[str, Any]:
    """The grid's ``top`` cells re-run with ``seeds`` fresh seeds: the grid-best without its winner's curse.

    The grid-best is the maximum of 50 noisy two-seed means, so it overstates what its recipe
    reaches; fresh seeds measure the recipe itself.
    """
    from ignite_seg import FixedHyperparameters

    task = TASKS[name]
    mean = np.array(grid["perf_mean"])
    order = np.argsort(np.nan_to_num(mean, nan=-1.0), axis=None)[::-1][:top]
    rows = []
    for flat in order:
        i, j = np.unravel_index(flat, mean.shape)
        lr, bs = grid["lrs"][i], grid["batches"][j]
        hp = FixedHyperparameters(lr_start=lr / GRID_LR_RATIO, lr_end=lr, batch_size=bs,
                                  cycle_size_epochs=grid["epochs"], epochs=grid["epochs"])
        cpu0 = worker_cpu_seconds()
        outs = _run_trials(runner, task, [(hp, 3000 + k) for k in range(seeds)])
        cpu = worker_cpu_seconds() - cpu0
        perf = val_perfs(outs)
        rows.append({"lr": lr, "batch": bs, "grid_perf": float(mean[i, j]), "fresh_perf_mean": float(np.nanmean(perf)),
                     "fresh_perf_std": float(np.nanstd(perf)), "fresh_perfs": perf.tolist(), "worker_cpu_seconds": cpu})
        print(f"[reeval {name}] lr {lr:.3g} batch {bs}: grid {mean[i, j]:.4f}, {seeds} fresh seeds "
              f"{np.nanmean(perf):.4f} ± {np.nanstd(perf):.4f}", flush=True)
    best = max(rows, key=lambda r: r["fresh_perf_mean"])
    return {"cells": rows, "best_fresh_perf": best["fresh_perf_mean"], "seeds": seeds}


def part_presets(runner: Any, name: str, grid: dict[str, Any], presets: list[str] | dict[str, Any],
                 seeds: tuple[int, ...] = PRESET_SEEDS, fresh_best: float | None = None,
                 keep: Path | None = None) -> dict[str, Any]:
    """Tune with each preset (a name, or a name -> HyperparameterSettings mapping) and ``seeds``.

    ``fresh_best``: the re-evaluated grid-best (``reeval``), for the regret without the winner's curse.
    """
    from ignite_seg.config.presets import get_preset
    from ignite_seg.storage.run_folder import RunFolder
    from ignite_seg.tuning.recipe import choose_recipe

    task = TASKS[name]
    facts = _facts(task)
    out: dict[str, Any] = {}
    named = presets if isinstance(presets, dict) else {p: get_preset(p) for p in presets}
    for preset, settings in named.items():
        chosen, tuning_seconds, tuning_examples, tuning_wall, steps_per_seed, tuning_cpu = [], [], [], [], [], []
        for seed in seeds:
            with tempfile.TemporaryDirectory(prefix="ignite_seg_bench_") as tmp:
                rf = RunFolder(tmp)
                t0, cpu0 = time.perf_counter(), worker_cpu_seconds()
                hp = choose_recipe(runner, rf, settings, _specs(task), accuracy_style=task["style"], facts=facts, seed=seed,
                          device="cpu")
                tuning_wall.append(time.perf_counter() - t0)
                tuning_cpu.append(worker_cpu_seconds() - cpu0)
                misc = json.loads((rf.hparams / "misc.json").read_text())
                if keep is not None:
                    shutil.copytree(rf.hparams, keep / f"{name}_{preset}_{seed}", dirs_exist_ok=True)
            chosen.append(hp)
            steps_per_seed.append(misc["steps"])
            tuning_seconds.append(misc["compute"]["total_task_seconds"])
            tuning_examples.append(misc["compute"]["total_examples"])
        recipes = [(hp, 2000 + 10 * s + t) for s, hp in zip(seeds, chosen) for t in range(TRIALS_PER_TUNE)]
        trials_cpu0 = worker_cpu_seconds()
        outcomes = _run_trials(runner, task, recipes)
        perfs = val_perfs(outcomes)
        trials_cpu = worker_cpu_seconds() - trials_cpu0
        per_seed = np.nanmean(perfs.reshape(len(seeds), TRIALS_PER_TUNE), axis=1)
        lr_end = np.array([hp.lr_end for hp in chosen])
        bss = np.array([hp.batch_size for hp in chosen])
        steps = float(np.log(bss.max() / bss.min()) / np.log(settings.batch_step))
        mean_perf = float(np.nanmean(perfs))
        res = {
            "preset": preset, "recipes": [hp.to_dict() for hp in chosen],
            "val_perf_trials": perfs.tolist(), "val_perf_per_seed": per_seed.tolist(), "val_perf_mean": mean_perf,
            "val_perf_std": float(np.nanstd(perfs)), "regret": grid["best_perf"] - mean_perf,
            "val_perf_sem": float(np.nanstd(perfs) / np.sqrt(np.isfinite(perfs).sum())),
            "regret_per_seed": (grid["best_perf"] - per_seed).tolist(),
            "regret_vs_fresh": None if fresh_best is None else fresh_best - mean_perf,
            "tuning_worker_seconds": tuning_seconds, "tuning_wall_seconds": tuning_wall,
            "tuning_worker_cpu_seconds": tuning_cpu,
            "compute_fraction": float(np.mean(tuning_seconds)) / grid["worker_seconds"],
            "cpu_fraction": float(np.mean(tuning_cpu)) / grid["worker_cpu_seconds"]
            if grid.get("worker_cpu_seconds") else None,
            "examples_fraction": float(np.mean(tuning_examples)) / grid["examples"],
            "lr_end_cv": float(lr_end.std() / lr_end.mean()), "batch_sizes": bss.tolist(), "batch_spread_steps": steps,
            "failed_trials": int(np.isnan(perfs).sum()), "trials_worker_cpu_seconds": trials_cpu,
            "decisions": steps_per_seed,  # misc.json "steps" of each seed's tune: why it chose what it chose
        }
        out[preset] = res
        fresh = "" if fresh_best is None else f" ({res['regret_vs_fresh']:+.4f} vs the re-evaluated best)"
        print(f"[{preset} {name}] val {mean_perf:.4f} ± {res['val_perf_std']:.4f}, regret {res['regret']:+.4f}{fresh}, "
              f"compute {100 * res['compute_fraction']:.1f}% of grid ({100 * res['examples_fraction']:.1f}% of its "
              f"examples; worker CPU {np.mean(tuning_cpu):.1f} s = {100 * (res['cpu_fraction'] or np.nan):.1f}%), "
              f"tuning wall {np.mean(tuning_wall):.1f} s, lr_end CV {100 * res['lr_end_cv']:.0f}%, "
              f"batches {bss.tolist()} ({steps:g} steps), lr_end {np.round(lr_end, 3).tolist()}", flush=True)
    return out


def part_anchors(runner: Any, name: str, budget_cpu: float, fresh_best: float | None,
                 seeds: tuple[int, ...], trials: int = TRIALS_PER_TUNE) -> dict[str, Any]:
    """Optuna TPE given ``budget_cpu`` worker CPU seconds per seed, and Prodigy (LR-free), against
    the re-evaluated grid-best; see :mod:`bench.tq_anchors`."""
    from bench.tq_anchors import ProdigyTask, missing, run_prodigy, tpe_anchor
    from ignite_seg import FixedHyperparameters

    task = TASKS[name]
    cycle, epochs = _epochs(_facts(task)["n_train"])

    def run(cells: list[tuple[float, int, int]]) -> list[tuple[float, float]]:
        recipes = [(FixedHyperparameters(lr_start=lr / GRID_LR_RATIO, lr_end=lr, batch_size=bs,
                                         cycle_size_epochs=cycle, epochs=epochs), seed) for lr, bs, seed in cells]
        cpu0 = worker_cpu_seconds()
        outs = _run_trials(runner, task, recipes)
        cpu, wall = worker_cpu_seconds() - cpu0, sum(seconds_of(o) for o in outs) or 1.0
        return [(p, cpu * seconds_of(o) / wall) for p, o in zip(val_perfs(outs), outs)]

    lrs = np.asarray(task["lrs"])
    tpe = [tpe_anchor(run, (float(lrs.min()), float(lrs.max())), GRID_BATCHES, budget_cpu, seed=s, trials=trials)
           for s in seeds]
    out: dict[str, Any] = {"tpe": {"budget_cpu_per_seed": budget_cpu, "seeds": tpe}}
    if "missing" not in tpe[0]:
        mean = float(np.mean([r["val_perf_mean"] for r in tpe]))
        out["tpe"].update(val_perf_mean=mean, regret_vs_fresh=None if fresh_best is None else fresh_best - mean)
    gone = missing("prodigyopt")
    if gone:
        out["prodigy"] = gone
    else:
        specs = _specs(task)
        jobs = [ProdigyTask(k, specs, task["style"], 32, epochs, 6000 + k) for k in range(len(seeds) * trials)]
        cpu0 = worker_cpu_seconds()
        res = sorted(runner.map_unordered(run_prodigy, jobs, key=lambda j: j.key))
        perfs = np.array([r[1] for r in res])
        out["prodigy"] = {"val_perfs": perfs.tolist(), "val_perf_mean": float(np.nanmean(perfs)),
                          "worker_cpu_seconds": worker_cpu_seconds() - cpu0, "batch_size": 32, "epochs": epochs,
                          "regret_vs_fresh": None if fresh_best is None else fresh_best - float(np.nanmean(perfs))}
    for k, v in out.items():
        if "missing" in v or "missing" in v.get("seeds", [{}])[0]:
            print(f"[{k} {name}] skipped: {(v.get('seeds') or [v])[0]['missing']} is not installed", flush=True)
        else:
            print(f"[{k} {name}] val {v['val_perf_mean']:.4f}, regret vs the re-evaluated best "
                  f"{v['regret_vs_fresh'] if v['regret_vs_fresh'] is not None else float('nan'):+.4f}", flush=True)
    return out


def part_epochs(runner: Any, name: str, reeval: dict[str, Any], factors: tuple[float, ...] = (1.0, 2.0),
                seeds: int = 4) -> dict[str, Any]:
    """The re-evaluated best cell trained for ``factors`` x the trials' epochs (``train_examples``):
    whether the epoch budget leaves perf on the table (the issue's grid trained 40 epochs, the trials ~20)."""
    from ignite_seg import FixedHyperparameters

    task = TASKS[name]
    _, epochs = _epochs(_facts(task)["n_train"])
    best = max(reeval["cells"], key=lambda r: r["fresh_perf_mean"])
    rows = []
    for f in factors:
        e = max(1, int(round(f * epochs)))
        hp = FixedHyperparameters(lr_start=best["lr"] / GRID_LR_RATIO, lr_end=best["lr"], batch_size=best["batch"],
                                  cycle_size_epochs=e, epochs=e)
        outs = _run_trials(runner, task, [(hp, 7000 + k) for k in range(seeds)])
        perf = val_perfs(outs)
        rows.append({"epochs": e, "perfs": perf.tolist(), "mean": float(np.nanmean(perf)),
                     "sem": float(np.nanstd(perf) / math.sqrt(seeds))})
        print(f"[epochs {name}] lr {best['lr']:.3g} batch {best['batch']}, {e} epochs: {np.nanmean(perf):.4f} "
              f"± {rows[-1]['sem']:.4f} (sem)", flush=True)
    return {"lr": best["lr"], "batch": best["batch"], "rows": rows}


def part_stability(runner: Any, name: str, presets: list[str], seeds: int = 10) -> dict[str, Any]:
    """Tune only (no trials) with each preset and ``seeds`` seeds: how the choice varies.

    Besides the lr_end CV over all seeds, the CV over the seeds that chose the most common batch
    size: the LR is scaled linearly with the batch size, so one seed whose noise scale falls on the
    other side of a batch-grid boundary doubles or halves its lr_end; at one batch size the CV is the
    range test's own spread. Also the gradient noise scale each seed measured (``misc.json``), which
    places the batch-size candidates.
    """
    from ignite_seg.config.presets import get_preset
    from ignite_seg.storage.run_folder import RunFolder
    from ignite_seg.tuning.recipe import choose_recipe

    task = TASKS[name]
    out: dict[str, Any] = {}
    for preset in presets:
        chosen, walls, noise = [], [], []
        for seed in range(seeds):
            with tempfile.TemporaryDirectory(prefix="ignite_seg_bench_") as tmp:
                t0 = time.perf_counter()
                chosen.append(choose_recipe(runner, RunFolder(tmp), get_preset(preset), _specs(task),
                                   accuracy_style=task["style"], facts=_facts(task), seed=seed, device="cpu"))
                walls.append(time.perf_counter() - t0)
                misc = json.loads((Path(tmp) / "hparams/misc.json").read_text())
                noise.append(misc["steps"]["batch_size"]["noise_scale"])
        lr_end = np.array([hp.lr_end for hp in chosen])
        bss = np.array([hp.batch_size for hp in chosen])
        values, counts = np.unique(bss, return_counts=True)
        modal = int(values[np.argmax(counts)])
        at_modal = lr_end[bss == modal]
        res = {
            "preset": preset, "seeds": seeds, "lr_end": lr_end.tolist(), "batch_sizes": bss.tolist(),
            "lr_end_cv": float(lr_end.std() / lr_end.mean()), "modal_batch": modal,
            "lr_end_cv_at_modal_batch": float(at_modal.std() / at_modal.mean()), "n_at_modal_batch": int(at_modal.size),
            "tuning_wall_seconds": walls, "noise_scale": noise,
            "noise_scale_sd_log": float(np.nanstd(np.log(noise))),
        }
        out[preset] = res
        print(f"[stability {preset} {name}] {seeds} seeds: lr_end CV {100 * res['lr_end_cv']:.0f}%, "
              f"{100 * res['lr_end_cv_at_modal_batch']:.0f}% over the {at_modal.size} at batch {modal}; "
              f"batches {bss.tolist()}, lr_end {np.round(lr_end, 4).tolist()}, noise scale {np.round(noise, 1).tolist()} "
              f"(sd of its log {res['noise_scale_sd_log']:.2f}), tuning wall {np.mean(walls):.2f} s",
              flush=True)
    return out


def part_speed(repeats: int = 3) -> list[dict[str, Any]]:
    import ignite_seg

    out = []
    task = TASKS["digits"]
    for k in range(repeats):
        with tempfile.TemporaryDirectory(prefix="ignite_seg_bench_") as tmp:
            t0 = time.perf_counter()
            res = ignite_seg.train(task["model"], task["dataset"], task["loss"], folder=Path(tmp) / "run",
                                   hyperparameters="fastest", trials=2, analysis="none", cores=2, seed=k)
            wall = time.perf_counter() - t0
            misc = json.loads((Path(tmp) / "run/hparams/misc.json").read_text())
        perfs = [t.perf_val for t in res.completed]
        row = {"seed": k, "train_wall_seconds": wall, "tuning_wall_seconds": misc["compute"]["total_wall_seconds"],
               "val_perf": perfs, "hyperparameters": res.hyperparameters.to_dict()}
        out.append(row)
        print(f"[speed] seed {k}: tuning {row['tuning_wall_seconds']:.1f} s, whole train {wall:.1f} s, val {perfs}",
              flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="all", choices=["grid", "reeval", "presets", "epochs", "stability", "speed", "all"])
    parser.add_argument("--tasks", default="digits,regression")
    parser.add_argument("--presets", default="fastest,fast,slow,slowest")
    parser.add_argument("--out", default="out/bench")
    parser.add_argument("--seeds", type=int, default=10, help="tuning seeds of the stability part")
    parser.add_argument("--preset-seeds", type=int, default=len(PRESET_SEEDS), help="tuning seeds per preset")
    parser.add_argument("--keep", default=None, help="copy each tune's hparams/ folder here (for tq_curves.py)")
    parser.add_argument("--anchors", action="store_true",
                        help="with --part presets: also Optuna TPE (given the first preset's worker CPU) and Prodigy")
    parser.add_argument("--reeval-seeds", type=int, default=10, help="fresh seeds per re-evaluated grid cell")
    parser.add_argument("--cache", default=None,
                        help="folder of the grid and re-evaluation JSON (default: --out); computed once, then read")
    args = parser.parse_args()
    import logging

    logging.getLogger("ignite_seg").setLevel(logging.WARNING)
    from ignite_seg.runtime.tasks import TaskRunner

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(args.cache) if args.cache else out
    cache.mkdir(parents=True, exist_ok=True)
    if args.part == "epochs":
        with TaskRunner(2) as runner:
            for name in args.tasks.split(","):
                reeval = json.loads((cache / f"reeval_{name}.json").read_text())
                (out / f"epochs_{name}.json").write_text(json.dumps(part_epochs(runner, name, reeval), indent=1))
    if args.part in ("grid", "reeval", "presets", "all"):
        with TaskRunner(2) as runner:
            for name in args.tasks.split(","):
                grid_path = cache / f"grid_{name}.json"
                if args.part in ("grid", "all") or not grid_path.exists():
                    grid_path.write_text(json.dumps(part_grid(runner, name), indent=1))
                grid = json.loads(grid_path.read_text())
                if args.part in ("reeval", "all"):
                    (cache / f"reeval_{name}.json").write_text(
                        json.dumps(part_reeval(runner, name, grid, seeds=args.reeval_seeds), indent=1))
                if args.part in ("presets", "all"):
                    reeval_path = cache / f"reeval_{name}.json"
                    fresh = json.loads(reeval_path.read_text())["best_fresh_perf"] if reeval_path.exists() else None
                    seeds = tuple(range(args.preset_seeds))
                    keep = Path(args.keep) if args.keep else None
                    res = part_presets(runner, name, grid, args.presets.split(","), seeds, fresh, keep)
                    path = out / f"presets_{name}.json"
                    old = json.loads(path.read_text()) if path.exists() else {}
                    path.write_text(json.dumps({**old, **res}, indent=1))
                    if args.anchors:
                        first = res[args.presets.split(",")[0]]
                        anchors = part_anchors(runner, name, float(np.mean(first["tuning_worker_cpu_seconds"])), fresh,
                                               seeds)
                        (out / f"anchors_{name}.json").write_text(json.dumps(anchors, indent=1))
    if args.part == "stability":
        with TaskRunner(2) as runner:
            for name in args.tasks.split(","):
                res = part_stability(runner, name, args.presets.split(","), args.seeds)
                (out / f"stability_{name}.json").write_text(json.dumps(res, indent=1))
    if args.part in ("speed", "all"):
        (out / "speed.json").write_text(json.dumps(part_speed(), indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()

"""What a tune costs against the trials it chooses for (issue 25), at 2k / 20k / 50k images.

The task (:mod:`bench.cost_task`): synthetic 3x32x32 images of 10 classes, a 2-conv CNN, a
``TensorDataset``. Parts:

* ``units``: in this process, one torch thread, side by side: the seconds of one sweep step (the
  noise-scale trainer at batch 16), of one measurement of the 512-item held-out slice, of one plain
  training step at batch 16, and of building the recipe in a task (per dataset size). Short runs
  of the tuner's own task functions (``run_lr_sweep``, ``run_batch_trial``), so the figures are
  the code's.
* ``plan``: per preset, size and variant (``before``: the caps lifted, as on main: sweeps of
  ``lr_sweep_len`` epochs measuring the held-out slice after every step, candidates of
  ``batch_sweep_len`` epochs; ``after``: the presets as they are), the counts — iterations per
  repeat, held-out evaluations, candidate examples — from :mod:`ignite_seg.tuning.budget`, and
  the worker-seconds they cost at the ``units`` prices, against the trials' own compute (2 trials
  of ``epochs`` x steps at batch 16, without their snapshot evaluations). The rescan is counted
  at batch 16 (its repeats are pooled there; a larger chosen batch costs more per step).
* ``run``: real ``ignite_seg.tune`` runs (2 cores), the compute ``misc.json`` records, and the
  choice: ``--sizes 2000 --presets fastest,fast --variants before,after --seeds 0,1``;
  ``--task digits`` tunes the digits MLP instead.
* ``train``: one real ``ignite_seg.train`` call per size and preset (tune + 2 trials, 2 cores, no
  analysis): the tune's worker seconds (``misc.json``) against the 2 trials' own seconds (each trial's
  clock in its worker, one torch thread), and the call's wall: ``--part train --sizes 2000,20000,50000
  --presets fast``.
* ``sampling``: digits, four repeats of ``fast``'s first sweep recorded at every step; the range
  chosen on the held-out curve sampled every 1, 2, 4, 8, 16 steps (the sampling's effect alone).

    PYTHONPATH=. nice python bench/tune_cost.py --part units,plan --out out/tune_cost
    PYTHONPATH=. nice python bench/tune_cost.py --part run --task digits --presets fast --seeds 0,1,2
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import DIGITS, machine  # noqa: E402

SIZES = (2_000, 20_000, 50_000)
TRIALS = 2


def task_specs(n: int) -> dict[str, Any]:
    return {"model": ("bench.cost_task", "model", (), {}),
            "dataset": ("bench.cost_task", "images", (n,), {}),
            "loss": ("torch.nn", "CrossEntropyLoss", (), {})}


def variant(preset: str, which: str) -> Any:
    from ignite_seg.config.presets import get_preset

    s = get_preset(preset)
    if which == "before":  # main's behaviour: no caps, the held-out slice after every step
        s = dataclasses.replace(s, lr_sweep_max_examples=None, lr_holdout_evals=None, batch_sweep_max_examples=None)
    return s


def _recipe(n: int) -> Any:
    from ignite_seg.config.presets import get_preset
    from ignite_seg.config.specs import normalize_spec
    from ignite_seg.engine.sweeps import RecipeSpec
    from ignite_seg.tuning.recipe import holdout_indices

    specs = task_specs(n)
    hold = holdout_indices(n, get_preset("fast"), 0)
    return RecipeSpec(model=normalize_spec(specs["model"], "m"), dataset=normalize_spec(specs["dataset"], "d"),
                      loss=normalize_spec(specs["loss"], "l"), accuracy_style="classification",
                      holdout=tuple(int(i) for i in hold), device="cpu", threads=1)


def part_units(n: int = 2_000, iters: int = 80) -> dict[str, float]:
    """Seconds per sweep step, per held-out measurement, per plain step at 16, per task set-up."""
    from ignite_seg.engine.sweeps import BatchRunTask, LRSweepTask, run_batch_trial, run_lr_sweep

    recipe = _recipe(n)
    base = LRSweepTask(key=0, recipe=recipe, init_seed=0, data_seed=0, batch_size=16, lr_start=1e-4, lr_end=1e-2,
                       iterations=iters, diverge_th=1e9, diverge_regain=1.0, smooth_f=0.1, noise_chunks=4,
                       holdout_every=10 * iters)  # measured twice: the first and the last step
    run_lr_sweep(base)  # warm up
    quiet = run_lr_sweep(base)
    every = run_lr_sweep(dataclasses.replace(base, holdout_every=1))
    step = (quiet.seconds - quiet.prepare_seconds) / iters
    evaluation = (every.seconds - quiet.seconds) / (iters - 2)
    batch = run_batch_trial(BatchRunTask(key=0, recipe=recipe, seed=0, batch_size=16, lr_min=1e-3, lr_max=1e-2,
                                         epochs=iters * 16 / (n - len(recipe.holdout))))
    out = {"n": n, "iterations": iters, "sweep_step_s": step, "holdout_eval_s": evaluation,
           "plain_step16_s": batch.seconds / max(batch.iterations, 1), "eval_over_step": evaluation / step}
    for size in SIZES:  # building the recipe (the dataset) in a task, per size
        t0 = time.perf_counter()
        from ignite_seg.engine.sweeps import _prepare

        _prepare(_recipe(size), 0, 0)
        out[f"prepare_{size}_s"] = time.perf_counter() - t0
    print(f"[units] {json.dumps(out)}", flush=True)
    return out


def plan_row(preset: str, which: str, n: int, units: dict[str, float]) -> dict[str, Any]:
    """Counts and their worker-seconds at the ``units`` prices, for one preset, variant and size."""
    from ignite_seg.tuning.budget import batch_budget_epochs, sweep_plan
    from ignite_seg.tuning.recipe import holdout_indices
    from ignite_seg.tuning.schedule import choose_schedule

    s = variant(preset, which)
    n_fit = n - len(holdout_indices(n, s, 0))
    plan = sweep_plan(s, n_fit, s.initial_batch_size)
    sweeps = s.lr_min_inits * (2 if s.rescan_lr_after_bs else 1)
    budget = batch_budget_epochs(s, n_fit)
    rungs, alive, b, cand_examples, cand_runs = [], s.batch_pts, budget, 0.0, 0
    while alive > 1:  # successive halving: ceil(alive / eta) survive with eta times the budget
        rungs.append((alive, b))
        cand_examples += alive * s.batch_rn_min_inits * b * n_fit
        cand_runs += alive * s.batch_rn_min_inits
        alive, b = math.ceil(alive / s.batch_eta), b * s.batch_eta
    prep = units[f"prepare_{n}_s"] if f"prepare_{n}_s" in units else 0.0
    sweep_s = sweeps * (prep + plan.iterations * units["sweep_step_s"] + plan.holdout_evals * units["holdout_eval_s"])
    cand_s = cand_runs * prep + cand_examples / s.initial_batch_size * units["plain_step16_s"]
    epochs = choose_schedule(n, train_examples=s.train_examples, min_epochs=s.min_epochs, max_epochs=s.max_epochs,
                             cycles=s.cycles)[1]
    trial_steps = epochs * math.ceil(n / 16)
    trials_s = TRIALS * (prep + trial_steps * units["plain_step16_s"])
    tuning = sweep_s + cand_s
    return {"preset": preset, "variant": which, "n": n, "sweep_iterations": plan.iterations, "sweep_repeats": sweeps,
            "holdout_evals_per_repeat": plan.holdout_evals, "candidate_examples": int(cand_examples),
            "candidate_runs": cand_runs, "sweep_s": sweep_s, "candidate_s": cand_s, "tuning_s": tuning,
            "trial_epochs": epochs, "trial_steps": trial_steps, "trials_s": trials_s,
            "tuning_over_trials": tuning / trials_s, "share_of_train": tuning / (tuning + trials_s)}


def part_plan(units: dict[str, float], presets: list[str]) -> list[dict[str, Any]]:
    rows = [plan_row(p, w, n, units) for p in presets for w in ("before", "after") for n in SIZES]
    for r in rows:
        print(f"[plan] {r['preset']:8s} {r['variant']:6s} n={r['n']:6d}: {r['sweep_repeats']} x {r['sweep_iterations']} "
              f"iters, {r['holdout_evals_per_repeat']} held-out evals/repeat, {r['candidate_examples']} candidate "
              f"examples; tuning {r['tuning_s']:.0f} s vs trials {r['trials_s']:.0f} s "
              f"(x{r['tuning_over_trials']:.2f}, share {r['share_of_train']:.0%})", flush=True)
    return rows


def part_run(task: str, sizes: list[int], presets: list[str], variants: list[str], seeds: list[int]) -> list[dict[str, Any]]:
    import ignite_seg

    rows = []
    for n in sizes:
        specs = DIGITS if task == "digits" else task_specs(n)
        for preset in presets:
            for which in variants:
                for seed in seeds:
                    with tempfile.TemporaryDirectory(prefix="ignite_seg_cost_") as tmp:
                        t0 = time.perf_counter()
                        res = ignite_seg.tune(specs["model"], specs["dataset"], specs["loss"], folder=Path(tmp) / "r",
                                              hyperparameters=variant(preset, which), cores=2, seed=seed)
                        wall = time.perf_counter() - t0
                        misc = json.loads((Path(tmp) / "r/hparams/misc.json").read_text())
                    hp = res.hyperparameters
                    lr = misc["steps"].get("lr_range", {})
                    row = {"task": task, "n": misc.get("n_train", n), "preset": preset, "variant": which, "seed": seed, "wall_s": wall,
                           "compute": misc["compute"], "sweep_iterations": lr.get("iterations"),
                           "holdout_every": lr.get("holdout_every"), "lr_start": hp.lr_start, "lr_end": hp.lr_end,
                           "batch_size": hp.batch_size, "epochs": hp.epochs}
                    rows.append(row)
                    print(f"[run] {task} n={row['n']} {preset} {which} seed {seed}: lr {hp.lr_start:.4g} -> {hp.lr_end:.4g}, "
                          f"batch {hp.batch_size}, {lr.get('iterations')} iters/repeat; worker "
                          f"{misc['compute']['total_task_seconds']:.1f} s, tune wall {wall:.1f} s", flush=True)
    return rows


def part_train(sizes: list[int], presets: list[str], seed: int) -> list[dict[str, Any]]:
    """Per size and preset, one ``train()`` call: what the tune cost against the trials it chose for.
    The preset ``untuned`` is the default a user would write instead (Adam at 1e-3, batch 64, constant, 5
    epochs: issue 25's anchor), through the same call."""
    import numpy as np

    import ignite_seg

    untuned = ignite_seg.FixedHyperparameters(lr_start=1e-3, lr_end=1e-3, batch_size=64, cycle_size_epochs=5.0,
                                              epochs=5, optimizer="adamw", weight_decay=0.0, schedule="constant")
    rows = []
    for n in sizes:
        specs = task_specs(n)
        for preset in presets:
            with tempfile.TemporaryDirectory(prefix="ignite_seg_cost_") as tmp:
                t0 = time.perf_counter()
                res = ignite_seg.train(specs["model"], specs["dataset"], specs["loss"], folder=Path(tmp) / "r",
                                       hyperparameters=untuned if preset == "untuned" else preset, trials=TRIALS,
                                       cores=2, analysis="none", seed=seed)
                wall = time.perf_counter() - t0
                misc_path = Path(tmp) / "r/hparams/misc.json"
                misc = json.loads(misc_path.read_text()) if misc_path.exists() else {}
            hp = res.hyperparameters
            compute = misc.get("compute", {"total_task_seconds": 0.0, "total_wall_seconds": 0.0})
            trial_s = float(sum(t.seconds for t in res.completed))
            tune_s = float(compute["total_task_seconds"])
            row = {"n": n, "preset": preset, "seed": seed, "call_wall_s": wall, "tune_worker_s": tune_s,
                   "tune_wall_s": compute["total_wall_seconds"], "trials_worker_s": trial_s,
                   "tune_over_trials": tune_s / trial_s, "compute": compute, "val_sem": float(
                       np.std([t.perf_val for t in res.completed], ddof=1) / math.sqrt(len(res.completed))), "lr_start": hp.lr_start,
                   "lr_end": hp.lr_end, "batch_size": hp.batch_size, "epochs": hp.epochs,
                   "val_perf": [t.perf_val for t in res.completed]}
            rows.append(row)
            print(f"[train] n={n} {preset} seed {seed}: lr {hp.lr_start:.4g} -> {hp.lr_end:.4g}, batch "
                  f"{hp.batch_size}, {hp.epochs} epochs; tune {tune_s:.1f} worker-s ({row['tune_wall_s']:.1f} s wall), "
                  f"2 trials {trial_s:.1f} worker-s: tune / trials {row['tune_over_trials']:.2f}x; call {wall:.1f} s; "
                  f"val {np.mean(row['val_perf']):.4f} ± {row['val_sem']:.4f}", flush=True)
    return rows


def part_sampling(repeats: int = 4) -> list[dict[str, Any]]:
    """Digits, ``fast``'s first sweep recorded at every step in this process; the range chosen on the
    held-out curve sampled every 1, 2, 4, 8, 16 steps and interpolated (the sampling's effect alone)."""
    import numpy as np

    from ignite_seg.config.presets import get_preset
    from ignite_seg.config.specs import normalize_spec
    from ignite_seg.engine.sweeps import LRSweepTask, RecipeSpec, run_lr_sweep
    from ignite_seg.tuning.budget import fill_sampled, holdout_measured_at
    from ignite_seg.tuning.context import derive_seed
    from ignite_seg.tuning.lr_range import RangeRule, choose_lr_range, geometric_lrs
    from ignite_seg.tuning.recipe import _stack, holdout_indices

    s, n, iters = get_preset("fast"), 1437, 486
    recipe = RecipeSpec(model=normalize_spec(DIGITS["model"], "m"), dataset=normalize_spec(DIGITS["dataset"], "d"),
                        loss=normalize_spec(DIGITS["loss"], "l"), accuracy_style="classification", device="cpu",
                        holdout=tuple(int(i) for i in holdout_indices(n, s, 0)), threads=1)
    runs = [run_lr_sweep(LRSweepTask(
        key=r, recipe=recipe, init_seed=derive_seed(r, "lr-init", 0), data_seed=derive_seed(r, "lr", "data", 0),
        batch_size=16, lr_start=s.lr_start, lr_end=s.lr_end, iterations=iters, diverge_th=s.diverge_th,
        diverge_regain=s.diverge_regain, smooth_f=s.lr_smooth_f, noise_chunks=4)) for r in range(repeats)]
    losses, held = (_stack([r.arrays[k] for r in runs], iters) for k in ("losses", "holdout_losses"))
    rule = RangeRule(window=max(1, int(round(s.lr_smooth_frac * iters))) | 1, diverge_th=s.diverge_th,
                     regain=s.diverge_regain, steep_frac=s.lr_steep_frac, window_decades=s.lr_window_decades,
                     min_span_decades=s.lr_min_span_decades)
    out = []
    for every in (1, 2, 4, 8, 16):
        mask = np.stack([holdout_measured_at(iters, every).astype(float) for _ in runs])
        for r, row in enumerate(losses):
            ran = int(np.isfinite(row).sum())
            mask[r, ran:], mask[r, ran - 1] = np.nan, 1.0
        c = choose_lr_range(geometric_lrs(s.lr_start, s.lr_end, iters), losses, rule,
                            curves=fill_sampled(np.where(mask == 1, held, np.nan), mask))
        out.append({"every": every, "lr_min": c.lr_min, "lr_max": c.lr_max, "steepest": c.steepest_lr})
        print(f"[sampling] every {every:2d}: {c.lr_min:.4g} -> {c.lr_max:.4g} (steepest {c.steepest_lr:.4g})", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="units,plan")
    parser.add_argument("--task", default="images", choices=["images", "digits"])
    parser.add_argument("--sizes", default="2000")
    parser.add_argument("--presets", default="fastest,fast")
    parser.add_argument("--variants", default="before,after")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out", default="out/tune_cost")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = args.part.split(",")
    presets = args.presets.split(",")
    print(f"[machine] {machine()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    if "units" in parts or "plan" in parts:
        units_path = out / "units.json"
        units = part_units() if "units" in parts or not units_path.exists() else json.loads(units_path.read_text())
        units_path.write_text(json.dumps(units, indent=1))
        if "plan" in parts:
            (out / "plan.json").write_text(json.dumps(part_plan(units, presets), indent=1))
    if "sampling" in parts:
        (out / "sampling.json").write_text(json.dumps(part_sampling(), indent=1))
    if "run" in parts:
        rows = part_run(args.task, [int(x) for x in args.sizes.split(",")], presets, args.variants.split(","),
                        [int(x) for x in args.seeds.split(",")])
        name = f"run_{args.task}_{args.sizes.replace(',', '-')}_{args.presets.replace(',', '-')}.json"
        (out / name).write_text(json.dumps(rows, indent=1))
    if "train" in parts:
        rows = part_train([int(x) for x in args.sizes.split(",")], presets, int(args.seeds.split(",")[0]))
        (out / f"train_{args.sizes.replace(',', '-')}_{args.presets.replace(',', '-')}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

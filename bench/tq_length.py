"""Would a "length check" see the overfitting of the unseen tasks, and leave the bench tasks alone? (issue 25)

Offline study for a tuner stage not built yet. For each tuned recipe of a ``bench/tq_goals.py`` output folder
(seed 0), one run of that recipe, its full length, trained on the tuner's *fit split* (the training set minus the
held-out slice that every tuning run leaves out) and measured on that held-out slice once an epoch (the trial's
"val" curve, with the slice as the validation set). The candidate rule: the held-out loss (a 3-epoch moving
mean) ends more than ``--tol`` above its minimum -> the trials train ``max(min_epochs, ceil(factor x the best
epoch))`` epochs. Where it fires, 2 trials (the tuned trials' seeds) at the cut length on the real split say
whether the cut helps.

    PYTHONPATH=. python bench/tq_length.py --goals /work/runs/g13 /work/runs/unseen --out OUT
"""
from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import math
from pathlib import Path
from typing import Any

import numpy as np


def fit_holdout(task_name: str, seed: int) -> tuple[Any, Any]:
    """The task's training set split as the tuner splits it: (fit split, held-out slice)."""
    from torch.utils.data import Subset

    from bench.tq_robust import ROBUST_TASKS
    from bench.tq_unseen_tasks import UNSEEN_TASKS
    from bench.tune_quality import TASKS, _specs
    from ignite_seg.config.presets import get_preset
    from ignite_seg.tuning.recipe import holdout_indices

    tasks = {**TASKS, **ROBUST_TASKS, **UNSEEN_TASKS}
    spec = _specs(tasks[task_name])["dataset"]
    train = spec.build()[0]
    held = holdout_indices(len(train), get_preset("fast"), seed)
    fit = np.setdiff1d(np.arange(len(train)), held)
    return Subset(train, fit.tolist()), Subset(train, held.tolist())


def _hp(recipe: dict[str, Any]) -> Any:
    from ignite_seg import FixedHyperparameters

    return FixedHyperparameters(**{k: tuple(v) if k == "betas" else v for k, v in recipe.items()})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--goals", nargs="+", required=True)
    ap.add_argument("--tol", type=float, default=0.10)
    ap.add_argument("--factor", type=float, default=1.5)
    ap.add_argument("--out", default="out/length")
    args = ap.parse_args()
    from bench.tq_robust import ROBUST_TASKS
    from bench.tq_unseen_tasks import UNSEEN_TASKS
    from bench.tune_quality import TASKS, _run_trials, _specs, val_perfs
    from ignite_seg.config.presets import get_preset
    from ignite_seg.config.specs import normalize_spec
    from ignite_seg.engine.trainer import TrialSetup, TrialTask, run_trial
    from ignite_seg.runtime.tasks import TaskRunner

    TASKS.update(ROBUST_TASKS)
    TASKS.update(UNSEEN_TASKS)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    min_epochs = get_preset("fast").min_epochs
    files = sorted(f for d in args.goals for f in glob.glob(f"{d}/goals_*_s0.json"))
    rows = []
    with TaskRunner(2) as runner:
        for f in files:
            j = json.loads(Path(f).read_text())
            task, hp = TASKS[j["task"]], _hp(j["tuned"]["recipe"])
            specs = _specs(task)
            split = normalize_spec(("bench.tq_length", "fit_holdout", (j["task"], 0), {}), "d")
            setup = TrialSetup(model=specs["model"], dataset=split,
                               loss=specs["loss"], accuracy_style=task["style"], device="cpu", snapshots_per_epoch=1)
            res = next(iter(runner.map_unordered(run_trial, [TrialTask(trial_id=0, setup=setup, hparams=hp, seed=3000,
                                                                         threads=runner.task_threads)])))
            if res.status != "completed":
                print(f"[length] {j['task']} {j['recipe']}: the run on the fit split failed: "
                      f"{(res.error_text or '').strip().splitlines()[-1:]}", flush=True)
                continue
            tt = res.throughtime
            ep, loss, perf = (np.asarray(tt[k]) for k in ("epochs", "losses_val", "perfs_val"))
            keep = ep >= 1 - 1e-9  # the epoch-0 snapshot is the start
            ep, loss, perf = ep[keep], loss[keep], perf[keep]
            sm = np.convolve(loss, np.ones(3) / 3, mode="valid") if loss.size >= 3 else loss
            best = int(np.argmin(sm)) + (1 if loss.size >= 3 else 0)  # the centre of the best 3-epoch window
            best_epoch = float(ep[best])
            rise = float(sm[-1] / sm.min() - 1)
            fires = rise > args.tol
            cut = max(min_epochs, int(math.ceil(args.factor * best_epoch))) if fires else hp.epochs
            row = {"task": j["task"], "recipe": j["recipe"], "epochs": hp.epochs, "best_epoch": best_epoch,
                   "rise": rise, "fires": bool(fires and cut < hp.epochs), "cut": min(cut, hp.epochs),
                   "holdout_loss": loss.tolist(), "holdout_perf": perf.tolist(),
                   "tuned": j["tuned"]["mean"], "untuned": j.get("untuned", {}).get("mean")}
            if row["fires"]:
                h = dataclasses.replace(hp, epochs=row["cut"], cycle_size_epochs=row["cut"] * hp.cycle_size_epochs / hp.epochs)
                row["cut_perf"] = float(np.mean(val_perfs(_run_trials(runner, task, [(h, 2000 + t) for t in range(2)]))))
            rows.append(row)
            print(f"[length] {j['task']} {j['recipe']}: {hp.epochs} epochs, held-out loss best at epoch {best_epoch:.0f}, "
                  f"ends {100 * rise:+.0f}% above it -> {'cut to ' + str(row['cut']) if row['fires'] else 'kept'}; "
                  f"val tuned {row['tuned']:.4f}" + (f", cut {row['cut_perf']:.4f}" if row["fires"] else "")
                  + (f", untuned {row['untuned']:.4f}" if row["untuned"] is not None else ""), flush=True)
    (out / "length.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

"""Would a "length check" see the overfitting of the unseen tasks, and leave the bench tasks alone? (issue 25)

The offline study (session 13) behind the tuner stage built in session 14 (``ignite_seg/tuning/length.py``, whose
rule is ``--rule perf --tol 0.02 --slices 2`` here, with early-stopped runs); kept to try other rules offline. For each tuned recipe of a ``bench/tq_goals.py`` output folder
(seed 0), one run of that recipe, its full length, trained on the tuner's *fit split* (the training set minus the
held-out slice that every tuning run leaves out) and measured on that held-out slice once an epoch (the trial's
"val" curve, with the slice as the validation set); ``--slices K``: K such runs on K slices (the tuner's
holdout seeds 0..K-1), their curves averaged. Candidate rules, on 3-epoch moving means: ``loss`` — the held-out
loss ends more than ``--tol`` above its minimum -> the trials train ``max(min_epochs, ceil(factor x the best
epoch))`` epochs; ``perf`` — the held-out perf ends more than tol below its best (``--tol`` x the best, plus two
items of the slices for classification) -> the trials train to the last epoch of the plateau around the best.
Where a rule fires, 2 trials (the tuned trials' seeds) at the cut length on the real split say whether the cut
helps.

    PYTHONPATH=. python bench/tq_length.py --goals /work/runs/g13 /work/runs/unseen --out OUT
    PYTHONPATH=. python bench/tq_length.py --goals ... --rule perf --tol 0.02 --slices 2 --out OUT
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


def fit_holdout(task_name: str, seed: int) -> Any:
    """The task's training set split as the tuner splits it: (fit split, held-out slice)."""
    from torch.utils.data import Subset

    from bench.tq_robust import ROBUST_TASKS
    from bench.tq_unseen_tasks import UNSEEN_TASKS
    from bench.tune_quality import TASKS, _specs
    from ignite_seg.config.presets import get_preset
    from ignite_seg.tuning.recipe import holdout_indices

    tasks = {**TASKS, **ROBUST_TASKS, **UNSEEN_TASKS}
    from ignite_seg.engine.batching import Data

    built = _specs(tasks[task_name])["dataset"].build()
    train = built.train if isinstance(built, Data) else built[0]
    held = holdout_indices(len(train), get_preset("fast"), seed)
    fit = np.setdiff1d(np.arange(len(train)), held)
    fit_set, held_set = Subset(train, fit.tolist()), Subset(train, held.tolist())
    if isinstance(built, Data):  # keep its collate_fn, prepare_batch, class_dim
        return dataclasses.replace(built, train=fit_set, val=held_set)
    return fit_set, held_set


def _held_items(split: Any) -> int:
    from ignite_seg.engine.batching import Data

    return len(split.val) if isinstance(split, Data) else len(split[1])


def _curves(tt: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(epochs, held-out loss, held-out perf) of a run, once an epoch (the epoch-0 snapshot dropped)."""
    ep, loss, perf = (np.asarray(tt[k]) for k in ("epochs", "losses_val", "perfs_val"))
    keep = ep >= 1 - 1e-9
    return ep[keep], loss[keep], perf[keep]


def _smooth(y: np.ndarray) -> np.ndarray:
    """A centred 3-epoch moving mean (the ends over what they have)."""
    pad = np.concatenate([y[:1], y, y[-1:]])
    out = np.convolve(pad, np.ones(3) / 3, mode="valid")
    out[0], out[-1] = y[:2].mean(), y[-2:].mean()
    return out


def _decide(args: argparse.Namespace, ep: np.ndarray, loss: np.ndarray, perf: np.ndarray, m: int, style: str,
            epochs: int, min_epochs: int) -> tuple[float, float, int]:
    """(best epoch, relative change at the end from the best, the epochs the trials would train)."""
    if args.rule == "loss":
        sm = _smooth(loss)
        k = int(np.argmin(sm))
        change = float(sm[-1] / sm[k] - 1)
        cut = max(min_epochs, int(math.ceil(args.factor * ep[k]))) if change > args.tol else epochs
        return float(ep[k]), change, min(cut, epochs)
    sm = _smooth(perf)
    k = int(np.argmax(sm))
    tol = args.tol * abs(sm[k]) + (2.0 / m if style != "inv-loss" else 0.0)
    change = float(sm[-1] / sm[k] - 1)
    if sm[k] - sm[-1] <= tol:
        return float(ep[k]), change, epochs
    last = k + int(np.argmax(sm[k:] < sm[k] - tol)) - 1  # the last epoch of the plateau around the best
    return float(ep[k]), change, min(epochs, max(min_epochs, int(math.ceil(ep[last]))))


def _hp(recipe: dict[str, Any]) -> Any:
    from ignite_seg import FixedHyperparameters

    return FixedHyperparameters(**{k: tuple(v) if k == "betas" else v for k, v in recipe.items()})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--goals", nargs="+", required=True)
    ap.add_argument("--rule", choices=("loss", "perf"), default="loss",
                    help="loss: the held-out loss ends > --tol above its minimum -> cut to --factor x the best epoch; "
                         "perf: the held-out perf ends more than tol below its best, tol = --tol x |best| (+ 2 items "
                         "of the slices for classification) -> cut to the last epoch still within tol of the best")
    ap.add_argument("--tol", type=float, default=0.10)
    ap.add_argument("--factor", type=float, default=1.5)
    ap.add_argument("--slices", type=int, default=1, help="runs on this many held-out slices (seeds 0..K-1), averaged")
    ap.add_argument("--out", default="out/length")
    args = ap.parse_args()
    from bench.tq_robust import ROBUST_TASKS
    from bench.tq_unseen_tasks import UNSEEN_TASKS
    from bench.tune_quality import TASKS, _run_trials, _specs, seconds_of, val_perfs
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
            tasks = [TrialTask(trial_id=k, threads=runner.task_threads, hparams=hp, seed=3000 + k, setup=TrialSetup(
                model=specs["model"], dataset=normalize_spec(("bench.tq_length", "fit_holdout", (j["task"], k), {}), "d"),
                loss=specs["loss"], accuracy_style=task["style"], device="cpu", snapshots_per_epoch=1))
                for k in range(args.slices)]
            done = list(runner.map_unordered(run_trial, tasks, key=lambda t: t.trial_id))
            failed = [r for r in done if r.status != "completed"]
            if failed:
                print(f"[length] {j['task']} {j['recipe']}: the run on the fit split failed: "
                      f"{(failed[0].error_text or '').strip().splitlines()[-1:]}", flush=True)
                continue
            curves = [_curves(r.throughtime) for r in done]
            ep = curves[0][0]
            loss, perf = (np.mean([c[i] for c in curves], axis=0) for i in (1, 2))
            m = _held_items(fit_holdout(j["task"], 0)) * args.slices
            best_epoch, change, cut = _decide(args, ep, loss, perf, m, task["style"], hp.epochs, min_epochs)
            fires = cut < hp.epochs
            row = {"task": j["task"], "recipe": j["recipe"], "epochs": hp.epochs, "best_epoch": best_epoch,
                   "change": change, "fires": bool(fires), "cut": cut, "slice_items": m, "rule": args.rule,
                   "runs_seconds": float(sum(seconds_of(r) for r in done)), "tune_cpu": j["tuned"]["tune_cpu"],
                   "trials_cpu": j["tuned"]["trials_cpu"],
                   "holdout_loss": loss.tolist(), "holdout_perf": perf.tolist(),
                   "tuned": j["tuned"]["mean"], "untuned": j.get("untuned", {}).get("mean")}
            if row["fires"]:
                h = dataclasses.replace(hp, epochs=row["cut"], cycle_size_epochs=row["cut"] * hp.cycle_size_epochs / hp.epochs)
                row["cut_perf"] = float(np.mean(val_perfs(_run_trials(runner, task, [(h, 2000 + t) for t in range(2)]))))
            rows.append(row)
            print(f"[length] {j['task']} {j['recipe']}: {hp.epochs} epochs, held-out {args.rule} ({m} items) best at "
                  f"epoch {best_epoch:.0f}, ends {100 * change:+.1f}% from it -> "
                  f"{'cut to ' + str(row['cut']) if row['fires'] else 'kept'}; "
                  f"val tuned {row['tuned']:.4f}" + (f", cut {row['cut_perf']:.4f}" if row["fires"] else "")
                  + (f", untuned {row['untuned']:.4f}" if row["untuned"] is not None else "")
                  + f"; the runs {row['runs_seconds']:.1f} s against tune {row['tune_cpu']:.1f} + trials "
                  f"{row['trials_cpu']:.1f} CPU-s", flush=True)
    (out / "length.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

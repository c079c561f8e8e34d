"""Tuner robustness benchmark (issue 25): tuned recipes against the untuned default a user would write.

For one task, one preset and one recipe family, in one run on one pool:

1. tune (seeds ``--seeds``), or take the recipe of an earlier tune (``--final FOLDER/hparams/final.json``,
   e.g. one made by the code before a change);
2. train ``--trials`` trials of each tuned recipe;
3. the anchor: Adam (AdamW, weight decay 0) at 1e-3, batch 64, constant LR, the same epochs, as many trials;
4. print and write (``--out``) val perf mean ± standard error of each, the recipes and the guard's record.

``--grid-peaks 1e-4,3e-4,...`` instead trains the recipe family at each peak LR (``lr_start = peak / 10``,
``--grid-batch``, ``--grid-epochs``, ``--trials`` seeds each): the curve of val perf against the peak on
which a tuned peak can be placed.

Recipes: ``sgd`` (the preset as it is) and ``adamw-cosine`` (``optimizer="adamw", weight_decay=0.01,
schedule="cosine", warmup_epochs=2.0`` on the preset, as in issue 25). Tasks: ``easy_mnist``
(:mod:`bench.tq_robust_tasks`, learned within the sweep) and those of :mod:`bench.tune_quality`.

Run from the repository root (``nice``; every figure here is wall-clock-noisy on a shared machine)::

    PYTHONPATH=. nice python bench/tq_robust.py --task easy_mnist --preset fastest --out out/robust.json
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROBUST_TASKS: dict[str, dict[str, Any]] = {
    "easy_mnist": {
        "model": ("bench.tq_robust_tasks", "easy_mnist_model", (), {}),
        "dataset": ("bench.tq_robust_tasks", "easy_mnist_dataset", (), {}),
        "loss": ("torch.nn", "CrossEntropyLoss", (), {}),
        "style": "classification",
    },
}


def _settings(preset: str, recipe: str) -> Any:
    from ignite_seg.config.presets import get_preset

    s = get_preset(preset)
    if recipe == "adamw-cosine":
        s = dataclasses.replace(s, optimizer="adamw", weight_decay=0.01, schedule="cosine", warmup_epochs=2.0)
    return s


def _summary(perfs: list[float]) -> dict[str, Any]:
    a = np.asarray(perfs, dtype=np.float64)
    ok = a[np.isfinite(a)]
    sem = float(ok.std(ddof=1) / np.sqrt(ok.size)) if ok.size > 1 else float("nan")
    return {"val_perfs": a.tolist(), "mean": float(ok.mean()) if ok.size else float("nan"), "sem": sem,
            "failed": int((~np.isfinite(a)).sum())}


def _grid(runner: Any, task: dict[str, Any], args: Any) -> list[dict[str, Any]]:
    """Val perf of the recipe family at each peak LR of ``--grid-peaks`` (``--trials`` seeds each)."""
    from bench.tune_quality import _run_trials
    from ignite_seg import FixedHyperparameters

    s = _settings(args.preset, args.recipe)
    rows = []
    for peak in (float(v) for v in args.grid_peaks.split(",")):
        hp = FixedHyperparameters(lr_start=peak / 10, lr_end=peak, batch_size=args.grid_batch,
                                  cycle_size_epochs=float(args.grid_epochs), epochs=args.grid_epochs,
                                  optimizer=s.optimizer, weight_decay=s.weight_decay, schedule=s.schedule,
                                  warmup_epochs=s.warmup_epochs, momentum=s.momentum)
        res = _summary([o.result.metrics.get("perf_val", np.nan) if o.status == "completed" else np.nan
                        for o in _run_trials(runner, task, [(hp, 7000 + t) for t in range(args.trials)])])
        rows.append({"peak": peak, **res})
        print(f"[grid {args.task} {args.recipe}] peak {peak:.3g}: val {res['mean']:.4f} ± {res['sem']:.4f}", flush=True)
    return rows


def main() -> None:
    from bench.tune_quality import TASKS, _facts, _run_trials, _specs
    from ignite_seg import FixedHyperparameters
    from ignite_seg.runtime.tasks import TaskRunner
    from ignite_seg.storage.run_folder import RunFolder
    from ignite_seg.tuning.recipe import choose_recipe

    TASKS.update(ROBUST_TASKS)
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="easy_mnist")
    ap.add_argument("--preset", default="fastest")
    ap.add_argument("--recipe", default="sgd", choices=["sgd", "adamw-cosine"])
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--final", default=None, help="a final.json to train instead of tuning")
    ap.add_argument("--no-anchor", action="store_true")
    ap.add_argument("--grid-peaks", default=None)
    ap.add_argument("--grid-batch", type=int, default=32)
    ap.add_argument("--grid-epochs", type=int, default=21)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    task = TASKS[args.task]
    out: dict[str, Any] = {"task": args.task, "preset": args.preset, "recipe": args.recipe, "tunes": []}
    with TaskRunner(2) as runner:
        if args.grid_peaks:
            out["grid"] = _grid(runner, task, args)
            Path(args.out).write_text(json.dumps(out, indent=1, default=str))
            return
        if args.final:
            recipes = [FixedHyperparameters.from_dict(json.loads(Path(args.final).read_text()))]
        else:
            recipes = []
            for seed in (int(s) for s in args.seeds.split(",")):
                with tempfile.TemporaryDirectory(prefix="ignite_seg_robust_") as tmp:
                    rf, t0 = RunFolder(tmp), time.perf_counter()
                    hp = choose_recipe(runner, rf, _settings(args.preset, args.recipe), _specs(task),
                              accuracy_style=task["style"], facts=_facts(task), seed=seed, device="cpu")
                    misc = json.loads((rf.hparams / "misc.json").read_text())
                out["tunes"].append({"seed": seed, "wall_s": time.perf_counter() - t0, "final": hp.to_dict(),
                                     "guard": misc["steps"].get("guard"), "lr_range": misc["steps"].get("lr_range"),
                                     "schedule": misc["steps"].get("schedule")})
                recipes.append(hp)
        jobs = [(hp, 3000 + 10 * k + t) for k, hp in enumerate(recipes) for t in range(args.trials)]
        outcomes = _run_trials(runner, task, jobs)
        out["tuned"] = _summary([o.result.metrics.get("perf_val", np.nan) if o.status == "completed" else np.nan
                                 for o in outcomes])
        out["tuned"]["recipes"] = [hp.to_dict() for hp in recipes]
        out["tuned"]["loss_train"] = [o.metrics.get("loss_train", np.nan) for o in outcomes]
        if not args.no_anchor:
            epochs = recipes[0].epochs
            adam = FixedHyperparameters(lr_start=1e-3, lr_end=1e-3, batch_size=64, cycle_size_epochs=float(epochs),
                                        epochs=epochs, optimizer="adamw", weight_decay=0.0, schedule="constant")
            anchor = _run_trials(runner, task, [(adam, 5000 + t) for t in range(len(jobs))])
            out["anchor_adam_1e-3_b64"] = _summary([o.result.metrics.get("perf_val", np.nan) if o.status == "completed"
                                                    else np.nan for o in anchor])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    t, a = out["tuned"], out.get("anchor_adam_1e-3_b64")
    print(f"[{args.task} {args.preset} {args.recipe}] tuned val {t['mean']:.4f} ± {t['sem']:.4f} (SE), "
          f"recipes {[(round(r['lr_start'], 5), round(r['lr_end'], 5), r['batch_size']) for r in t['recipes']]}"
          + (f"; untuned Adam 1e-3 b64 {a['mean']:.4f} ± {a['sem']:.4f}" if a else ""), flush=True)


if __name__ == "__main__":
    main()

"""How much of the gradient noise scale survives measuring it on every k-th sweep step only.

For each task x recipe x seed, the ``fast`` preset's first sweep (4 repeats at batch 16) runs with
the noise measured on *every* step; the estimate is then recomputed from every k-th step only (each
offset of the k), with the EMA weight per measured step (``noise_ema_beta``) and per sweep step
(``noise_ema_beta ** k``). The unmeasured steps would be plain updates on the same mean gradient, so
on models without batch statistics the trajectory is the one measured (up to float rounding), and
the subsample is what ``noise_every=k`` sees. Printed per pair: the full estimate per seed, the
mean and largest ``|log2(sub / full)|``, the signed bias, and how often the batch-size centre
(the grid point nearest a quarter of the estimate) moves.

Run from the repository root (about 3 minutes on 2 cores)::

    PYTHONPATH=.:bench python bench/noise_every.py [--seeds 0 1 2] [--tasks digits tiny binary noisy_regression cnn]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

from ignite_seg.config.presets import get_preset
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.sweeps import LRSweepTask, RecipeSpec, run_lr_sweep
from ignite_seg.tuning.batch_search import centre_batch
from ignite_seg.tuning.budget import sweep_plan
from ignite_seg.tuning.noise_scale import pooled_noise_scale
from ignite_seg.tuning.recipe import holdout_indices

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "../shared/peers/ignite_seg"))
from tq_goals import RECIPES  # noqa: E402

TASKS = {  # model, dataset, loss, accuracy style, training items
    "tiny": ("tq_tasks.tiny_model", "tq_tasks.tiny_dataset", "torch.nn.CrossEntropyLoss", "classification", 180),
    "binary": ("tq_tasks.binary_model", "tq_tasks.binary_dataset", "torch.nn.CrossEntropyLoss", "classification", 800),
    "noisy_regression": ("tq_tasks.noisy_regression_model", "tq_tasks.noisy_regression_dataset", "torch.nn.MSELoss",
                         "inv-loss", 1000),
    "cnn": ("tq_tasks.cnn_model", "tq_tasks.cnn_dataset", "torch.nn.CrossEntropyLoss", "classification", 1437),
    "digits": ("seg_tasks.model", "seg_tasks.dataset", "torch.nn.CrossEntropyLoss", "classification", 1437),
}
KS = (2, 4, 8)


def spec(dotted: str, role: str):  # type: ignore[no-untyped-def]
    module, name = dotted.rsplit(".", 1)
    return normalize_spec((module, name, (), {}), role)


def first_sweep(task: str, recipe: str, seed: int) -> tuple[np.ndarray, np.ndarray, int, float, float]:
    """The repeats' squared norms (R, P), the points before the first stop, and (b_small, b_big)."""
    model, data, loss, style, n = TASKS[task]
    s = dataclasses.replace(get_preset("fast"), **RECIPES[recipe])
    hold = holdout_indices(n, s, seed)
    rec = RecipeSpec(model=spec(model, "m"), dataset=spec(data, "d"), loss=spec(loss, "l"), accuracy_style=style,
                     holdout=tuple(int(i) for i in hold), options=s.options, device="cpu", threads=1)
    b = s.initial_batch_size
    plan = sweep_plan(s, n - len(hold), b)
    rows = []
    for r in range(s.lr_min_inits):
        res = run_lr_sweep(LRSweepTask(
            key=r, recipe=rec, init_seed=1000 * seed + r, data_seed=2000 * seed + r, batch_size=b, lr_start=s.lr_start,
            lr_end=s.lr_end, iterations=plan.iterations, diverge_th=s.diverge_th, diverge_regain=s.diverge_regain,
            smooth_f=s.lr_smooth_f, noise_chunks=s.noise_chunks, device_index=0, holdout_every=plan.holdout_every,
            noise_every=1))
        assert res.error is None, res.error
        rows.append(res.arrays)
    stacked = {k: np.full((len(rows), plan.iterations), np.nan) for k in ("sq_small", "sq_big")}
    for i, a in enumerate(rows):
        for k in stacked:
            stacked[k][i, : a[k].size] = a[k]
    n_valid = int(0.9 * min(a["losses"].size for a in rows))  # before the first stop, as the tuner's n_valid
    return stacked["sq_small"], stacked["sq_big"], n_valid, b / s.noise_chunks, float(b)


def estimates(sq_s: np.ndarray, sq_b: np.ndarray, n_valid: int, b_small: float, b_big: float) -> dict[str, float]:
    beta = get_preset("fast").noise_ema_beta
    mask = np.arange(sq_s.shape[1]) < n_valid
    out = {"full": pooled_noise_scale(sq_s, sq_b, b_small, b_big, beta, mask)[1]}
    for k in KS:
        for off in range(min(k, 4)):
            sub = np.zeros(sq_s.shape[1], bool)
            sub[off::k] = True
            ss, sb = np.where(sub, sq_s, np.nan), np.where(sub, sq_b, np.nan)
            out[f"k{k}/{off}/beta"] = pooled_noise_scale(ss, sb, b_small, b_big, beta, mask)[1]
            out[f"k{k}/{off}/beta^k"] = pooled_noise_scale(ss, sb, b_small, b_big, beta ** k, mask)[1]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", nargs="+", default=list(TASKS))
    ap.add_argument("--recipes", nargs="+", default=["sgd", "adamw-cosine"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = ap.parse_args()
    s = get_preset("fast")
    centre = lambda v: centre_batch(s.noise_batch_frac * v, s.batch_start, s.batch_end, s.batch_step)  # noqa: E731
    moved: dict[str, list[bool]] = {}
    for task in args.tasks:
        for recipe in args.recipes:
            runs = [estimates(*first_sweep(task, recipe, seed)) for seed in args.seeds]
            full = np.array([r["full"] for r in runs])
            line = f"{task:16s} {recipe:13s} full {np.round(full, 1).tolist()}"
            for variant in (f"k{k}/{ema}" for k in KS for ema in ("beta", "beta^k")):
                logs = [np.log2(r[key] / r["full"]) for r in runs for key in r if key.startswith(variant.split("/")[0] + "/")
                        and key.endswith("/" + variant.split("/")[1])]
                moved.setdefault(variant, []).extend(
                    centre(r[key]) != centre(r["full"]) for r in runs for key in r
                    if key.startswith(variant.split("/")[0] + "/") and key.endswith("/" + variant.split("/")[1]))
                line += f" | {variant}: |log2| {np.mean(np.abs(logs)):.2f}/{np.max(np.abs(logs)):.2f} bias {np.mean(logs):+.2f}"
            print(line, flush=True)
    for variant, flags in moved.items():
        print(f"{variant}: the batch-size centre moved in {sum(flags)} of {len(flags)} subsamples")


if __name__ == "__main__":
    main()

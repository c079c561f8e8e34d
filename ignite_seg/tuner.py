"""The tuner: LR range test, batch-size search, optional rescan, schedule; the evidence kept.

:func:`tune` reads like the process it runs::

    LR range test -> noise scale -> batch-size candidates (successive halving)
                  -> rescan of the LR range at the chosen batch size (optional) -> schedule

Every parallel piece (sweep repeats, candidate runs) is a task of :mod:`ignite_seg.sweeps` run on
the caller's :class:`~ignite_seg.execution.TaskRunner`; the maths lives in the pure modules
:mod:`~ignite_seg.lr_range`, :mod:`~ignite_seg.noise_scale`, :mod:`~ignite_seg.batch_search` and
:mod:`~ignite_seg.schedule`. Only this process writes files, each atomically as its step ends,
``hparams/final.json`` last: a tune killed half way is redone on continuation.

Files in ``hparams/`` (arrays: ``R`` repeats, ``P`` sweep points, ``B``/``C`` batch sizes):

* ``lr_vs_perf.npz``: ``lrs`` (P,), ``losses``/``perfs`` (R,P) (NaN after a repeat stopped),
  ``losses_smoothed``/``perfs_smoothed`` (R,P), ``loss_deriv``/``perf_deriv`` (P,) against
  log10 LR, ``lr_range`` (2,), ``diverged_lr`` (R,); also ``holdout_losses`` (R,P) (the loss on
  the held-out slice after every step) and ``holdout_losses_smoothed`` (R,P), ``choice_curve`` ()
  (``"holdout_losses"`` or ``"losses"``: the curve the range was chosen on, whose derivative
  ``loss_deriv`` is), ``batch_size`` () and ``rescan`` (). With a rescan, the first sweep is kept in
  ``lr_vs_perf_initial.npz`` and ``lr_vs_perf.npz`` holds the sweep whose range was used; a rescan
  at the first sweep's own batch size pools its repeats with the first sweep's: its first rows
  are the first sweep's repeats, then the rescan's.
* ``bs_vs_perf.npz``: ``bss`` (B,), ``perfs`` (R,B) first-rung scores, ``perfs_smoothed`` (B,),
  ``bs_range`` (2,), ``noise_scale`` (), ``noise_scale_lrs``/``noise_scale_values`` (K,) (per
  sweep point, the median of the repeats' running estimates); also ``batch_size`` () (the choice).
* ``bs_sampled.npz``: ``bss`` (C,), ``scores`` (R,C) held-out perf at the deciding rung (NaN
  where pruned earlier), ``budget_epochs`` (C,), ``chosen`` (); also ``losses`` (R,C) the
  held-out losses beside ``scores``, ``rung_scores``/``rung_losses`` (N,R,C) and ``rung_budgets`` (N,).
* ``misc.json``: every decision and its inputs; ``final.json``: the recipe.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Literal, Mapping, Sequence

import numpy as np
from tqdm.auto import tqdm

from .batch_search import batch_candidates, centre_batch, halving_survivors, rank_scores, rank_with_ties, scale_lr
from .exceptions import TuningError
from .execution import TaskLost, TaskRunner
from .fileio import write_json, write_npz
from .folder import RunFolder
from .hparams import FixedHyperparameters, HyperparameterSettings
from .loaders import LoaderSpec
from .lr_range import LRRangeChoice, choose_lr_range, geometric_lrs, log_lr_derivative, mean_curve, smooth_curves
from .noise_scale import pooled_noise_scale
from .schedule import choose_schedule
from .smoothing import moving_average
from .sweeps import BatchRunResult, BatchRunTask, LRSweepResult, LRSweepTask, RecipeSpec, run_batch_trial, run_lr_sweep

__all__ = ["tune", "holdout_indices", "derive_seed"]

logger = logging.getLogger(__name__)


def derive_seed(seed: int, *path: int | str) -> int:
    """A seed for one tuning task, from the run's seed and the task's place (not the worker)."""
    words = [int(seed)] + [p if isinstance(p, int) else int.from_bytes(p.encode(), "little") % (2**32) for p in path]
    return int(np.random.SeedSequence(words).generate_state(1)[0])


def holdout_indices(n_train: int, settings: HyperparameterSettings, seed: int) -> np.ndarray:
    """The fixed slice of the training set on which the tuner measures perf (sorted indices)."""
    m = int(round(settings.holdout_frac * n_train))
    m = max(1, min(m, settings.holdout_max, n_train - 2))
    rng = np.random.default_rng(derive_seed(seed, "holdout"))
    return np.sort(rng.choice(n_train, size=m, replace=False))


def tune(
    runner: TaskRunner,
    rf: RunFolder,
    settings: HyperparameterSettings,
    specs: Mapping[str, LoaderSpec],
    *,
    accuracy_style: str,
    facts: Mapping[str, Any],
    seed: int,
    device: str,
) -> FixedHyperparameters:
    """Choose the learning-rate range, the batch size and the schedule; write ``rf.hparams``.

    Args:
        runner: runs the sweep repeats and candidate runs in parallel.
        rf: the run folder; the evidence goes to ``rf.hparams``.
        settings: the tuner's settings (a preset or a customised one).
        specs: loader specs ``{"model", "dataset", "loss"}``.
        accuracy_style: how perf is measured on the held-out slice of the training set.
        facts: what :func:`ignite_seg.validation.probe_recipe` found (``n_train``).
        seed: the run's seed; the same seed gives the same choice.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

    Raises:
        TuningError: the evidence admits no choice (the loss never improves, is NaN from the
            start, or every tuning task failed); the message says what to change.

    Example:
        >>> hp = tune(runner, rf, get_preset("fast"), specs, accuracy_style="classification",
        ...           facts={"n_train": 1437}, seed=0, device="cpu")  # doctest: +SKIP
    """
    t_start = time.perf_counter()
    n_train = int(facts["n_train"])
    rf.hparams.mkdir(parents=True, exist_ok=True)
    holdout = holdout_indices(n_train, settings, seed)
    recipe = RecipeSpec(
        model=specs["model"], dataset=specs["dataset"], loss=specs["loss"], accuracy_style=accuracy_style,
        holdout=tuple(int(i) for i in holdout), optimizer=settings.optimizer, momentum=settings.momentum,
        weight_decay=settings.weight_decay, device=device, threads=runner.task_threads,
    )
    misc = _Misc(rf, settings, seed, n_train, len(holdout))
    logger.info("tuning on %d training items (%d held out to measure perf; the validation set is not used)",
                n_train, len(holdout))

    # -- 1. LR range test at the initial batch size -------------------------------------------
    b0 = settings.initial_batch_size
    sweep = _lr_range_test(runner, recipe, settings, b0, n_train - len(holdout), seed, "lr", misc)
    write_npz(rf.hparams / "lr_vs_perf.npz", **sweep.npz)
    lr_min, lr_max = sweep.choice.lr_min, sweep.choice.lr_max

    # -- 2. noise scale, then batch-size candidates ---------------------------------------------
    noise = sweep.noise_scale
    centre = noise * settings.noise_batch_frac
    logger.info("gradient noise scale B_simple ~ %.4g (median of the repeats' running estimates before "
                "divergence); batch sizes around %.3g x %.4g = %.4g", noise, settings.noise_batch_frac, noise, centre)
    if settings.batch_pts == 0:
        batch_size = centre_batch(centre, settings.batch_start, settings.batch_end, settings.batch_step, fallback=b0)
        search = _BatchSearch.skipped(batch_size, settings.batch_rn_min_inits)
        reason = f"batch_pts=0: the grid batch size nearest {settings.noise_batch_frac} x the noise scale, no runs"
    else:
        cands = batch_candidates(centre, settings.batch_start, settings.batch_end, settings.batch_pts,
                                 settings.batch_step, fallback=b0)
        search = _batch_search(runner, recipe, settings, cands, lr_min, lr_max, seed, misc)
        batch_size = search.chosen
        reason = (f"best held-out {settings.batch_score} of {len(cands)} candidates after successive halving "
                  f"(eta={settings.batch_eta}); at each rung, ties within {settings.batch_tie_tol}"
                  + (" or not worse at 95% by a paired t-test over the repeats"
                     if settings.batch_tie_test and settings.batch_rn_min_inits > 1 else "")
                  + " rank the smaller batch first")
    logger.info("batch size %d (%s)", batch_size, reason)
    write_npz(rf.hparams / "bs_vs_perf.npz", **search.bs_vs_perf(noise, sweep))
    write_npz(rf.hparams / "bs_sampled.npz", **search.bs_sampled())
    misc.record("batch_size", {
        "noise_scale": noise, "centre": centre, "noise_batch_frac": settings.noise_batch_frac,
        "candidates": search.bss, "chosen": batch_size, "reason": reason,
        "rungs": search.rungs, "lr_scaling": "linear in the batch size",
    })

    # -- 3. optional rescan of the LR range at the chosen batch size -----------------------------
    if settings.rescan_lr_after_bs:
        # at the sweep's own batch size the rescan measures the same curve again: pool the repeats
        pooled = sweep.results if batch_size == b0 else []
        rescan = _lr_range_test(runner, recipe, settings, batch_size, n_train - len(holdout), seed, "rescan", misc,
                                pooled=pooled)
        write_npz(rf.hparams / "lr_vs_perf_initial.npz", **sweep.npz)
        write_npz(rf.hparams / "lr_vs_perf.npz", **{**rescan.npz, "rescan": np.asarray(True)})
        lr_min, lr_max = rescan.choice.lr_min, rescan.choice.lr_max
        lr_how = f"rescanned at batch size {batch_size}" + (
            f", pooled with the first sweep's {len(pooled)} repeat(s)" if pooled else "")
    else:
        lr_min, lr_max = scale_lr(lr_min, batch_size, b0), scale_lr(lr_max, batch_size, b0)
        lr_how = f"swept at batch size {b0}, scaled linearly by {batch_size}/{b0}"
    logger.info("learning rates %.4g -> %.4g (%s)", lr_min, lr_max, lr_how)

    # -- 4. schedule --------------------------------------------------------------------------
    cycle_size_epochs, epochs = choose_schedule(
        n_train, train_examples=settings.train_examples, min_epochs=settings.min_epochs,
        max_epochs=settings.max_epochs, cycles=settings.cycles,
    )
    logger.info("schedule: %d epochs, %d triangular cycle(s) of %.3g epochs", epochs, settings.cycles,
                cycle_size_epochs)
    final = FixedHyperparameters(
        lr_start=float(lr_min), lr_end=float(lr_max), batch_size=int(batch_size),
        cycle_size_epochs=float(cycle_size_epochs), epochs=int(epochs), optimizer=settings.optimizer,
        momentum=settings.momentum, weight_decay=settings.weight_decay,
    )
    misc.record("schedule", {
        "epochs": epochs, "cycle_size_epochs": cycle_size_epochs, "cycles": settings.cycles,
        "train_examples": settings.train_examples, "n_train": n_train, "lr_start": lr_min, "lr_end": lr_max,
        "lr_how": lr_how,
    })
    misc.finish(time.perf_counter() - t_start, final)
    write_json(rf.hparams / "final.json", final.to_dict())  # last: marks the tune as complete
    logger.info("tuning done in %.1f s: %s", time.perf_counter() - t_start, final)
    return final


# -- misc.json -------------------------------------------------------------------------------------
class _Misc:
    """Accumulates every decision and rewrites ``misc.json`` (atomically) after each step."""

    def __init__(self, rf: RunFolder, settings: HyperparameterSettings, seed: int, n_train: int, n_holdout: int):
        self.path = rf.hparams / "misc.json"
        self.data: dict[str, Any] = {
            "state": "running", "seed": seed, "settings": settings.to_dict(), "n_train": n_train,
            "holdout_size": n_holdout, "holdout_from": "training set", "steps": {},
            "compute": {"task_seconds": {}, "examples": {}, "wall_seconds": {}},
        }
        write_json(self.path, self.data)

    def record(self, step: str, info: Mapping[str, Any]) -> None:
        self.data["steps"][step] = dict(info)
        write_json(self.path, self.data)

    def charge(self, stage: str, seconds: float, examples: int, wall: float) -> None:
        c = self.data["compute"]
        c["task_seconds"][stage] = c["task_seconds"].get(stage, 0.0) + seconds
        c["examples"][stage] = c["examples"].get(stage, 0) + examples
        c["wall_seconds"][stage] = c["wall_seconds"].get(stage, 0.0) + wall

    def finish(self, wall: float, final: FixedHyperparameters) -> None:
        c = self.data["compute"]
        c["total_task_seconds"] = sum(c["task_seconds"].values())
        c["total_examples"] = sum(c["examples"].values())
        c["total_wall_seconds"] = wall
        self.data["final"] = final.to_dict()
        self.data["state"] = "complete"
        write_json(self.path, self.data)


def _run_tasks(
    runner: TaskRunner, fn: Callable[[Any], Any], tasks: Sequence[Any], desc: str, stage: str, misc: _Misc,
    failed: Callable[[Any, str], Any],
) -> dict[Hashable, Any]:
    """Run ``tasks`` on the runner with a progress bar; lost tasks become ``failed(task, error)``."""
    t0 = time.perf_counter()
    out: dict[Hashable, Any] = {}
    with tqdm(total=len(tasks), desc=desc, unit="run", mininterval=0.5, leave=False) as bar:
        for item in runner.map_unordered(fn, tasks, key=lambda t: t.key):
            res = failed(item.task, item.error) if isinstance(item, TaskLost) else item
            out[res.key] = res
            bar.update(1)
    misc.charge(stage, sum(r.seconds for r in out.values()), sum(r.examples for r in out.values()),
                time.perf_counter() - t0)
    return out


# -- 1. LR range test ------------------------------------------------------------------------------
@dataclass
class _Sweep:
    choice: LRRangeChoice
    npz: dict[str, np.ndarray]
    noise_scale: float
    noise_lrs: np.ndarray
    noise_values: np.ndarray
    results: list[LRSweepResult]  # the repeats that ran (failed ones left out)


def _lr_range_test(
    runner: TaskRunner, recipe: RecipeSpec, s: HyperparameterSettings, batch_size: int, n_fit: int, seed: int,
    stage: Literal["lr", "rescan"], misc: _Misc, pooled: Sequence[LRSweepResult] = (),
) -> _Sweep:
    """One LR range test; ``pooled``: repeats of an earlier sweep of the same batch size (and so the
    same LR grid) to choose the range from together with this sweep's repeats."""
    iters_per_epoch = max(1, math.ceil(n_fit / batch_size))
    iterations = max(s.lr_sweep_min_iters, int(round(s.lr_sweep_len * iters_per_epoch)))
    # each repeat from its own seeded initialisation (lr_min_inits of them), or all from one
    init_seeds = [derive_seed(seed, "lr-init") if s.lr_shared_init else derive_seed(seed, f"{stage}-init", r)
                  for r in range(s.lr_min_inits)]
    # per-batch losses are noisier at smaller batches (variance ~ 1/B): a slower EMA there
    smooth_f = s.lr_smooth_f * min(1.0, batch_size / s.initial_batch_size)
    # the noise scale comes from the first sweep; a rescan needs only its losses (plain updates)
    chunks = s.noise_chunks if stage == "lr" else 1
    tasks = [
        LRSweepTask(
            key=(stage, r), recipe=recipe, init_seed=init_seeds[r], data_seed=derive_seed(seed, stage, "data", r),
            batch_size=batch_size, lr_start=s.lr_start, lr_end=s.lr_end, iterations=iterations,
            diverge_th=s.diverge_th, diverge_regain=s.diverge_regain, smooth_f=smooth_f, noise_chunks=chunks, device_index=r,
        )
        for r in range(s.lr_min_inits)
    ]
    logger.info("LR range test%s: %d repeat(s), lr %.3g -> %.3g over %d iterations at batch size %d",
                " (rescan)" if stage == "rescan" else "", len(tasks), s.lr_start, s.lr_end, iterations, batch_size)
    results = _run_tasks(
        runner, run_lr_sweep, tasks, "tune: LR rescan" if stage == "rescan" else "tune: LR range test", stage, misc,
        lambda task, err: LRSweepResult(task.key, "failed", error=err),
    )
    ordered = [results[t.key] for t in tasks]
    ok = list(pooled) + [r for r in ordered if r.status != "failed"]
    for r in ordered:
        if r.status == "failed":
            logger.warning("LR sweep repeat %s failed: %s", r.key, _last_line(r.error))
    if not ok:
        raise TuningError(
            f"every LR sweep repeat failed; the first error was:\n{ordered[0].error}\nFix the model, dataset or "
            "loss loader (they ran in a worker process)."
        )
    lrs = geometric_lrs(s.lr_start, s.lr_end, iterations)
    stacked = {k: _stack([r.arrays[k] for r in ok], iterations) for k in ok[0].arrays}
    window = max(1, int(round(s.lr_smooth_frac * iterations))) | 1
    # on the held-out loss (no batch-to-batch noise) or the training loss; each repeat is cut where
    # its training loss diverged either way
    held_out = s.lr_choose_on == "holdout"
    choice = choose_lr_range(lrs, stacked["losses"], window=window, diverge_th=s.diverge_th,
                             regain=s.diverge_regain, steep_frac=s.lr_steep_frac,
                             window_decades=s.lr_window_decades, min_span_decades=s.lr_min_span_decades,
                             curves=stacked["holdout_losses"] if held_out else None,
                             valley_curves=None if held_out else stacked["holdout_losses"])
    # evidence: per-repeat curves, smoothed, derivatives of the mean against log10 LR
    perfs_smoothed = smooth_curves(stacked["perfs"], window)
    mean_perf = mean_curve(perfs_smoothed)
    mean_perf[choice.n_valid:] = np.nan
    perf_deriv = log_lr_derivative(mean_perf, lrs, max(window, 3))
    stopped = np.array([
        float(r.arrays["lrs"][-1]) if r.status == "diverged" and r.arrays["lrs"].size else np.nan for r in ok
    ])
    # noise scale: each repeat's running estimate along the sweep, one median over all of them
    b_small = float(batch_size) / s.noise_chunks
    if chunks > 1 and batch_size >= 2 * chunks:
        running, value = pooled_noise_scale(stacked["sq_small"], stacked["sq_big"], b_small, float(batch_size),
                                            s.noise_ema_beta, np.arange(iterations) < choice.n_valid)
    else:
        running, value = np.full(iterations, np.nan), float("nan")
    keep = np.isfinite(running)
    npz = {
        "lrs": lrs, "losses": stacked["losses"], "perfs": stacked["perfs"],
        "losses_smoothed": smooth_curves(stacked["losses"], window), "perfs_smoothed": perfs_smoothed,
        "loss_deriv": choice.deriv, "perf_deriv": perf_deriv,
        "lr_range": np.array([choice.lr_min, choice.lr_max]), "diverged_lr": stopped,
        "holdout_losses": stacked["holdout_losses"],
        "holdout_losses_smoothed": choice.smoothed if held_out else smooth_curves(stacked["holdout_losses"], window),
        "choice_curve": np.asarray("holdout_losses" if held_out else "losses"), "batch_size": np.asarray(batch_size),
        "rescan": np.asarray(stage == "rescan"),
    }
    info = {
        "batch_size": batch_size, "iterations": iterations, "repeats": len(tasks),
        "repeats_ok": len(ok) - len(pooled), "pooled_repeats": len(pooled),
        "init_seeds": init_seeds, "shared_init": s.lr_shared_init,
        "chosen_on": "held-out loss (train-set slice)" if held_out else "training loss",
        "valley_located_on": "held-out loss (train-set slice)" if held_out or choice.valley_on_other_curves
        else "training loss (the held-out loss was not finite)",
        "smooth_window": window, "stop_ema_weight": smooth_f, "lr_min": choice.lr_min, "lr_max": choice.lr_max,
        "steepest_lr": choice.steepest_lr, "steepest_slope_per_decade": choice.steepest_slope,
        "relative_improvement": choice.improvement, "stopped_lr": stopped, "cut_lr": choice.diverged_lr,
        "task_seconds": [r.seconds for r in ordered], "prepare_seconds": [r.prepare_seconds for r in ordered],
        "points_used": choice.n_valid, "range_hits_sweep_end": choice.hit_end,
        "anchored_at_loss_minimum": choice.anchored_at_minimum,
        "rule": f"slope against log10 lr within {s.lr_steep_frac} of the steepest, largest loss drop, "
                f"within {s.lr_window_decades} decades below the last usable lr and not past the valley floor",
        "noise_scale": value,
        "noise_scale_rule": "median over every repeat's running EMA estimate before divergence" if chunks > 1
        else "not measured here (plain updates); the first sweep's estimate is the one used",
        "noise_b_small": b_small, "noise_b_big": batch_size,
    }
    misc.record("lr_range" if stage == "lr" else "lr_rescan", info)
    n_div = int(np.isfinite(stopped).sum())
    logger.info("LR range [%.4g, %.4g] (steepest at %.4g; %d of %d repeat(s) diverged%s)",
                choice.lr_min, choice.lr_max, choice.steepest_lr, n_div, len(ok),
                f", first at lr {np.nanmin(stopped):.3g}" if n_div else ", none: consider a larger lr_end")
    return _Sweep(choice, npz, value, lrs[keep], running[keep], ok)


def _stack(rows: Iterable[np.ndarray], n: int) -> np.ndarray:
    """Rows of different lengths as one (R, n) array, NaN-padded after each row's end."""
    rows = list(rows)
    out = np.full((len(rows), n), np.nan)
    for i, row in enumerate(rows):
        out[i, : min(n, row.size)] = row[:n]
    return out


def _nanmean0(a: np.ndarray) -> np.ndarray:
    finite = np.isfinite(a)
    count = finite.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, np.where(finite, a, 0.0).sum(axis=0) / np.maximum(count, 1), np.nan)


def _last_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[-1] if (text or "").strip() else "unknown error"


# -- 2. batch-size search ---------------------------------------------------------------------------
@dataclass
class _BatchSearch:
    bss: list[int]
    chosen: int
    rung_budgets: list[float]
    rung_perfs: list[np.ndarray]  # each (R, C), NaN where not run
    rung_losses: list[np.ndarray]
    rungs: list[dict[str, Any]]
    repeats: int

    @classmethod
    def skipped(cls, chosen: int, repeats: int) -> _BatchSearch:
        return cls([], chosen, [], [], [], [], repeats)

    def bs_vs_perf(self, noise: float, sweep: _Sweep) -> dict[str, np.ndarray]:
        c = len(self.bss)
        perfs = self.rung_perfs[0] if self.rung_perfs else np.zeros((0, 0))
        mean = _nanmean0(perfs) if c else np.zeros(0)
        return {
            "bss": np.asarray(self.bss, dtype=np.int64),
            "perfs": perfs,
            "perfs_smoothed": moving_average(mean, 3) if c else np.zeros(0),
            "bs_range": np.array([min(self.bss), max(self.bss)] if c else [self.chosen, self.chosen], dtype=np.int64),
            "noise_scale": np.asarray(noise, dtype=np.float64),
            "noise_scale_lrs": sweep.noise_lrs,
            "noise_scale_values": sweep.noise_values,
            "batch_size": np.asarray(self.chosen),
        }

    def bs_sampled(self) -> dict[str, np.ndarray]:
        c = len(self.bss)
        if not c:
            empty = np.zeros((0, 0))
            return {"bss": np.zeros(0, dtype=np.int64), "scores": empty, "losses": empty, "budget_epochs": np.zeros(0),
                    "chosen": np.asarray(self.chosen), "rung_scores": np.zeros((0, 0, 0)),
                    "rung_losses": np.zeros((0, 0, 0)), "rung_budgets": np.zeros(0)}
        budgets = np.zeros(c)
        for budget, perfs in zip(self.rung_budgets, self.rung_perfs):
            budgets[np.isfinite(perfs).any(axis=0)] = budget
        return {
            "bss": np.asarray(self.bss, dtype=np.int64),
            "scores": self.rung_perfs[-1],
            "losses": self.rung_losses[-1],
            "budget_epochs": budgets,
            "chosen": np.asarray(self.chosen),
            "rung_scores": np.stack(self.rung_perfs),
            "rung_losses": np.stack(self.rung_losses),
            "rung_budgets": np.asarray(self.rung_budgets),
        }


def _batch_search(
    runner: TaskRunner, recipe: RecipeSpec, s: HyperparameterSettings, cands: list[int], lr_min: float,
    lr_max: float, seed: int, misc: _Misc,
) -> _BatchSearch:
    """Successive halving over ``cands``: score all, keep the best 1/eta with eta times the budget."""
    repeats = s.batch_rn_min_inits
    search = _BatchSearch(list(cands), cands[0], [], [], [], [], repeats)
    if len(cands) == 1:
        search.rungs.append({"note": "a single candidate: no runs needed"})
        return search
    alive = np.arange(len(cands))
    budget = float(s.batch_sweep_len)
    logger.info("batch-size candidates %s (LR scaled linearly from batch size %d)", cands, s.initial_batch_size)
    while True:
        tasks = [
            BatchRunTask(
                key=(len(search.rungs), int(c), r), recipe=recipe, seed=derive_seed(seed, "bs", r),
                batch_size=cands[c], lr_min=scale_lr(lr_min, cands[c], s.initial_batch_size),
                lr_max=scale_lr(lr_max, cands[c], s.initial_batch_size), epochs=budget, device_index=int(c),
            )
            for c in alive for r in range(repeats)
        ]
        results = _run_tasks(
            runner, run_batch_trial, tasks, f"tune: batch sizes ({budget:g} epochs)", "batch", misc,
            lambda task, err: BatchRunResult(task.key, "failed", error=err),
        )
        perfs = np.full((repeats, len(cands)), np.nan)
        losses = np.full((repeats, len(cands)), np.nan)
        for (_, c, r), res in results.items():
            if res.status == "failed":
                logger.warning("batch-size run (batch %d, repeat %d) failed: %s", cands[c], r, _last_line(res.error))
                continue
            perfs[r, c], losses[r, c] = res.perf, res.loss
        if not np.isfinite(perfs[:, alive]).any():
            first = next(iter(results.values()))
            raise TuningError(
                f"every batch-size candidate run failed; the first error was:\n{first.error}\nFix the loaders, "
                "or skip the candidate runs with batch_pts=0."
            )
        # candidates tied with the best (within batch_tie_tol, or not worse by the paired test over the
        # repeats) rank first, the smallest batch first
        ranked = [int(i) for i in rank_with_ties(cands, perfs, losses, s.batch_score, s.batch_tie_tol,
                                                 paired_test=s.batch_tie_test)
                  if i in set(alive.tolist())]
        by_score = [int(i) for i in rank_scores(perfs, losses, s.batch_score) if i in set(alive.tolist())]
        search.rung_budgets.append(budget)
        search.rung_perfs.append(perfs)
        search.rung_losses.append(losses)
        survivors = halving_survivors(np.asarray(ranked), len(alive), s.batch_eta)
        search.rungs.append({
            "budget_epochs": budget, "batch_sizes": [cands[i] for i in alive],
            "mean_perf": {str(cands[i]): float(np.nanmean(perfs[:, i])) for i in alive},
            "mean_loss": {str(cands[i]): float(np.nanmean(losses[:, i])) for i in alive}, "ranked_by": s.batch_score,
            "kept": [cands[i] for i in survivors],
            "best_by_score": cands[by_score[0]],
        })
        logger.info("batch sizes after %g epoch(s) (held-out perf / loss): %s; keeping %s", budget,
                    ", ".join(f"{cands[i]}: {np.nanmean(perfs[:, i]):.4f} / {np.nanmean(losses[:, i]):.4g}"
                              for i in ranked),
                    [cands[i] for i in survivors])
        if ranked[0] != by_score[0]:
            search.rungs[-1]["tie"] = (
                f"batch {cands[ranked[0]]} is within batch_tie_tol={s.batch_tie_tol} of the best scored "
                f"{cands[by_score[0]]} ({s.batch_score})" + (" or not worse at 95% by a paired t-test over the "
                "repeats" if s.batch_tie_test and repeats > 1 else "") + "; ties rank the smaller batch size first")
        misc.record("batch_size", {"candidates": cands, "rungs": search.rungs, "state": "running"})
        if len(survivors) == 1:
            search.chosen = cands[int(survivors[0])]
            return search
        alive = np.sort(survivors)
        budget *= s.batch_eta

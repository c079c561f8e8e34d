"""The tuner: LR range test, batch-size search, optional rescan, schedule; the evidence kept.

:func:`choose_recipe` reads like the process it runs::

    LR range test -> noise scale -> batch-size candidates (successive halving)
                  -> rescan of the LR range at the chosen batch size (optional) -> schedule
                  -> recipe check (short runs; back off the LRs until one improves: tuning/guard.py)
                  -> length check (full-length runs; cut the epochs where the held-out perf falls: tuning/length.py)

Every parallel piece (sweep repeats, candidate runs) is a task of :mod:`ignite_seg.engine.sweeps` run on
the caller's :class:`~ignite_seg.runtime.tasks.TaskRunner`; the maths lives in the pure modules
:mod:`~ignite_seg.tuning.lr_range`, :mod:`~ignite_seg.tuning.noise_scale`, :mod:`~ignite_seg.tuning.batch_search` and
:mod:`~ignite_seg.tuning.schedule`. Only this process writes files, each atomically as its step ends,
``hparams/final.json`` last. Each finished task is kept in ``hparams/tasks/``
(:mod:`~ignite_seg.tuning.task_store`): a tune killed half way resumes from its finished tasks. What each file in
``hparams/`` holds is its record in :mod:`ignite_seg.storage.schemas`.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Literal, Mapping, NamedTuple

import numpy as np

from ..config.hyperparameters import FixedHyperparameters, HyperparameterSettings, RecipeOptions
from ..config.specs import LoaderSpec
from ..engine.schedule_text import describe_schedule
from ..engine.scoring import AccuracyStyle
from ..engine.sweeps import LRSweepResult, LRSweepTask, RecipeSpec, run_lr_sweep
from ..exceptions import TuningError
from ..runtime.tasks import TaskRunner
from ..storage.contained import mkdir_inside
from ..storage.run_folder import RunFolder
from ..storage.schemas import (
    BS_NPZ,
    LR_INITIAL_NPZ,
    LR_NPZ,
    MISC_JSON,
    SAMPLED_NPZ,
    BatchSampledFile,
    BatchSizeStep,
    BatchSweepFile,
    LRSweepFile,
    MiscLog,
    ScheduleStep,
)
from .batch_runs import BatchSearch, batch_search
from .batch_search import LR_SCALING, batch_candidates, centre_batch, scale_lr
from .budget import batch_budget_epochs, fill_sampled, sweep_plan
from .context import TuneRun, derive_seed, last_line, run_tasks
from .guard import guard_recipe
from .length import check_length
from .lr_plateau import moved_to_plateau
from .lr_range import (
    LossDidNotImprove,
    LRRangeChoice,
    RangeRule,
    choose_lr_range,
    geometric_lrs,
)
from .noise_scale import pooled_noise_scale
from .range_evidence import Curves, Noise, range_step, stack, sweep_file
from .reasons import batch_decision, noise_measured
from .schedule import choose_schedule, schedule_lrs
from .task_store import TASKS_DIR, TaskStore

__all__ = ["choose_recipe", "holdout_indices", "derive_seed", "RESCAN_AGREE"]

logger = logging.getLogger(__name__)

#: A rescan whose range's top lies more than this factor below the first sweep's top scaled to its batch size
#: (``scale_lr``: at most 2x per batch step) is not used: its repeats stopped where the first sweep's still
#: trained, and a sweep that stops early (its noisier batch losses read as divergence) can only come out low.
#: On 58 tunes of session 14 (13 bench pairs x 5 seeds and the unseen tasks) the ratio was 0.49-3.05 but for
#: three at 0.09-0.11: shapes (a BatchNorm CNN on augmented images) rescanned at batch 8 (val 0.950 / 0.959
#: against 0.977-0.986 on the seeds whose range was not cut) and wine AdamW at batch 32. A range too high for
#: the trials is the recipe check's to catch (it backs the rates off); one too low nothing else would see.
RESCAN_AGREE = 10.0
#: A first sweep cut short by ``lr_sweep_max_examples`` whose loss fell less than this fraction of its start barely
#: learned: its slope carries too little to read a range on (five times the 2% the range rule needs at all). It runs
#: once more over ``lr_sweep_len`` epochs, at most :data:`WEAK_SWEEP_LONGER` times the cap. Session 21: the
#: bag-of-words EmbeddingBag task under plain SGD fell 2.2-4.4% in its 500 capped steps and its ranges topped out
#: at 0.57-0.79 (val 0.838-0.946, the grid's best 0.953 at peaks 1-3); over its full 6 epochs (1014 steps) it fell
#: 4.4-8.2%, the ranges topped out at 0.99-1.8 and the trials reached 0.938-0.952.
WEAK_SWEEP = 0.10
#: The longer sweep after a weak one sees at most this many times ``lr_sweep_max_examples`` examples: what a tune
#: costs still does not grow with the dataset.
WEAK_SWEEP_LONGER = 4


def holdout_indices(n_train: int, settings: HyperparameterSettings, seed: int) -> np.ndarray:
    """The fixed slice of the training set on which the tuner measures perf (sorted indices)."""
    m = int(round(settings.holdout_frac * n_train))
    m = max(1, min(m, settings.holdout_max, n_train - 2))
    rng = np.random.default_rng(derive_seed(seed, "holdout"))
    return np.sort(rng.choice(n_train, size=m, replace=False))


def choose_recipe(
    runner: TaskRunner,
    rf: RunFolder,
    settings: HyperparameterSettings,
    specs: Mapping[str, LoaderSpec],
    *,
    accuracy_style: AccuracyStyle,
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
        facts: what :func:`ignite_seg.engine.probe.probe_recipe` found (``n_train``).
        seed: the run's seed; the same seed gives the same choice.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

    Raises:
        TuningError: the evidence admits no choice (the loss never improves, is NaN from the
            start, or every tuning task failed); the message says what to change.

    Example:
        >>> hp = choose_recipe(runner, rf, get_preset("fast"), specs, accuracy_style="classification",
        ...           facts={"n_train": 1437}, seed=0, device="cpu")  # doctest: +SKIP
    """
    t_start = time.perf_counter()
    t = _start(runner, rf, settings, specs, accuracy_style, int(facts["n_train"]), seed, device)
    sweep = _first_sweep(t)  # 1. at the initial batch size
    sweep.file.write(t.hparams / LR_NPZ)
    batch_size = _choose_batch_size(t, sweep)  # 2. noise scale, then batch-size candidates
    used = _final_lr_range(t, sweep, batch_size)  # 3. optional rescan at that batch size
    final = _schedule(t, used, batch_size)  # 4. schedule
    final = guard_recipe(t, final)  # 5. a short run must improve on its start, else back off
    final = check_length(t, final)  # 6. no longer than the held-out perf keeps up
    t.misc.finish(time.perf_counter() - t_start, final.to_dict())
    rf.write_final(final)  # last: marks the tune as complete
    logger.info("tuning done in %.1f s: %s", time.perf_counter() - t_start, final)
    return final


def _start(
    runner: TaskRunner, rf: RunFolder, settings: HyperparameterSettings, specs: Mapping[str, LoaderSpec],
    accuracy_style: AccuracyStyle, n_train: int, seed: int, device: str,
) -> TuneRun:
    """The held-out slice, the recipe every task shares, and ``misc.json`` started."""
    mkdir_inside(rf.hparams)
    holdout = holdout_indices(n_train, settings, seed)
    recipe = RecipeSpec(
        model=specs["model"], dataset=specs["dataset"], loss=specs["loss"], accuracy_style=accuracy_style,
        holdout=tuple(int(i) for i in holdout), options=settings.options, device=device,
        threads=runner.task_threads,
    )
    misc = MiscLog(rf.hparams / MISC_JSON, settings.to_dict(), seed, n_train, len(holdout))
    logger.info("tuning on %d training items (%d held out to measure perf; the validation set is not used)",
                n_train, len(holdout))
    return TuneRun(runner, settings, recipe, seed, n_train, n_train - len(holdout), misc, rf.hparams,
                   store=TaskStore(rf.hparams / TASKS_DIR))


def _choose_batch_size(t: TuneRun, sweep: _Sweep) -> int:
    """Candidates around a fraction of the noise scale, scored by successive halving (or the rule alone)."""
    s, noise = t.s, sweep.noise_scale
    centre = noise * s.noise_batch_frac
    if noise_measured(noise):
        logger.info("gradient noise scale B_simple ~ %.4g (median of the repeats' running estimates before "
                    "divergence); batch sizes around %.3g x %.4g = %.4g", noise, s.noise_batch_frac, noise, centre)
    else:
        logger.info("the gradient noise scale could not be measured (%s); batch sizes around initial_batch_size=%d "
                    "instead", noise, s.initial_batch_size)
    if s.batch_pts == 0:
        batch_size = centre_batch(centre, s.batch_start, s.batch_end, s.batch_step, fallback=s.initial_batch_size)
        search = BatchSearch([], batch_size)
    else:
        cands = batch_candidates(centre, s.batch_start, s.batch_end, s.batch_pts, s.batch_step,
                                 fallback=s.initial_batch_size)
        # batch_sweep_len epochs, at most batch_sweep_max_examples examples per candidate
        search = batch_search(t, cands, sweep.choice.lr_min, sweep.choice.lr_max, batch_budget_epochs(s, t.n_fit))
        batch_size = search.chosen
    decision = batch_decision(s, noise, batch_size, search.rungs)
    logger.info("batch size %d — %s", batch_size, decision.reason)
    BatchSweepFile.of_rungs(search.bss, batch_size, search.rung_perfs, noise, sweep.noise_lrs,
                            sweep.noise_values).write(t.hparams / BS_NPZ)
    BatchSampledFile.of_rungs(search.bss, batch_size, search.rung_budgets, search.rung_perfs,
                              search.rung_losses).write(t.hparams / SAMPLED_NPZ)
    t.misc.record(batch_size=BatchSizeStep(
        noise_scale=noise, centre=centre, noise_batch_frac=s.noise_batch_frac, candidates=search.bss,
        chosen=batch_size, reason=decision.reason, rungs=search.rungs, lr_scaling=LR_SCALING, rule=decision.rule,
        fallback=decision.fallback,
    ))
    return batch_size


class _FinalRange(NamedTuple):
    """The LR range the schedule maps from, at the chosen batch size: its bounds, how it was obtained, the LR where
    the sweep it came from first diverged (None: no repeat diverged), and whether it ends at a trivial floor's quiet
    top (:mod:`.lr_plateau`)."""

    lr_min: float
    lr_max: float
    how: str
    diverged: float | None
    quiet_top: bool = False


def _final_lr_range(t: TuneRun, sweep: _Sweep, batch_size: int) -> _FinalRange:
    """The range rescanned at ``batch_size`` (``rescan_lr_after_bs``), or the first one scaled to it."""
    b0 = t.s.initial_batch_size
    scaled = (f"swept at batch size {b0}, the chosen one" if batch_size == b0
              else f"swept at batch size {b0}, scaled to {batch_size} ({LR_SCALING})")
    # at the sweep's own batch size the first sweep measured that curve already: no rescan (pooling a
    # rescan's repeats with it changed no 5-seed regret of the tuning bench by more than 0.0007,
    # bench/RESULTS.md session 11, and cost as much as the first sweep)
    if t.s.rescan_lr_after_bs and batch_size != b0:
        try:
            rescan = _lr_range_test(t, batch_size, "rescan", t.s.lr_sweep_max_examples)
        except TuningError as exc:
            # the first sweep found a range and the batch runs trained with it: a rescan that cannot
            # choose (e.g. a sweep too short for a slow learner to show its drop) refines nothing, so
            # the first range stands, scaled; the recipe check that follows still tests it
            reason = str(exc).split(". ")[0]  # what failed, without the advice for a failed first sweep
            scaled = f"the rescan at batch size {batch_size} could not choose a range ({reason}); {scaled}"
            logger.warning("LR rescan: %s", scaled)
        else:
            expected = scale_lr(sweep.choice.lr_max, batch_size, b0)
            if rescan.choice.lr_max * RESCAN_AGREE >= expected:
                sweep.file.write(t.hparams / LR_INITIAL_NPZ)
                rescan.file.write(t.hparams / LR_NPZ)
                lr_how = f"rescanned at batch size {batch_size}"
                logger.info("learning rates %.4g -> %.4g (%s)", rescan.choice.lr_min, rescan.choice.lr_max, lr_how)
                return _FinalRange(rescan.choice.lr_min, rescan.choice.lr_max, lr_how, _first_divergence(rescan.choice),
                                   rescan.choice.plateau_top == "quiet")
            why = (f"the rescan at batch size {batch_size} put the range's top at {rescan.choice.lr_max:.3g}, more "
                   f"than {RESCAN_AGREE:g}x below the first sweep's top scaled to that batch size ({expected:.3g}): its "
                   "repeats stopped where the first sweep's still trained (noisier losses read as divergence), so the "
                   "rescan was not used")
            recorded = t.misc.misc.steps.lr_rescan  # the rescan's evidence stays in misc.json, marked
            if recorded is not None:
                t.misc.record(lr_rescan=dataclasses.replace(recorded, not_used=why))
            scaled = f"{why}; {scaled}"
            logger.warning("LR rescan: %s", scaled)
    lr_min, lr_max = scale_lr(sweep.choice.lr_min, batch_size, b0), scale_lr(sweep.choice.lr_max, batch_size, b0)
    logger.info("learning rates %.4g -> %.4g (%s)", lr_min, lr_max, scaled)
    diverged = _first_divergence(sweep.choice)
    return _FinalRange(lr_min, lr_max, scaled, None if diverged is None else scale_lr(diverged, batch_size, b0),
                       sweep.choice.plateau_top == "quiet")


def _first_divergence(choice: LRRangeChoice) -> float | None:
    """The lowest LR at which a repeat of the sweep diverged (None: none did)."""
    cut = choice.diverged_lr[np.isfinite(choice.diverged_lr)]
    return float(cut.min()) if cut.size else None


def _schedule(t: TuneRun, used: _FinalRange, batch_size: int) -> FixedHyperparameters:
    """The final recipe: the LR range, the batch size, the epochs and the schedule (cycles for the triangular one)."""
    s, (lr_min, lr_max, lr_how, diverged, quiet_top) = t.s, used
    cycle_size_epochs, epochs = choose_schedule(t.n_train, train_examples=s.train_examples,
                                                min_epochs=s.min_epochs, max_epochs=s.max_epochs, cycles=s.cycles)
    # a peak-first schedule's peak: see there
    lrs = schedule_lrs(s.schedule, lr_min, lr_max, diverged, s.optimizer, quiet_top=quiet_top)
    final = FixedHyperparameters(
        lr_start=float(lrs.lr_start), lr_end=float(lrs.lr_end), batch_size=int(batch_size),
        cycle_size_epochs=float(cycle_size_epochs), epochs=int(epochs),
        **RecipeOptions.values(s),  # the settings' optimizer, update options, schedule shape and EMA
    )
    description = describe_schedule(final)
    logger.info("schedule: %s", description)
    t.misc.record(schedule=ScheduleStep(
        epochs=epochs, cycle_size_epochs=cycle_size_epochs, cycles=s.cycles, train_examples=s.train_examples,
        n_train=t.n_train, lr_start=lrs.lr_start, lr_end=lrs.lr_end, lr_how=lr_how, range_min=lr_min,
        range_max=lr_max, schedule=s.schedule, warmup_epochs=s.warmup_epochs, description=description,
        mapping=lrs.mapping, diverged_lr=diverged, peak_lifted=lrs.lifted, peak_at=lrs.peak_at,
    ))
    return final


# -- 1. LR range test ------------------------------------------------------------------------------
def _first_sweep(t: TuneRun) -> _Sweep:
    """The LR range test at the initial batch size. A sweep cut short by ``lr_sweep_max_examples`` whose
    loss did not improve enough to choose on is run once more at its full ``lr_sweep_len`` epochs: a
    model that needs many steps before its loss moves (ignite-simple's fashion_mnist CNN) shows no drop
    in a short sweep, and a longer one is what the error would tell the user to try."""
    try:
        return _sweep_or_longer(t, t.s.initial_batch_size)
    except LossDidNotImprove as exc:
        if t.s.optimizer != "sgd":
            raise
        adamw = "hyperparameters=dataclasses.replace(ignite_seg.get_preset('fast'), optimizer='adamw', weight_decay=0.01)"
        if t.s.momentum > 0:
            raise LossDidNotImprove(
                f"{exc} With SGD, even with momentum={t.s.momentum:g}, a deep network may not move at any learning "
                "rate (an 8-layer ReLU MLP: its loss fell 0.06% over a whole sweep with momentum 0.9, bench/RESULTS.md, "
                f"session 22): try an adaptive optimizer, e.g. {adamw}."
            ) from exc
        raise LossDidNotImprove(
            f"{exc} With plain SGD (no momentum), a deep network may not move at any learning rate (an 8-layer ReLU "
            "MLP trained at chance at every peak from 0.03 to 1, bench/RESULTS.md, session 19): try an adaptive "
            f"optimizer or momentum, e.g. {adamw} or momentum=0.9."
        ) from exc


def _sweep_or_longer(t: TuneRun, b0: int) -> _Sweep:
    """The first sweep at batch size ``b0``; once more at its full ``lr_sweep_len`` epochs when it was capped and
    could not choose, or (at most :data:`WEAK_SWEEP_LONGER` times the cap) when it was capped and its loss fell less
    than :data:`WEAK_SWEEP`."""
    cap = t.s.lr_sweep_max_examples
    plan = sweep_plan(t.s, t.n_fit, b0)
    try:
        sweep = _lr_range_test(t, b0, "lr", cap)
    except LossDidNotImprove as exc:
        if not plan.capped:
            raise
        full = sweep_plan(dataclasses.replace(t.s, lr_sweep_max_examples=None), t.n_fit, b0)
        why = (f"the sweep of {plan.iterations} iterations (capped by lr_sweep_max_examples={cap}) could not choose "
               f"a range ({str(exc).split('. ')[0]}); this one ran the full lr_sweep_len={t.s.lr_sweep_len:g} epochs "
               f"({full.iterations} iterations)")
        logger.warning("LR range test: %s", why)
        return _lr_range_test(t, b0, "lr", None, longer_after=why)
    if not plan.capped or cap is None or sweep.choice.improvement >= WEAK_SWEEP:
        return sweep
    longer_cap = WEAK_SWEEP_LONGER * cap
    longer = sweep_plan(dataclasses.replace(t.s, lr_sweep_max_examples=longer_cap), t.n_fit, b0)
    span = (f"{WEAK_SWEEP_LONGER}x lr_sweep_max_examples" if longer.capped
            else f"the full lr_sweep_len={t.s.lr_sweep_len:g} epochs")
    why = (f"the sweep of {plan.iterations} iterations (capped by lr_sweep_max_examples={cap}) improved its loss "
           f"only {sweep.choice.improvement:.1%} (under {WEAK_SWEEP:.0%}: too little learning to read a range on); "
           f"this one ran {span} ({longer.iterations} iterations)")
    logger.info("LR range test: %s", why)
    return _lr_range_test(t, b0, "lr", longer_cap, longer_after=why)


class _SweepKey(NamedTuple):
    """Which repeat of which range test a sweep task is."""

    stage: str
    repeat: int


@dataclass
class _Sweep:
    choice: LRRangeChoice
    file: LRSweepFile
    noise_scale: float
    noise_lrs: np.ndarray
    noise_values: np.ndarray


def _lr_range_test(
    t: TuneRun, batch_size: int, stage: Literal["lr", "rescan"], max_examples: int | None,
    longer_after: str | None = None,
) -> _Sweep:
    """One LR range test of ``lr_sweep_len`` epochs, at most ``max_examples`` examples (None: no cap);
    ``longer_after``: why this sweep runs longer than ``lr_sweep_max_examples`` allows, recorded."""
    s = t.s
    curves = _sweep(t, batch_size, stage, max_examples)
    # on the held-out loss (no batch-to-batch noise) or the training loss; each repeat is cut where
    # its training loss diverged either way
    held_out = s.lr_choose_on == "holdout"
    rule = RangeRule.from_settings(s, curves.window)
    holdout_losses = curves.stacked["holdout_losses"]
    choice = choose_lr_range(curves.lrs, curves.stacked["losses"], rule, curves=holdout_losses if held_out else None,
                             valley_curves=None if held_out else holdout_losses, perf_curves=curves.stacked["perfs"],
                             constant_loss=curves.constant_loss)
    stopped = np.array([
        float(r.arrays["lrs"][-1]) if r.status == "diverged" and r.arrays["lrs"].size else np.nan for r in curves.ok
    ])
    noise = _noise(s, curves, choice.n_valid)
    step = dataclasses.replace(range_step(s, curves, choice, stopped, noise), longer_after=longer_after)
    t.misc.record(**{"lr_range" if stage == "lr" else "lr_rescan": step})
    n_div = int(np.isfinite(stopped).sum())
    logger.info("LR range [%.4g, %.4g] (steepest at %.4g; %d of %d repeat(s) diverged%s)%s",
                choice.lr_min, choice.lr_max, choice.steepest_lr, n_div, len(curves.ok),
                f", first at lr {np.nanmin(stopped):.3g}" if n_div else ", none: consider a larger lr_end",
                moved_to_plateau(choice.plateau_lrs, choice.plateau_perfs, choice.plateau_constant_loss,
                                 choice.plateau_quiet_lr if choice.plateau_top == "quiet" else None))
    keep = np.isfinite(noise.running)
    return _Sweep(choice, sweep_file(curves, choice, stopped, held_out), noise.value, curves.lrs[keep],
                  noise.running[keep])


def _sweep(t: TuneRun, batch_size: int, stage: Literal["lr", "rescan"], max_examples: int | None) -> Curves:
    """Run the sweep's repeats in parallel; their curves stacked; ``lr_sweep_len`` epochs, at most
    ``max_examples`` examples (None: no cap)."""
    s = t.s
    plan = sweep_plan(dataclasses.replace(s, lr_sweep_max_examples=max_examples), t.n_fit, batch_size)
    iterations = plan.iterations
    # each repeat from its own seeded initialisation (lr_min_inits of them), or all from one
    init_seeds = [derive_seed(t.seed, "lr-init") if s.lr_shared_init else derive_seed(t.seed, f"{stage}-init", r)
                  for r in range(s.lr_min_inits)]
    # per-batch losses are noisier at smaller batches (variance ~ 1/B): a slower EMA there
    smooth_f = s.lr_smooth_f * min(1.0, batch_size / s.initial_batch_size)
    tasks = [
        LRSweepTask(
            key=_SweepKey(stage, r), recipe=t.recipe, init_seed=init_seeds[r],
            data_seed=derive_seed(t.seed, stage, "data", r), batch_size=batch_size, lr_start=s.lr_start,
            lr_end=s.lr_end, iterations=iterations, diverge_th=s.diverge_th, diverge_regain=s.diverge_regain,
            smooth_f=smooth_f, noise_chunks=s.noise_chunks if stage == "lr" else 1, device_index=r,
            holdout_every=plan.holdout_every, noise_every=s.noise_every,
        )  # the noise scale comes from the first sweep; a rescan needs only its losses (plain updates)
        for r in range(s.lr_min_inits)
    ]
    logger.info("LR range test%s: %d repeat(s), lr %.3g -> %.3g over %d iterations at batch size %d%s, the held-out "
                "slice measured %d times per repeat (every %d steps)", " (rescan)" if stage == "rescan" else "",
                len(tasks), s.lr_start, s.lr_end, iterations, batch_size,
                f" (capped at {max_examples} examples; {s.lr_sweep_len:g} epochs would be more)"
                if plan.capped else "", plan.holdout_evals, plan.holdout_every)
    results = run_tasks(t, run_lr_sweep, tasks, "tune: LR rescan" if stage == "rescan" else "tune: LR range test",
                         stage, lambda task, err: LRSweepResult(task.key, "failed", error=err))
    ordered = [results[task.key] for task in tasks]
    for r in ordered:
        if r.status == "failed":
            logger.warning("LR sweep repeat %s failed: %s", r.key, last_line(r.error))
    ok = [r for r in ordered if r.status != "failed"]
    if not ok:
        raise TuningError(
            f"every LR sweep repeat failed; the first error was:\n{ordered[0].error}\nFix the model, dataset or "
            "loss loader (they ran in a worker process)."
        )
    stacked = {k: stack([r.arrays[k] for r in ok], iterations) for k in ok[0].arrays}
    if "holdout_measured" in stacked:  # the held-out curve was sampled: interpolate in log LR between samples
        for k in ("holdout_losses", "perfs"):
            stacked[k] = fill_sampled(stacked[k], stacked["holdout_measured"])
    window = max(1, int(round(s.lr_smooth_frac * iterations))) | 1
    return Curves(stage, tasks, ordered, ok, geometric_lrs(s.lr_start, s.lr_end, iterations), stacked,
                   window, plan.capped)


def _noise(s: HyperparameterSettings, curves: Curves, n_valid: int) -> Noise:
    """The noise scale: each repeat's running estimate along the sweep, one median over all of them."""
    b, chunks = curves.batch_size, curves.tasks[0].noise_chunks
    b_small = float(b) / s.noise_chunks
    iterations = curves.lrs.size
    if chunks > 1 and b >= 2 * chunks:
        running, value = pooled_noise_scale(curves.stacked["sq_small"], curves.stacked["sq_big"], b_small, float(b),
                                            s.noise_ema_beta, np.arange(iterations) < n_valid)
    else:
        running, value = np.full(iterations, np.nan), float("nan")
    return Noise(running, value, b_small, chunks)

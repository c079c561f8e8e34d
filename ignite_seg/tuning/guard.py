"""The guard: a short run of the chosen recipe before the trials spend the budget.

A range test can be fooled (a task learned within the sweep, a curve that never diverges, an adaptive
optimizer flat for decades), and nothing else checks the recipe before the trials run it. So after the
schedule is chosen, :func:`guard_recipe` trains the final recipe — its optimizer, batch size and
schedule shape (warmup, cycle or decay) compressed into :func:`guard_steps` optimizer steps — from
:data:`GUARD_REPEATS` seeded initialisations, in the tune's worker pool (the worker task is
:func:`ignite_seg.engine.guard_run.run_guard`). The recipe passes when every
repeat's loss on the held-out slice of the training set is finite at the end and their mean is below
the mean at the start by :data:`GUARD_MARGIN` (:func:`judge`). If not, both learning rates are divided by
:data:`GUARD_BACKOFF` and the check runs again, at most :data:`GUARD_MAX_BACKOFFS` times.

When no attempt passes, the choice is:

* some attempt ended finite: recorded as a *fallback* with a WARNING, the first (highest rates) whose held-out loss
  *held* — ended within :data:`GUARD_MARGIN` of its start, neither falling enough nor rising — is used
  (:func:`fallback_attempt`): the short run may simply be too short to show the improvement of a slow learner,
  and a rise is the only sign of rates too hot that it gives. Where every attempt rose, the one that rose least;
* every attempt's loss was NaN/inf even at the range divided by ``GUARD_BACKOFF ** GUARD_MAX_BACKOFFS``:
  :class:`~ignite_seg.exceptions.TuningError`. Training the trials on such a recipe would spend the
  budget on NaN; the message says what to change.

Each attempt is logged and kept in ``misc.json`` (``steps.guard``, :class:`~ignite_seg.storage.schemas.GuardStep`).
"""
from __future__ import annotations

import dataclasses
import logging
import math
from typing import NamedTuple, Sequence

import numpy as np

from ..config.hyperparameters import FixedHyperparameters
from ..engine.guard_run import GuardResult, GuardTask, run_guard
from ..exceptions import TuningError
from ..storage.schemas import GuardAttempt, GuardStep
from .context import TuneRun, derive_seed, last_line, run_tasks

__all__ = [
    "GUARD_STEPS", "GUARD_MIN_STEPS", "GUARD_REPEATS", "GUARD_MARGIN", "GUARD_BACKOFF", "GUARD_MAX_BACKOFFS",
    "Verdict", "guard_steps", "judge", "guard_recipe", "fallback_attempt",
]

logger = logging.getLogger(__name__)

#: Optimizer steps of a short run, at most (fastai's and Lightning's LR finders take 100)...
GUARD_STEPS = 200
#: ... and at least, when a quarter of the trial's own steps is fewer than ``GUARD_STEPS``.
GUARD_MIN_STEPS = 20
#: Short runs per attempt, each from its own initialisation and data order (run in parallel).
GUARD_REPEATS = 2
#: The mean held-out loss must end at least this fraction below its start.
GUARD_MARGIN = 0.02
#: A failed attempt divides both learning rates by this (half a decade)...
GUARD_BACKOFF = 10**0.5
#: ... at most this many times (two decades in all).
GUARD_MAX_BACKOFFS = 4


class Verdict(NamedTuple):
    passed: bool
    reason: str


def guard_steps(trial_steps: int) -> int:
    """Steps of a short run: a quarter of the trial's, within ``[GUARD_MIN_STEPS, GUARD_STEPS]``."""
    return int(min(GUARD_STEPS, max(GUARD_MIN_STEPS, trial_steps // 4)))


def judge(start: Sequence[float], end: Sequence[float], margin: float = GUARD_MARGIN) -> Verdict:
    """Whether short runs improved: every end loss finite, and their mean ``margin`` below the start's.

    Example:
        >>> judge([2.3, 2.3], [1.1, 1.3]).passed
        True
        >>> judge([2.3, 2.3], [2.3, 40.0]).reason
        'held-out loss rose: 2.3 -> 21.15 (needs <= 2.254)'
    """
    s, e = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
    if not np.isfinite(s).all():
        return Verdict(False, "held-out loss not finite at the start (before any step)")
    if not np.isfinite(e).all():
        return Verdict(False, f"held-out loss not finite at the end in {int((~np.isfinite(e)).sum())} of {e.size} "
                       "run(s): diverged")
    need = (1 - margin) * float(s.mean())
    if float(e.mean()) <= need:
        return Verdict(True, f"held-out loss fell: {s.mean():.4g} -> {e.mean():.4g} (needs <= {need:.4g})")
    word = "rose" if e.mean() > s.mean() else "did not fall enough"
    return Verdict(False, f"held-out loss {word}: {s.mean():.4g} -> {e.mean():.4g} (needs <= {need:.4g})")


class _Key(NamedTuple):
    attempt: int
    repeat: int


def _attempt(t: TuneRun, hp: FixedHyperparameters, attempt: int, steps: int) -> tuple[GuardAttempt, float]:
    """Run one attempt's short runs; its record and its relative improvement (-inf: not finite)."""
    tasks = [GuardTask(_Key(attempt, r), t.recipe, hp, derive_seed(t.seed, "guard", r), steps, device_index=r)
             for r in range(GUARD_REPEATS)]
    results = run_tasks(t, run_guard, tasks, "tune: recipe check", "guard",
                        lambda task, err: GuardResult(task.key, "failed", error=err))
    ordered = [results[task.key] for task in tasks]
    for r in ordered:
        if r.status == "failed":
            logger.warning("recipe check run %s failed: %s", r.key, last_line(r.error))
    start, end = [r.start_loss for r in ordered], [r.end_loss for r in ordered]
    verdict = judge(start, end)
    gain = (np.mean(start) - np.mean(end)) / max(abs(float(np.mean(start))), 1e-12)
    record = GuardAttempt(lr_start=hp.lr_start, lr_end=hp.lr_end, start_loss=[_finite(v) for v in start],
                          end_loss=[_finite(v) for v in end], passed=verdict.passed, verdict=verdict.reason)
    return record, float(gain) if np.isfinite(gain) else -math.inf


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def guard_recipe(t: TuneRun, hp: FixedHyperparameters) -> FixedHyperparameters:
    """Check ``hp`` with short runs; back off its learning rates until one passes (see the module doc).

    Raises:
        TuningError: every attempt's held-out loss was NaN/inf, down to the lowest rates tried.
    """
    trial_steps = hp.epochs * max(1, math.ceil(t.n_fit / hp.batch_size))
    steps = guard_steps(trial_steps)
    attempts: list[GuardAttempt] = []
    gains: list[float] = []
    for k in range(GUARD_MAX_BACKOFFS + 1):
        tried = _scaled(hp, GUARD_BACKOFF**-k)
        record, gain = _attempt(t, tried, k, steps)
        attempts.append(record)
        gains.append(gain)
        log = logger.info if record.passed else logger.warning
        log("recipe check %d: lr %.4g -> %.4g, %d steps x %d runs: %s", k + 1, tried.lr_start, tried.lr_end, steps,
            GUARD_REPEATS, record.verdict)
        if record.passed:
            return _decided(t, hp, attempts, steps, k, fallback=False)
    if not any(math.isfinite(g) for g in gains):
        _decided(t, hp, attempts, steps, None, fallback=False)
        lowest = _scaled(hp, GUARD_BACKOFF**-GUARD_MAX_BACKOFFS)
        raise TuningError(
            f"the tuned recipe (lr {hp.lr_start:.3g} -> {hp.lr_end:.3g}, batch size {hp.batch_size}) diverged in a "
            f"{steps}-step check, and so did every back-off down to lr {lowest.lr_start:.3g} -> {lowest.lr_end:.3g}. "
            "Check the model and loss for NaN (e.g. a log of 0), lower lr_start of the settings, add grad_clip_norm, "
            "or pass a FixedHyperparameters recipe."
        )
    return _decided(t, hp, attempts, steps, fallback_attempt(gains), fallback=True)


def fallback_attempt(gains: Sequence[float], margin: float = GUARD_MARGIN) -> int:
    """The attempt the trials use when none passed, from each attempt's relative fall of the held-out loss (``gains``,
    highest rates first; -inf: not finite): the first whose loss held (``gain >= -margin``), else the largest gain.

    On a loss that sat at the best constant output's from the sweep's start (a late learner: the multiplication
    problem's LSTM with standardised targets, bench/RESULTS.md session 26), no 200-step run falls and the gains are
    noise (+0.03% to -0.1%); the largest of them picked the fourth attempt (lr / 32), whose trials ended at 0.53
    and 0.71, where the first attempt that held (lr / 3.2) lies next to the grid's best peak (0.995).

    Example:
        >>> fallback_attempt([-0.025, -0.0008, -0.001, 0.0003, -0.0003])  # the first rose 2.5%: the second held
        1
        >>> fallback_attempt([-float("inf"), -0.3, -0.05])  # diverged, then rose: the one that rose least
        2
    """
    held = [k for k, g in enumerate(gains) if math.isfinite(g) and g >= -margin]
    return held[0] if held else int(np.argmax(gains))


def _scaled(hp: FixedHyperparameters, factor: float) -> FixedHyperparameters:
    return hp if factor == 1 else dataclasses.replace(hp, lr_start=hp.lr_start * factor, lr_end=hp.lr_end * factor)


def _decided(t: TuneRun, hp: FixedHyperparameters, attempts: list[GuardAttempt], steps: int, chosen: int | None,
             *, fallback: bool) -> FixedHyperparameters:
    """Record the check in ``misc.json`` and return the recipe of attempt ``chosen`` (``hp`` when None)."""
    final = hp if chosen is None else _scaled(hp, GUARD_BACKOFF**-chosen)
    if chosen is None:
        decided = "every attempt diverged: no recipe (TuningError)"
    elif fallback:
        decided = (f"no attempt passed; fallback: attempt {chosen + 1}, the first whose held-out loss held (within "
                   f"{GUARD_MARGIN:.0%} of its start; where none did, the one that rose least)")
        logger.warning("recipe check: no attempt improved the held-out loss by %.0f%% in %d steps; the trials use "
                       "attempt %d's rates lr %.4g -> %.4g (a fallback)", 100 * GUARD_MARGIN, steps, chosen + 1,
                       final.lr_start, final.lr_end)
    elif chosen:
        decided = f"backed off {chosen} time(s) (lr / {GUARD_BACKOFF**chosen:.3g}): the first attempt that passed"
        logger.warning("recipe check: the tuned rates failed a short run; backed off %d time(s) to lr %.4g -> %.4g",
                       chosen, final.lr_start, final.lr_end)
    else:
        decided = "the tuned recipe passed unchanged"
    t.misc.record(guard=GuardStep(
        steps=steps, repeats=GUARD_REPEATS, margin=GUARD_MARGIN, backoff_factor=GUARD_BACKOFF, attempts=attempts,
        lr_start=final.lr_start, lr_end=final.lr_end, backoffs=chosen or 0, fallback=fallback, decided_by=decided,
    ))
    return final

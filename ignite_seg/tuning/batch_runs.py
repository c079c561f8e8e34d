"""The batch-size candidates' runs: successive halving over short runs, repeats in parallel.

The ranking maths is :mod:`ignite_seg.tuning.batch_search`'s; this module runs the rungs on the tune's
:class:`~ignite_seg.runtime.tasks.TaskRunner` and keeps every rung's scores for ``bs_sampled.npz``.
"""
from __future__ import annotations

import dataclasses
import logging
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..config.hyperparameters import HyperparameterSettings
from ..engine.sweeps import BatchRunResult, BatchRunTask, run_batch_trial
from ..exceptions import TuningError
from ..storage.schemas import BatchSearchProgress, Rung, RungNote
from .batch_search import LR_SCALING, halving_survivors, rank_scores, rank_with_ties, scale_lr
from .context import TuneRun, derive_seed, last_line, run_tasks

__all__ = ["BatchSearch", "batch_search"]

logger = logging.getLogger(__name__)


class _RunKey(NamedTuple):
    """Which rung, candidate (its index) and repeat a batch-size run is."""

    rung: int
    candidate: int
    repeat: int


@dataclass
class BatchSearch:
    """The candidates, the one chosen, each rung's scores (for ``bs_sampled.npz``) and records (``misc.json``)."""

    bss: list[int]
    chosen: int
    rung_budgets: list[float] = dataclasses.field(default_factory=list)
    rung_perfs: list[np.ndarray] = dataclasses.field(default_factory=list)  # each (R, C), NaN where not run
    rung_losses: list[np.ndarray] = dataclasses.field(default_factory=list)
    #: per candidate, the least seconds per training example of its runs so far (NaN: none timed): other
    #: load on the machine only slows a run, so the fastest run is the best measure of what a batch costs
    seconds_per_example: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    rungs: list[Rung | RungNote] = dataclasses.field(default_factory=list)


def batch_search(t: TuneRun, cands: list[int], lr_min: float, lr_max: float, budget: float) -> BatchSearch:
    """Successive halving over ``cands``: score all for ``budget`` epochs, keep the best 1/eta with eta times the
    budget, until one is left."""
    search = BatchSearch(list(cands), cands[0], seconds_per_example=np.full(len(cands), np.nan))
    if len(cands) == 1:
        search.rungs.append(RungNote("a single candidate: no runs needed"))
        return search
    alive = np.arange(len(cands))
    logger.info("batch-size candidates %s (LR scaled from batch size %d: %s)", cands, t.s.initial_batch_size,
                LR_SCALING)
    while True:
        tasks = [
            BatchRunTask(
                key=_RunKey(len(search.rungs), int(c), r), recipe=t.recipe, seed=derive_seed(t.seed, "bs", r),
                batch_size=cands[c], lr_min=scale_lr(lr_min, cands[c], t.s.initial_batch_size),
                lr_max=scale_lr(lr_max, cands[c], t.s.initial_batch_size), epochs=budget, device_index=int(c),
            )
            for c in alive for r in range(t.s.batch_rn_min_inits)
        ]
        perfs, losses, cost = _scores(t, cands, tasks, alive)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # candidates without a timed run
            search.seconds_per_example = np.fmin(search.seconds_per_example, np.nanmin(cost, axis=0))
        survivors = _halve(t.s, search, alive, budget, perfs, losses)
        t.misc.record(batch_size=BatchSearchProgress(candidates=cands, rungs=list(search.rungs)))
        if len(survivors) == 1:
            search.chosen = cands[int(survivors[0])]
            return search
        alive = np.sort(survivors)
        budget *= t.s.batch_eta


def _scores(t: TuneRun, cands: list[int], tasks: list[BatchRunTask],
            alive: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run one rung's tasks: held-out perf and loss and the training seconds per example, per repeat and
    candidate (R, C), NaN where not run."""
    results = run_tasks(t, run_batch_trial, tasks, f"tune: batch sizes ({tasks[0].epochs:g} epochs)", "batch",
                         lambda task, err: BatchRunResult(task.key, "failed", error=err))
    perfs = np.full((t.s.batch_rn_min_inits, len(cands)), np.nan)
    losses = np.full((t.s.batch_rn_min_inits, len(cands)), np.nan)
    cost = np.full((t.s.batch_rn_min_inits, len(cands)), np.nan)
    for key, res in results.items():
        assert isinstance(key, _RunKey)
        c, r = key.candidate, key.repeat
        if res.status == "failed":
            logger.warning("batch-size run (batch %d, repeat %d) failed: %s", cands[c], r, last_line(res.error))
            continue
        perfs[r, c], losses[r, c] = res.perf, res.loss
        if res.examples > 0 and res.train_seconds > 0:
            cost[r, c] = res.train_seconds / res.examples
    if not np.isfinite(perfs[:, alive]).any():
        first = next(iter(results.values()))
        raise TuningError(
            f"every batch-size candidate run failed; the first error was:\n{first.error}\nFix the loaders, "
            "or skip the candidate runs with batch_pts=0."
        )
    return perfs, losses, cost


def _halve(
    s: HyperparameterSettings, search: BatchSearch, alive: np.ndarray, budget: float, perfs: np.ndarray,
    losses: np.ndarray,
) -> np.ndarray:
    """Rank the rung's candidates, record the rung in ``search``; the survivors (indices into the candidates)."""
    cands = search.bss
    # candidates tied with the best (within batch_tie_tol, or not worse by the paired test over the
    # repeats) rank first, the smallest batch first unless a larger tied one scored no worse and trains
    # faster per example (batch_tie_prefer="faster")
    faster = s.batch_tie_prefer == "faster"
    cost = search.seconds_per_example
    ranked = [int(i) for i in rank_with_ties(cands, perfs, losses, s.batch_score, s.batch_tie_tol,
                                             paired_test=s.batch_tie_test, cost=cost if faster else None,
                                             speed_margin=s.batch_tie_speed_margin)
              if i in set(alive.tolist())]
    by_score = [int(i) for i in rank_scores(perfs, losses, s.batch_score) if i in set(alive.tolist())]
    search.rung_budgets.append(budget)
    search.rung_perfs.append(perfs)
    search.rung_losses.append(losses)
    survivors = halving_survivors(np.asarray(ranked), len(alive), s.batch_eta)
    tie = None
    if ranked[0] != by_score[0]:
        tie = (f"batch {cands[ranked[0]]} is within batch_tie_tol={s.batch_tie_tol} of the best scored "
               f"{cands[by_score[0]]} ({s.batch_score})" + (" or not worse at 95% by a paired t-test over the "
               "repeats" if s.batch_tie_test and s.batch_rn_min_inits > 1 else "")
               + "; ties rank the smaller batch size first" + (
                   ", unless a larger one scored no worse and trains faster per example (by more than "
                   f"batch_tie_speed_margin={s.batch_tie_speed_margin})" if faster else ""))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a candidate none of whose runs scored: NaN
        mean_perf, mean_loss = np.nanmean(perfs, axis=0), np.nanmean(losses, axis=0)
    search.rungs.append(Rung(
        budget_epochs=budget, batch_sizes=[cands[i] for i in alive],
        mean_perf={str(cands[i]): _finite(mean_perf[i]) for i in alive},
        mean_loss={str(cands[i]): _finite(mean_loss[i]) for i in alive}, ranked_by=s.batch_score,
        seconds_per_example={str(cands[i]): _finite(cost[i]) for i in alive},
        kept=[cands[i] for i in survivors], best_by_score=cands[by_score[0]], tie=tie,
    ))
    logger.info("batch sizes after %g epoch(s) (held-out perf / loss / µs per training example): %s; keeping %s",
                budget, ", ".join(f"{cands[i]}: {mean_perf[i]:.4f} / {mean_loss[i]:.4g} / "
                                  f"{_micro(cost[i])}" for i in ranked),
                [cands[i] for i in survivors])
    return survivors


def _finite(value: float) -> float | None:
    """``value`` as a float, or None when it is not finite (no timed run, no scored run)."""
    return float(value) if np.isfinite(value) else None


def _micro(seconds: float) -> str:
    """``seconds`` in µs (3 significant digits), or "?" when not finite."""
    return f"{seconds * 1e6:.3g}" if np.isfinite(seconds) else "?"

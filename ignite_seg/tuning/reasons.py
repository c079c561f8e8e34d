"""What the tuner's batch-size decision says: the rule that decided, and the fallback when it was one.

Pure functions of the settings, the noise scale and the successive-halving rungs, so the log,
``misc.json`` (:class:`~ignite_seg.storage.schemas.BatchSizeStep`) and the reports say the same thing,
and tests check the wording on hand-built rungs.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from ..config.hyperparameters import HyperparameterSettings
from ..storage.schemas import Rung, RungNote

__all__ = ["BatchDecision", "batch_decision", "noise_measured"]

#: The rules that can decide the batch size (``BatchSizeStep.rule``).
RULES = ("noise-scale", "fallback", "single-candidate", "best-score", "tie")


class BatchDecision(NamedTuple):
    """The rule that decided (one of :data:`RULES`), the sentence saying why, and the fallback taken (or None)."""

    rule: str
    reason: str
    fallback: str | None


def noise_measured(noise: float) -> bool:
    """Whether the gradient noise scale is usable (finite and positive)."""
    return math.isfinite(noise) and noise > 0


def batch_decision(s: HyperparameterSettings, noise: float, chosen: int, rungs: Sequence[Rung | RungNote]) -> BatchDecision:
    """Why ``chosen``: the noise-scale rule (``batch_pts=0``), the fallback when the noise scale could
    not be measured, or the last rung of the candidate runs (best score, or the tie rule).

    Example:
        >>> batch_decision(get_preset("fastest"), float("nan"), 16, []).rule  # doctest: +SKIP
        'fallback'
    """
    frac, b0 = s.noise_batch_frac, s.initial_batch_size
    fallback = None
    if not noise_measured(noise):
        fallback = (f"the gradient noise scale could not be measured ({_g(noise)}), so initial_batch_size={b0} "
                    f"stands in for {frac} x the noise scale")
    if s.batch_pts == 0:
        if fallback is not None:
            return BatchDecision("fallback", f"initial_batch_size={b0} (the grid batch size nearest it), because the "
                                 "gradient noise scale could not be measured; no candidate runs", fallback)
        return BatchDecision("noise-scale", f"the grid batch size nearest {frac} x the noise scale "
                             f"({frac} x {_g(noise)} = {_g(frac * noise)}); no candidate runs", None)
    around = (f"; the candidates were centred on initial_batch_size={b0} because the gradient noise scale could "
              "not be measured" if fallback is not None else "")
    last = rungs[-1] if rungs else None
    if not isinstance(last, Rung):
        return BatchDecision("single-candidate", "the only candidate on the grid; no runs" + around, fallback)
    by = last.ranked_by or s.batch_score
    means = (last.mean_loss if by == "loss" else last.mean_perf) or {}
    best = last.best_by_score if last.best_by_score is not None else chosen
    if chosen != best:
        test = (" (or not worse at 95% by a paired t-test over the repeats)"
                if s.batch_tie_test and s.batch_rn_min_inits > 1 else "")
        return BatchDecision("tie", f"tied with {best} within {s.batch_tie_tol:.0%}{test} (held-out {by} "
                             f"{_g(means.get(str(chosen)))} vs {_g(means.get(str(best)))}); "
                             + _tie_order(s, last, chosen, best) + around, fallback)
    others = [b for b in (last.batch_sizes or []) if b != chosen]
    runner_up = f"; {others[0]}: {_g(means.get(str(others[0])))}" if len(others) == 1 else ""
    n = len(last.batch_sizes or [])
    return BatchDecision("best-score", f"best held-out {by} of the {n} candidate(s) left after successive halving "
                         f"({_g(means.get(str(chosen)))}{runner_up})" + around, fallback)


def _tie_order(s: HyperparameterSettings, last: Rung, chosen: int, best: int) -> str:
    """Which of the tied candidates ranked first, and by what (the order ``rank_with_ties`` applied)."""
    speed = last.seconds_per_example or {}
    mine, theirs = speed.get(str(chosen)), speed.get(str(best))
    if chosen < best or s.batch_tie_prefer != "faster" or mine is None or theirs is None:
        return "the smaller batch is ranked first"
    return (f"it trains faster here ({_g(mine * 1e6)} vs {_g(theirs * 1e6)} µs per training example, each one's fastest run) "
            "and scored no worse than the smaller tied batch, so it ranks first")


def _g(value: float | None) -> str:
    return "NaN" if value is None or not math.isfinite(value) else f"{value:.3g}"

"""Batch-size search maths (pure numpy): candidates around the noise scale, successive halving.

Candidates lie on a geometric grid ``batch_start * step**k`` inside ``[batch_start, batch_end]``;
the ``n`` consecutive grid points centred (in log scale) on the gradient noise scale are scored
with short runs, and after each rung only the best ``1/eta`` continue with ``eta`` times the budget.

Example:
    >>> batch_candidates(48.0, 16, 512, 3)
    [32, 64, 128]
"""
from __future__ import annotations

import math
import warnings
from typing import Literal

import numpy as np

__all__ = [
    "batch_grid", "centre_batch", "batch_candidates", "halving_survivors", "rank_scores", "rank_with_ties",
    "not_worse_paired", "scale_lr", "LR_SCALING",
]

#: One-sided 95% quantiles of Student's t for 1..30 degrees of freedom (the normal's 1.645 beyond).
T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
       1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697)


def batch_grid(batch_start: int, batch_end: int, step: float = 2.0) -> list[int]:
    """Batch sizes ``batch_start * step**k`` (rounded, unique) up to ``batch_end``."""
    if not (1 <= batch_start <= batch_end):
        raise ValueError(f"need 1 <= batch_start <= batch_end, got {batch_start!r}, {batch_end!r}")
    if not step > 1:
        raise ValueError(f"step must be > 1, got {step!r}")
    out: list[int] = []
    k = 0
    while True:
        b = int(round(batch_start * step**k))
        if b > batch_end:
            break
        if not out or b != out[-1]:
            out.append(b)
        k += 1
    return out


def centre_batch(noise: float, batch_start: int, batch_end: int, step: float = 2.0, fallback: int | None = None) -> int:
    """The grid batch size nearest (in log scale) to the noise scale ``noise``.

    A non-finite or non-positive ``noise`` (the estimate failed) gives the grid point nearest
    ``fallback`` (default: the grid's geometric middle).
    """
    grid = np.asarray(batch_grid(batch_start, batch_end, step), dtype=np.float64)
    if not (math.isfinite(noise) and noise > 0):
        if fallback is None:
            return int(grid[(grid.size - 1) // 2])
        noise = float(fallback)
    return int(grid[int(np.argmin(np.abs(np.log(grid) - math.log(noise))))])


def batch_candidates(noise: float, batch_start: int, batch_end: int, n: int, step: float = 2.0,
                     fallback: int | None = None) -> list[int]:
    """``n`` consecutive grid batch sizes around :func:`centre_batch` (fewer if the grid is short)."""
    grid = batch_grid(batch_start, batch_end, step)
    if n <= 0:
        return []
    centre = grid.index(centre_batch(noise, batch_start, batch_end, step, fallback))
    n = min(n, len(grid))
    lo = min(max(centre - (n - 1) // 2, 0), len(grid) - n)
    return grid[lo : lo + n]


def rank_scores(perfs: np.ndarray, losses: np.ndarray, by: Literal["loss", "perf"] = "loss") -> np.ndarray:
    """Candidate indices from best to worst: by lower mean loss (``by="loss"``, ties broken by higher
    mean perf) or by higher mean perf (ties broken by lower mean loss).

    ``perfs`` and ``losses`` are (R, C), perf higher-is-better, loss lower-is-better; all-NaN
    columns (pruned or failed candidates) rank last.
    """
    perfs = np.atleast_2d(np.asarray(perfs, dtype=np.float64))
    losses = np.atleast_2d(np.asarray(losses, dtype=np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: pruned candidates
        p = np.nanmean(perfs, axis=0)
        ls = np.nanmean(losses, axis=0)
    p = np.where(np.isfinite(p), p, -np.inf)
    ls = np.where(np.isfinite(ls) | (ls == np.inf), ls, np.inf)
    return np.lexsort((-p, ls)) if by == "loss" else np.lexsort((ls, -p))


def not_worse_paired(values: np.ndarray, best: int, lower_is_better: bool = True) -> np.ndarray:
    """Per candidate (column of ``values``, repeats x candidates): True where it is not worse than
    column ``best`` at 95% by a one-sided paired t-test over the repeats both completed.

    Repeat ``r`` of every candidate starts from the same seeded initialisation, so the per-repeat
    differences cancel what the initialisation contributes. Fewer than 2 pairs: False (no test).

    Example:
        >>> not_worse_paired(np.array([[0.20, 0.21, 0.30], [0.22, 0.22, 0.33]]), 0).tolist()
        [True, True, False]
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    sign = 1.0 if lower_is_better else -1.0
    out = np.zeros(values.shape[1], dtype=bool)
    for c in range(values.shape[1]):
        both = np.isfinite(values[:, c]) & np.isfinite(values[:, best])
        n = int(both.sum())
        if c == best:
            out[c] = n > 0
            continue
        if n < 2:
            continue
        d = sign * (values[both, c] - values[both, best])  # > 0: worse than the best
        se = float(np.std(d, ddof=1)) / math.sqrt(n)
        t = T95[n - 2] if n - 1 <= len(T95) else 1.645
        out[c] = float(d.mean()) <= t * se
    return out


def rank_with_ties(bss: list[int] | np.ndarray, perfs: np.ndarray, losses: np.ndarray,
                   by: Literal["loss", "perf"] = "loss", tie_tol: float = 0.0,
                   paired_test: bool = False, cost: np.ndarray | None = None,
                   speed_margin: float = 0.1) -> np.ndarray:
    """Candidate indices from best to worst, where the ones *tied* with the best come first, then the
    rest as :func:`rank_scores` orders them.

    A candidate ties with the best when its mean held-out score is within ``tie_tol`` of the
    best's, relatively: loss <= (1 + tie_tol) x best loss (``by="loss"``), or perf >=
    best perf - tie_tol x |best perf| (``by="perf"``). Short runs cannot tell such candidates
    apart (their order changes from seed to seed). With ``paired_test``, a candidate also ties
    when it is not worse than the best at 95% by a paired t-test over the repeats
    (:func:`not_worse_paired`): with a few repeats a 3% lead can be noise, and a smaller one a
    consistent difference. With ``tie_tol=0`` and no test this is :func:`rank_scores`.

    Among the tied, the smaller batch ranks first: at a fixed number of examples it makes more
    progress per example (the noise-scale model, McCandlish et al. 2018, eq. 2.11), and a rule
    keeps the choice repeatable where the scores are noise. With ``cost`` (seconds per training
    example measured in the candidates' runs, (R, C) or (C,)), that prior gives way to the runs'
    own evidence: a larger tied candidate that scored at least as well as the smallest tied one
    and trains faster per example (by more than ``speed_margin``, what timings of concurrent runs
    differ by) ranks first, the fastest such one; a trial of a fixed number of epochs then ends
    sooner at no cost the runs could see. (A faster candidate that scored worse, even within the
    tie band, does not pass: on the noisy-regression bench task the larger tied batches lost
    0.007 of val perf in trials, bench/RESULTS.md session 11.)

    Example:
        >>> rank_with_ties([8, 16, 32], np.array([[0.95, 0.96, 0.9]]), np.array([[0.202, 0.200, 0.3]]), "loss", 0.03)
        array([0, 1, 2])
        >>> rank_with_ties([8, 16, 32], np.array([[0.95, 0.96, 0.9]]), np.array([[0.202, 0.200, 0.3]]), "loss", 0.03,
        ...                cost=np.array([2e-4, 1.2e-4, 0.8e-4]))  # 16 tied, no worse than 8, and faster
        array([1, 0, 2])
        >>> rank_with_ties([8, 16, 32], np.array([[0.95, 0.96, 0.9]]), np.array([[0.200, 0.202, 0.3]]), "loss", 0.03,
        ...                cost=np.array([2e-4, 1.2e-4, 0.8e-4]))  # 16 tied but scored worse: 8 stays first
        array([0, 1, 2])
    """
    if not tie_tol >= 0:
        raise ValueError(f"tie_tol must be >= 0, got {tie_tol!r}")
    if not speed_margin >= 0:
        raise ValueError(f"speed_margin must be >= 0, got {speed_margin!r}")
    bss = np.asarray(bss)
    ranked = rank_scores(perfs, losses, by)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: pruned candidates
        score = np.nanmean(np.atleast_2d(losses if by == "loss" else perfs), axis=0)
    best = int(ranked[0])
    if not np.isfinite(score[best]):
        return ranked
    if by == "loss":
        tied = score <= score[best] + tie_tol * abs(score[best])
    else:
        tied = score >= score[best] - tie_tol * abs(score[best])
    if paired_test:
        tied |= not_worse_paired(np.atleast_2d(losses if by == "loss" else perfs), best, by == "loss")
    tied &= np.isfinite(score)
    first = [int(i) for i in np.flatnonzero(tied)[np.argsort(bss[tied], kind="stable")]]  # smallest batch first
    speed = _mean_cost(cost, len(bss)) if cost is not None else None
    if speed is not None and np.isfinite(speed[first]).all():
        head = first[0]
        no_worse = score <= score[head] if by == "loss" else score >= score[head]
        passing = [i for i in first[1:] if no_worse[i] and speed[i] * (1 + speed_margin) < speed[head]]
        if passing:
            pick = min(passing, key=lambda i: (speed[i], bss[i]))
            first = [pick] + [i for i in first if i != pick]
    return np.asarray(first + [int(i) for i in ranked if not tied[i]])


def _mean_cost(cost: np.ndarray, n: int) -> np.ndarray:
    """Per candidate, the mean of ``cost`` over the repeats (NaN where none ran)."""
    cost = np.asarray(cost, dtype=np.float64).reshape(-1, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: pruned candidates
        return np.nanmean(np.where(cost > 0, cost, np.nan), axis=0)


def halving_survivors(ranked: np.ndarray, alive: int, eta: int) -> np.ndarray:
    """The best ``ceil(alive / eta)`` of ``ranked`` (indices best first)."""
    if eta < 2:
        raise ValueError(f"eta must be >= 2, got {eta!r}")
    return np.asarray(ranked[: max(1, math.ceil(alive / eta))])


#: How :func:`scale_lr` moves a learning rate to another batch size, in words (``misc.json``, the logs).
LR_SCALING = "linear in the batch size below the sweep's, its square root above"


def scale_lr(lr: float, batch_size: int, reference_batch_size: int) -> float:
    """``lr``, measured at ``reference_batch_size``, moved to ``batch_size``: in proportion to the batch
    size below the reference (the linear scaling rule), in proportion to its square root above.

    Linear scaling holds while the batch is well below the noise scale; upwards it doubles an ``lr_end``
    that already sits at the sweep's valley floor, past where the larger batch trains stably. On the
    tuner benchmark's CNN (bench/RESULTS.md, session 6) ``fastest`` swept at 16 (``lr_end`` 0.54-0.59)
    chose batch 32 and scaled linearly to 1.08-1.18, where trials diverge (val 0.47 +- 0.37; the grid
    at 32: 0.95 at lr 0.845, diverged at 1.59); the grids' best LR grew ~1.0-1.9x per doubling of the
    batch (CNN, tiny: ~1x; noisy regression: 1.9x). Downwards the linear rule errs low, where training
    is stable. Example: ``scale_lr(0.1, 128, 32)`` is 0.2, ``scale_lr(0.1, 8, 32)`` is 0.025.
    """
    ratio = batch_size / reference_batch_size
    return float(lr) * (ratio if ratio <= 1 else ratio**0.5)

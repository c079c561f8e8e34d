"""The length check's verdicts (pure numpy): one run's curve judged (:func:`judge_length`), the runs combined
(:func:`combine`), and a rival run on a slice against its full run (:func:`compare_ends`, :func:`reach_best`,
:func:`beat_best`), with the words the log and ``misc.json`` say them in. The runs and the rules that use these are
:mod:`ignite_seg.tuning.length`'s.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np

from ..engine.length_run import LengthResult
from ..smoothing import deepest_dip, smooth_epochs

__all__ = ["LengthDecision", "judge_length", "combine", "ShortPair", "compare_ends", "reach_best", "beat_best",
           "hold_end", "short_verdict", "cool_verdict", "spike_verdict"]


class LengthDecision(NamedTuple):
    """What one length run's held-out perf curve says about the trials' length."""

    #: the epochs the trials train (``epochs`` when the check keeps them)
    epochs: int
    cut: bool
    #: 1-based epoch of the smoothed curve's best, its value, the value at the end, the tolerance
    best_epoch: int
    best: float
    end: float
    tol: float
    reason: str
    #: the deepest the smoothed curve fell below its best so far, at any epoch (0: it never fell)
    dip: float = 0.0

    @property
    def spiked(self) -> bool:
        """Whether the perf dipped by more than the tolerance and recovered: it ends within the tolerance of its
        best (the run did not fall), yet somewhere before the end it lay more than the tolerance below its best so
        far."""
        return self.best - self.end <= self.tol < self.dip


def judge_length(perfs: Sequence[float], epochs: int, min_epochs: int, rel_tol: float, abs_tol: float = 0.0
                 ) -> LengthDecision:
    """The trials' epochs from a held-out perf curve measured after each epoch (higher is better).

    The curve is smoothed (:func:`~ignite_seg.smoothing.smooth_epochs`); the tolerance is
    ``rel_tol * |best| + abs_tol``. When the end lies more than that below the best, the trials train
    to the best epoch (within ``[min_epochs, epochs]``); else ``epochs``. The deepest fall below the best so far
    is kept as :attr:`LengthDecision.dip` (:attr:`LengthDecision.spiked`: a dip the run recovered from).

    Example:
        >>> rise_fall = [0.5, 0.6, 0.7, 0.71, 0.7, 0.69, 0.6, 0.55, 0.5, 0.5]
        >>> judge_length(rise_fall, epochs=10, min_epochs=2, rel_tol=0.02).epochs  # best 0.703 after epoch 4
        4
        >>> judge_length([0.5, 0.6, 0.7, 0.71, 0.71, 0.72], epochs=6, min_epochs=2, rel_tol=0.02).cut
        False
        >>> spike = judge_length([0.5, 0.6, 0.7, 0.3, 0.7, 0.72, 0.72], epochs=7, min_epochs=2, rel_tol=0.02)  # 3-epoch mean
        >>> spike.cut, spike.spiked, round(spike.dip, 3)
        (False, True, 0.067)
    """
    y = np.asarray(perfs, dtype=np.float64)
    sm = smooth_epochs(y)
    k = int(np.argmax(sm))
    best, end = float(sm[k]), float(sm[-1])
    tol = rel_tol * abs(best) + abs_tol
    dip = deepest_dip(sm)[1]
    where = f"best {best:.4g} after epoch {k + 1}, {end:.4g} after epoch {y.size} (tolerance {tol:.3g})"
    if best - end <= tol:
        return LengthDecision(epochs, False, k + 1, best, end, tol, f"held-out perf ends within the tolerance of its "
                              f"best: {where}; the {epochs} epochs stand", dip)
    cut = int(min(epochs, max(min_epochs, k + 1)))
    if cut >= epochs:
        return LengthDecision(epochs, False, k + 1, best, end, tol, f"held-out perf fell, but its best came after the "
                              f"first {epochs - 1} epochs: {where}; the {epochs} epochs stand", dip)
    return LengthDecision(cut, True, k + 1, best, end, tol, f"held-out perf fell from its best: {where}; the trials "
                          f"train {cut} epochs (to its best{', at least min_epochs' if cut > k + 1 else ''})", dip)


class ShortPair(NamedTuple):
    """One slice's comparison: the full schedule's end (the mean of its last two epochs; its best where every run
    fell), the shorter schedule's end, the tolerance (0 for ends: any margin counts); ``better``: the slice favours
    the shorter schedule."""

    full: float
    short: float
    tol: float
    better: bool


def compare_ends(full: LengthResult, short: LengthResult) -> ShortPair:
    """Whether the shorter schedule ended above a full-length run on the same slice: each one's end on the 3-epoch
    mean the fall rule reads (:func:`~ignite_seg.smoothing.smooth_epochs`: the mean of its last two epochs; one epoch
    alone is one noisy measurement). A tie does not favour it; a run that failed never wins. One slice's sign, for
    the sign test over slices (the module doc).

    Example:
        >>> ran = lambda *p: LengthResult(0, "completed", {"perfs": np.array(p)}, len(p))
        >>> compare_ends(ran(0.7, 0.76, 0.75), ran(0.74, 0.76, 0.76))
        ShortPair(full=0.755, short=0.76, tol=0.0, better=True)
        >>> compare_ends(ran(0.7, 0.76, 0.75), ran(0.74, 0.7, 0.8)).better  # 0.75: one good last epoch is not enough
        False
    """
    if not (full.usable and short.usable):
        return ShortPair(math.nan, math.nan, 0.0, False)
    a, b = full.end, short.end
    return ShortPair(a, b, 0.0, bool(math.isfinite(a) and math.isfinite(b) and b > a))


def reach_best(full: LengthDecision, short: LengthResult) -> ShortPair:
    """Whether the shorter schedule on a slice ended within the tolerance of the best that slice's full run reached
    before its perf fell (``full``: its verdict; ends on the same 3-epoch mean). A run that failed never wins.

    Example:
        >>> fell = LengthDecision(10, True, 10, 0.82, 0.75, 0.026, "fell")
        >>> reach_best(fell, LengthResult(0, "completed", {"perfs": np.array([0.7, 0.8, 0.81])}, 3))
        ShortPair(full=0.82, short=0.805, tol=0.026, better=True)
    """
    if not short.usable:
        return ShortPair(full.best, math.nan, full.tol, False)
    b = short.end
    return ShortPair(full.best, b, full.tol, bool(math.isfinite(b) and b >= full.best - full.tol))


def beat_best(full: LengthDecision, rival: LengthResult, short: LengthResult | None = None) -> ShortPair:
    """Whether a rival run on a slice ended above the best that slice's full run reached before its perf fell by more
    than the run's tolerance, and above the shorter schedule's end on the same slice where one ran (``short``; the
    trials' other choices where every run fell: the cut, whose proxy is that best, and the shorter schedule); ends on
    the same 3-epoch mean. Better than the full recipe ever was, by as much as a fall must be. A run that failed
    never wins; a failed shorter run does not count.

    Example:
        >>> fell = LengthDecision(10, True, 10, 0.82, 0.75, 0.026, "fell")
        >>> ran = lambda *p: LengthResult(0, "completed", {"perfs": np.array(p)}, len(p))
        >>> beat_best(fell, ran(0.7, 0.8, 0.85, 0.86)).better, beat_best(fell, ran(0.7, 0.8, 0.83, 0.84)).better
        (True, False)
        >>> beat_best(fell, ran(0.7, 0.8, 0.85, 0.86), short=ran(0.8, 0.86, 0.87)).better  # the shorter ended higher
        False
    """
    if not rival.usable:
        return ShortPair(full.best, math.nan, full.tol, False)
    b = rival.end
    above_short = short is None or not short.usable or b > short.end
    return ShortPair(full.best, b, full.tol, bool(math.isfinite(b) and b > full.best + full.tol and above_short))


def hold_end(full: LengthDecision, rival: LengthResult) -> ShortPair:
    """Whether a rival run on a slice ended at least as high as that slice's full run (``full``: its verdict), on the
    same 3-epoch mean: as good where it was measured (a tie holds: the rival is the safer recipe). A run that failed
    never holds.

    Example:
        >>> spiked = LengthDecision(15, False, 15, 0.81, 0.81, 0.026, "spiked", dip=0.05)
        >>> ran = lambda *p: LengthResult(0, "completed", {"perfs": np.array(p)}, len(p))
        >>> hold_end(spiked, ran(0.7, 0.81, 0.81)).better, hold_end(spiked, ran(0.7, 0.8, 0.81)).better
        (True, False)
    """
    if not rival.usable:
        return ShortPair(full.end, math.nan, 0.0, False)
    b = rival.end
    return ShortPair(full.end, b, 0.0, bool(math.isfinite(b) and b >= full.end))


def short_verdict(pairs: Sequence[ShortPair], against: str, epochs: int, short_epochs: int, won: bool) -> str:
    """The shorter schedule's comparison in words: against the full schedule's ``epochs`` (``against="end"``) or the
    runs' best, where every run fell and the cut is ``epochs`` (``"best"``)."""
    if not pairs:
        return f"the recipe compressed to {short_epochs} epochs could not be compared"
    ends = ", ".join(f"{p.short:.4g} against {p.full:.4g}" + (f" (tolerance {p.tol:.3g})" if against == "best" else "")
                     for p in pairs)
    than = (f"above the full {epochs}-epoch schedule" if against == "end" else "within the tolerance of the runs' best")
    if won:
        return (f"{'yet ' if against == 'end' else ''}the recipe compressed to {short_epochs} epochs ended {than} on "
                f"every one of {len(pairs)} slice{'s' if len(pairs) > 1 else ''} ({ends}): the trials train "
                f"{short_epochs} epochs {'instead' if against == 'end' else f'rather than the {epochs} of the cut'}, "
                "their cycles and warmup compressed in proportion")
    return (f"the recipe compressed to {short_epochs} epochs did not end {than} on slice {len(pairs)} ({ends}), so it "
            "is not taken")


def cool_verdict(pairs: Sequence[ShortPair], epochs: int, won: bool, factor: float) -> str:
    """The cooler recipe's comparison with the runs' best, in words (every run fell)."""
    if not pairs:
        return f"the recipe at its learning rates / {factor:.3g} could not be compared"
    ends = ", ".join(f"{p.short:.4g} against {p.full:.4g} (tolerance {p.tol:.3g})" for p in pairs)
    if won:
        return (f"yet the recipe at its learning rates / {factor:.3g} ended above the runs' best by more than the "
                f"tolerance (and above the compressed schedule's end where it ran beside) after the planned {epochs} "
                f"epochs on every one of {len(pairs)} slice{'s' if len(pairs) > 1 else ''} ({ends}): too hot rather "
                f"than too long, so the trials train it, the planned {epochs} epochs")
    return (f"the recipe at its learning rates / {factor:.3g} did not end above the runs' best by more than the "
            f"tolerance and above the compressed schedule's end (where it ran beside) on slice {len(pairs)} ({ends}), "
            "so it is not taken")


def spike_verdict(run: LengthDecision, pair: ShortPair | None, epochs: int, won: bool, factor: float) -> str:
    """The cooler recipe's comparison with a run that dipped and recovered (:attr:`LengthDecision.spiked`), in
    words."""
    dipped = (f"the first run's held-out perf dipped {run.dip:.3g} below its best so far, more than the tolerance "
              f"({run.tol:.3g}), and recovered: a recipe at the edge of stability, whose trials may not recover")
    if pair is None or not math.isfinite(pair.short):
        return (f"{dipped}; the recipe at its learning rates / {factor:.3g} did not finish a run on the same slice, so "
                "it is not taken")
    ends = f"{pair.short:.4g} against {pair.full:.4g}"
    if won:
        return (f"{dipped}; the recipe at its learning rates / {factor:.3g} ended at least as high as the run after "
                f"the planned {epochs} epochs on the same slice ({ends}), so the trials train it")
    return (f"{dipped}; the recipe at its learning rates / {factor:.3g} ended below the run on the same slice "
            f"({ends}), so it is not taken")


def combine(judged: Sequence[LengthDecision], epochs: int) -> tuple[int, str]:
    """The trials' epochs from each usable run's decision, and why: cut only when every run's perf fell
    (independent replications agree), to the latest of their best epochs; else ``epochs``.

    Example:
        >>> fell = LengthDecision(20, True, 15, 0.7, 0.6, 0.014, "fell")
        >>> kept = LengthDecision(100, False, 90, 0.7, 0.7, 0.014, "kept")
        >>> combine([fell, fell._replace(epochs=30)], 100)[0], combine([fell, kept], 100)[0]
        (30, 100)
    """
    if not judged:
        return epochs, f"no length run finished; the trials train the planned {epochs} epochs"
    fell = [d for d in judged if d.cut]
    ends = ", ".join(f"best {d.best:.4g} after epoch {d.best_epoch}, {d.end:.4g} at the end" for d in judged)
    if not fell:
        return epochs, (f"the held-out perf did not fall by more than the tolerance ({ends}); the {epochs} epochs "
                        "stand")
    if len(fell) < len(judged):
        return epochs, (f"the held-out perf fell in {len(fell)} of {len(judged)} runs, not in every one ({ends}); "
                        f"the {epochs} epochs stand")
    cut = max(d.epochs for d in judged)
    floor = " (at least min_epochs)" if cut > max(d.best_epoch for d in judged) else ""
    return cut, (f"the held-out perf fell from its best in every run ({ends}; tolerance "
                 f"{', '.join(f'{d.tol:.3g}' for d in judged)}); the trials train {cut} epochs, the latest of the "
                 f"runs' best epochs{floor}")

"""The length check: do the trials train longer than the data supports? If so, shorten them.

The schedule's epochs come from ``train_examples`` (about 30,000 examples a trial, at most
``max_epochs``): on a few hundred noisy items that is 100 epochs, and a tuned recipe, which learns
fast, reaches its best held-out perf in 10-20 of them and then overfits (bench/RESULTS.md, session
13: scikit-learn's diabetes at 0.64 tuned against 0.70 for an untuned Adam, on every seed, both
recipes; the same recipes cut to 20 epochs 0.706 / 0.704). Nothing before this stage sees it: the
range test and the batch runs are a few epochs long.

So after the recipe check, :func:`check_length` trains the final recipe its full length, as a trial
would (:func:`ignite_seg.engine.length_run.run_length`), up to ``length_runs`` times, each on the
training set less its own held-out slice — the tuner's slice, then slices as large drawn from the rest
— and scores the slice at every epoch's end. The runs go one after the other: the trials are cut only
when every run fell, so a run that did not fall settles it and the next is not run (on a task that does
not overfit the check costs one run, not ``length_runs``). Each run's curve is judged by :func:`judge_length` on a
3-epoch moving mean: its perf *fell* when it ends more than the tolerance below its best — ``length_tol``
of the best, plus :data:`LENGTH_STEPS` of the perf's smallest steps on the slice for an accuracy (one item of
30 moves it by 1/30; one token, or one label of a multi-label item, by less: the scorer counts them). A run stops early once it has fallen for :func:`stop_patience` epochs (the rest
would only confirm it). When every run fell (:func:`combine`: independent replications on different
slices agree), the trials train to the latest of the runs' best epochs (at least ``min_epochs``), their
cycles shortened in proportion (the number of cycles kept); else the epochs stand. To the best, not to
where the curve leaves the tolerance: a perf that declines slowly stays within 2% for many epochs, and a
multi-label task whose runs peaked at epochs 3-6 and were cut to that plateau's end (10-15 of 20) trained
to 0.814-0.819 against 0.832-0.836 at 4 epochs (bench/RESULTS.md, session 15); on diabetes the two cuts
were within 0.003 of each other. Runs are judged one by one, not on their mean
curve: two runs that peak at different epochs and stop at different times have a mean that neither
shows (scikit-learn's diabetes: both runs fell and stopped, at 27 and 59 epochs; their mean over the 27
epochs they share stayed within the tolerance). It judges the perf, not the loss: on classification
the held-out loss rises from over-confidence while the accuracy still improves (a loss rule would have
cut the tiny benchmark's AdamW recipe and lost 0.0055).

A perf that does not fall can still end lower than a shorter schedule would: a recipe tuned hot suits a short
schedule (bench/RESULTS.md, session 15: a GRU's tuned peaks gave 0.77-0.81 over the planned 15 epochs and
0.83-0.86 over 4-5), and epoch 5 of a 15-epoch schedule is not a 5-epoch run (its LR has not annealed). So beside
the first run, on another worker, :func:`short_schedule` trains the recipe compressed to ``length_short`` of its
epochs (at least ``min_epochs``; its cycles and warmup in proportion) on the same slice. When the full runs did not
all fall, each slice's pair is compared at its end (:func:`compare_ends`: on the 3-epoch mean, the last two epochs):
the trials train the shorter schedule only when it ended above the full one on every one of ``length_short_runs``
slices (3), each pair run only after the ones before favoured it — a sign test, not a margin: on a slice of 150-200
items the shorter schedule's gain (0.003-0.02 where it gains 0.013-0.06 on val) lies inside any tolerance the slice
could justify, while where it loses, some slice shows it; three slices in a row favour a schedule that is no better
one time in eight at most (bench/RESULTS.md, session 17: 40 tunes given three slices each; every margin was positive
on 9, all of them tasks where the shorter schedule wins on val, and on none of the 28 tunes of the seven tasks where
it loses or ties). When every run fell,
the cut to the latest best epoch has a rival: the shorter schedule is taken instead when it is shorter than the cut
and ended within the tolerance of each run's best (:func:`reach_best`; a schedule that anneals within the epochs
where the full one peaked). An oracle of 26
recipes (E against E/3 on val, 4 trials each) found the shorter clearly better on 7 and clearly worse on 15, by up
to 0.27: both rules ask for replication on independent slices because a wrong adoption costs more than a missed
one.

A run's perf also falls when the recipe is too hot rather than too long: a tuned peak at the edge of stability
trains for a while, then the loss jumps and the perf drops with it (bench/RESULTS.md, session 19: an autoencoder's
SGD recipe, peak 1-1.8 from a sweep that diverged at 2-5, whose runs fell near the peak of their cycle and whose
trials diverged in 3 of 12; the same recipe at a third of the learning rate trained every one, better). Cutting the
epochs does not cool such a recipe (a shorter cycle reaches the same peak). So when every run fell, the cut has a
first rival: the recipe with both learning rates divided by :data:`COOL_FACTOR` (the recipe check's back-off) at the
planned epochs, run on each fall-rule slice in turn beside the shorter schedule, each slice only after the ones before
favoured it; it is taken when it ended above the run's best by more than the tolerance on every slice, and above the
shorter schedule's end on that slice (:func:`beat_best`): better than the hot recipe ever was, by as much as the fall
rule asks of a fall, and better than the other choice measured there. Within the tolerance is not enough: on digits with 30% of
the training labels flipped, whose runs truly overfit (peaks after 2-3 epochs), the cooler recipe ended 0.001 and
0.008 above the runs' best on its noisy slices and trained 0.885 on val over the planned 23 epochs, where the cut to 5
trained 0.937; the autoencoder's cooler recipe ended 0.046 and 0.065 above (tolerances 0.013, 0.014). And on a
classifier of dict items whose runs fell, it beat the runs' best (0.703 against 0.667 + 0.027) but not the 7-epoch
compressed schedule beside it (0.737), and trained 0.677 on val where the cut trained 0.693. Only when it is not taken
is the shorter schedule compared (above).

A hot recipe can also dip and recover: the first run's perf falls more than the tolerance below its best so far,
then climbs back within the tolerance of it (:attr:`~.length_verdicts.LengthDecision.spiked`). The run survived its
hot phase once; trials from other initialisations may not (bench/RESULTS.md, session 23: an autoencoder's momentum SGD
cosine recipe whose run lost 0.06 at epoch 8 and recovered, while 3 of 4 of its trials ended at the constant output's
loss; at a third of the learning rate all four trained). So on a schedule that decays from its peak (:data:`DECAYING`:
the hot epochs come first) the cooler recipe runs on that run's slice and is taken when it ended at least as high as
the run (:func:`hold_end`): as good where measured, and safer. Not within the tolerance: a Transformer's cooler recipe
ended 0.005 below its run (tolerance 0.028) and trained 0.806 / 0.898 on val, where the lifted peak trains about 0.92.
Else the shorter schedule is compared as above. Over 8 such tunes the cooler recipe trained from 0.009 worse to 0.23 better on val, while on tunes
whose runs did not dip it trained up to 0.25 worse; on a triangular cycle, whose dip comes at the cycle's peak
mid-run, from 0.037 worse to 0.016 better — so there, as on one-cycle and constant (not measured), only falls count.

Nothing is run when ``length_runs`` is 0 or the trials train ``min_epochs`` already. The decision and
its evidence (every run's curves and verdict) are kept in ``misc.json`` (``steps.length``,
:class:`~ignite_seg.storage.schemas.LengthStep`) and said in the log and the report.
"""
from __future__ import annotations

import dataclasses
import logging
import math
from typing import Callable, Sequence

import numpy as np

from ..config.hyperparameters import FixedHyperparameters
from ..engine.length_run import LengthResult, LengthTask, run_length
from ..storage.schemas import LengthStep
from .context import TuneRun, derive_seed, last_line, run_tasks
from .guard import GUARD_BACKOFF
from .length_verdicts import (
    LengthDecision,
    ShortPair,
    beat_best,
    combine,
    compare_ends,
    cool_verdict,
    hold_end,
    judge_length,
    reach_best,
    short_verdict,
    spike_verdict,
)
from .schedule import DECAYING

__all__ = ["LENGTH_STEPS", "STOP_PATIENCE_FRAC", "COOL_FACTOR", "LengthDecision", "judge_length", "stop_patience",
           "length_slices", "short_schedule", "cooled", "check_length", "combine", "ShortPair", "compare_ends",
           "short_verdict", "cool_verdict", "reach_best", "beat_best", "hold_end", "spike_verdict"]

logger = logging.getLogger(__name__)

#: For an accuracy, the tolerance also counts this many of its smallest steps on the slice (the
#: measurement's grain: an item, a token or a label, :meth:`~ignite_seg.engine.scoring.Scorer.perf_grain`).
LENGTH_STEPS = 2
#: A run stops once its perf has stayed below its best (less the tolerance) for this fraction of its
#: epochs, at least :data:`STOP_PATIENCE_MIN` epochs.
STOP_PATIENCE_FRAC = 0.1
STOP_PATIENCE_MIN = 3
#: When every run fell, the cut's first rival is the recipe with both learning rates divided by this (half a decade,
#: the recipe check's back-off) at the planned epochs.
COOL_FACTOR = GUARD_BACKOFF


def stop_patience(epochs: int) -> int:
    """Epochs a length run's perf must stay fallen before it stops early."""
    return max(STOP_PATIENCE_MIN, int(math.ceil(STOP_PATIENCE_FRAC * epochs)))


def length_slices(n_train: int, first: Sequence[int], runs: int, seed: int) -> list[tuple[int, ...]]:
    """The held-out slice of each length run: the tuner's own, then slices as large drawn from the items
    not yet held out (from the whole set once too few remain), each sorted."""
    m = len(first)
    slices = [tuple(int(i) for i in first)]
    used = set(slices[0])
    for r in range(1, runs):
        rng = np.random.default_rng(derive_seed(seed, "length-holdout", r))
        free = np.setdiff1d(np.arange(n_train), np.fromiter(used, dtype=np.int64, count=len(used)))
        pool = free if free.size >= m and n_train - m >= 2 else np.arange(n_train)
        chosen = np.sort(rng.choice(pool, size=min(m, pool.size), replace=False))
        slices.append(tuple(int(i) for i in chosen))
        used.update(slices[-1])
    return slices


def short_schedule(hp: FixedHyperparameters, frac: float, min_epochs: int) -> FixedHyperparameters | None:
    """The recipe compressed to ``frac`` of its epochs (at least ``min_epochs``): its cycles and warmup scaled in
    proportion, so the schedule keeps its shape over fewer epochs; ``None`` when that is not shorter.

    Example:
        >>> hp = FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=16, epochs=15, cycle_size_epochs=15.0,
        ...                           schedule="cosine", warmup_epochs=1.5)
        >>> short = short_schedule(hp, 1 / 3, min_epochs=5)
        >>> short.epochs, short.cycle_size_epochs, short.warmup_epochs
        (5, 5.0, 0.5)
        >>> short_schedule(hp, 1 / 3, min_epochs=15) is None
        True
    """
    epochs = max(min_epochs, int(round(frac * hp.epochs)))
    if frac <= 0 or epochs >= hp.epochs:
        return None
    f = epochs / hp.epochs
    return dataclasses.replace(hp, epochs=epochs, cycle_size_epochs=hp.cycle_size_epochs * f,
                               warmup_epochs=hp.warmup_epochs * f,
                               warmup_steps=max(2, int(round(hp.warmup_steps * f))) if hp.warmup_steps else 0)


def cooled(hp: FixedHyperparameters, factor: float = COOL_FACTOR) -> FixedHyperparameters:
    """The recipe with both learning rates divided by ``factor``: the same schedule, epochs and batch size.

    Example:
        >>> hp = FixedHyperparameters(lr_start=0.3, lr_end=1.0, batch_size=16, epochs=20, cycle_size_epochs=20.0)
        >>> c = cooled(hp, 10.0)
        >>> round(c.lr_start, 6), round(c.lr_end, 6), c.epochs
        (0.03, 0.1, 20)
    """
    return dataclasses.replace(hp, lr_start=hp.lr_start / factor, lr_end=hp.lr_end / factor)


def check_length(t: TuneRun, hp: FixedHyperparameters) -> FixedHyperparameters:
    """Run the length check on ``hp`` (see the module doc); ``hp`` with its epochs cut, the shorter schedule, or
    ``hp``."""
    s = t.s
    if s.length_runs == 0 or hp.epochs <= s.min_epochs:
        why = ("length_runs=0" if s.length_runs == 0
               else f"the trials train min_epochs={s.min_epochs} epochs already")
        t.misc.record(length=LengthStep(runs=0, epochs_planned=hp.epochs, epochs=hp.epochs, cut=False,
                                        decided_by=f"not run: {why}"))
        return hp
    runs = _LengthRuns(t, hp, short_schedule(hp, s.length_short, s.min_epochs))
    logger.info("length check: up to %d run(s) of the recipe's %d epochs, one after the other, each scoring its own "
                "held-out slice of %d items after every epoch (a run stops once its perf has clearly fallen; the next "
                "runs only when it fell)%s", s.length_runs, hp.epochs, len(runs.slices[0]),
                "" if runs.short_hp is None else f"; beside the first, the recipe compressed to {runs.short_hp.epochs} "
                f"epochs on the same slice (on up to {s.length_short_runs} slices, each only when it did better on the "
                "ones before)")
    epochs, why = runs.full_runs()
    won, against, short, cool_won, cool_because, dipped = False, None, runs.short_hp, None, None, ""
    spike = runs.spike()
    if spike is not None:  # the first run dipped and recovered: the cooler recipe, if it ends as high, is safer
        pair = next(iter(runs.rival_pairs("cool", 1, lambda k, full, r: hold_end(full, r))), None)
        cool_won, cool_because = pair is not None and pair.better, "spiked"
        dipped = "; " + spike_verdict(spike, pair, hp.epochs, cool_won, COOL_FACTOR)
        why += dipped
    if short is not None and epochs == hp.epochs and not cool_won:  # kept: the shorter must end above the full's end
        pairs, against = runs.rival_pairs("short", s.length_short_runs, None), "end"
        won = len(pairs) == s.length_short_runs and all(p.better for p in pairs)
        # further full runs may have been made for the pairs: the verdict says every run
        why = combine(runs.judged, hp.epochs)[1] + dipped + "; " + short_verdict(pairs, against, hp.epochs, short.epochs,
                                                                                 won)
    elif epochs < hp.epochs and len(runs.judged) == s.length_runs:
        # every run fell: too hot rather than too long? the cooler recipe is taken when it ends clearly above their
        # best at the planned epochs; else the shorter when it reaches that best in fewer epochs than the cut
        cool = runs.rival_pairs("cool", s.length_runs, lambda k, full, r: beat_best(full, r, runs.short_on(k)),
                                beside=("short",))
        cool_won, cool_because = len(cool) == s.length_runs and all(p.better for p in cool), "fell"
        why += "; " + cool_verdict(cool, hp.epochs, cool_won, COOL_FACTOR)
        if not cool_won and short is not None and short.epochs < epochs:
            pairs, against = runs.rival_pairs("short", s.length_runs, lambda k, full, r: reach_best(full, r)), "best"
            won = len(pairs) == s.length_runs and all(p.better for p in pairs)
            why += "; " + short_verdict(pairs, against, epochs, short.epochs, won)
    epochs = short.epochs if won and short is not None else hp.epochs if cool_won else epochs
    t.misc.record(length=runs.record(epochs, why, won, against, cool_won, cool_because))
    (logger.warning if epochs < hp.epochs or cool_won or not runs.judged else logger.info)("length check: %s", why)
    if cool_won:
        return runs.cool_hp
    if won and runs.short_hp is not None:
        return runs.short_hp
    if epochs == hp.epochs:
        return hp
    return dataclasses.replace(hp, epochs=epochs, cycle_size_epochs=hp.cycle_size_epochs * epochs / hp.epochs)


class _LengthRuns:
    """The check's runs, made on demand: full-length run ``k`` on slice ``k`` (``tasks``: ``length_runs`` for the fall
    rule, as many more as the shorter schedule's comparison may ask) and each rival on the same slice (``rivals``:
    ``"short"``, the shorter schedule; ``"cool"``, the cooler recipe); what each returned (``ordered``, ``rival_done``),
    and each usable full run's verdict (``judged``)."""

    def __init__(self, t: TuneRun, hp: FixedHyperparameters, short_hp: FixedHyperparameters | None) -> None:
        s = t.s
        self.t, self.hp, self.short_hp, self.cool_hp = t, hp, short_hp, cooled(hp)
        slices = max(s.length_runs, s.length_short_runs if short_hp is not None else 0)
        self.slices = length_slices(t.n_train, t.recipe.holdout, slices, t.seed)
        self.patience = stop_patience(hp.epochs)
        self.tasks = [LengthTask(r, dataclasses.replace(t.recipe, holdout=sl), hp, derive_seed(t.seed, "length", r),
                                 stop_rel_tol=s.length_tol, stop_steps=LENGTH_STEPS, stop_patience=self.patience)
                      for r, sl in enumerate(self.slices)]
        rivals = {"short": short_hp, "cool": self.cool_hp}
        self.rivals = {kind: [
            dataclasses.replace(task, key=(kind, r), hparams=rival, seed=derive_seed(t.seed, f"length-{kind}", r),
                                stop_patience=rival.epochs + 1)  # never stops: its end is what counts
            for r, task in enumerate(self.tasks)] for kind, rival in rivals.items() if rival is not None}
        self.ordered: list[LengthResult] = []
        self.rival_done: dict[str, list[LengthResult]] = {kind: [] for kind in self.rivals}
        self.judged: list[LengthDecision] = []

    def full_runs(self) -> tuple[int, str]:
        """The full-length runs, one after the other until one did not fall; the first beside the shorter schedule
        (most tasks need no second run, and the second worker would idle). The epochs by :func:`combine`."""
        for k in range(self.t.s.length_runs):  # the trials are cut only when every run fell: one that did not settles it
            self.run(k, *(("short",) if "short" in self.rivals and k == 0 else ()))
            if self.judged and not self.judged[-1].cut:
                break
        return combine(self.judged, self.hp.epochs)

    def rival_pairs(self, kind: str, slices: int,
                    against_best: Callable[[int, LengthDecision, LengthResult], ShortPair] | None,
                    beside: tuple[str, ...] = ()) -> list[ShortPair]:
        """The first ``slices`` slices' runs of rival ``kind`` against their full runs, slice after slice while the
        rival wins: their ends (:func:`compare_ends`), or (every full run fell, each is usable) the run's best by
        ``against_best(k, verdict, rival run)`` (:func:`reach_best`, :func:`beat_best`), with the rivals ``beside``
        run on the same slice first (side by side). A pair is made only when the slices before favoured the rival."""
        pairs: list[ShortPair] = []
        for k in range(slices):
            self.run(k, kind, *(b for b in beside if b in self.rivals))
            done = self.rival_done[kind][k]
            pairs.append(compare_ends(self.ordered[k], done) if against_best is None
                         else against_best(k, self.judged[k], done))
            if not pairs[-1].better:
                break
        return pairs

    def spike(self) -> LengthDecision | None:
        """The first run's verdict when its perf dipped by more than the tolerance and recovered
        (:attr:`~.length_verdicts.LengthDecision.spiked`) on a schedule that decays from its peak (:data:`DECAYING`);
        else ``None``."""
        first = self.ordered[0] if self.ordered else None
        if first is None or not first.usable or self.hp.schedule not in DECAYING or not self.judged[0].spiked:
            return None
        return self.judged[0]

    def short_on(self, k: int) -> LengthResult | None:
        """The shorter schedule's run on slice ``k``, when one was made."""
        shorts = self.rival_done.get("short", [])
        return shorts[k] if k < len(shorts) else None

    def run(self, k: int, *rivals: str) -> None:
        """Full run ``k`` and the ``rivals`` on its slice: those not run yet, side by side (on two workers where
        there are two)."""
        todo: list[tuple[LengthTask, str | None]] = [(self.tasks[k], None)] if k == len(self.ordered) else []
        extra = [kind for kind in rivals if k == len(self.rival_done[kind])]
        todo += [(self.rivals[kind][k], kind) for kind in extra]
        if not todo:
            return
        words = " and ".join({"short": "its shorter schedule", "cool": "its cooler recipe"}[kind] for kind in extra)
        what = f" and {words}" if len(todo) > len(extra) and extra else f", {words}" if extra else ""
        done = run_tasks(self.t, run_length, [task for task, _ in todo],
                         f"tune: length check (run {k + 1} of up to {len(self.tasks)}{what})", "length",
                         lambda task, err: LengthResult(task.key, "failed", error=err))
        for task, kind in todo:
            r = done[task.key]
            (self.ordered if kind is None else self.rival_done[kind]).append(r)
            if not r.usable:
                logger.warning("length check %s %d %s: %s", "run" if kind is None else f"{kind} run", k + 1, r.status,
                               last_line(r.error) if r.error else "its held-out perf became non-finite")
            elif kind is None:
                s = self.t.s
                self.judged.append(judge_length(r.arrays["perfs"], self.hp.epochs, s.min_epochs, s.length_tol,
                                                r.abs_tol))

    def record(self, epochs: int, why: str, won: bool, against: str | None, cool_won: bool | None,
               cool_because: str | None) -> LengthStep:
        """``steps.length`` of ``misc.json``: every run's curves and verdict, and the decision."""
        curves = lambda runs, key: [r.arrays.get(key, np.zeros(0)).tolist() for r in runs]  # noqa: E731
        shorts, cools = self.rival_done.get("short", []), self.rival_done["cool"]
        return LengthStep(
            runs=len(self.ordered), epochs_planned=self.hp.epochs, epochs=epochs, cut=epochs < self.hp.epochs,
            slice_items=[len(sl) for sl in self.slices[:len(self.ordered)]], rel_tol=self.t.s.length_tol,
            item_tol=[r.abs_tol for r in self.ordered], stop_patience=self.patience,
            run_epochs=[r.epochs for r in self.ordered], run_status=[r.status for r in self.ordered],
            perfs=curves(self.ordered, "perfs"), losses=curves(self.ordered, "losses"),
            run_decisions=[d.reason for d in self.judged], decided_by=why,
            short_epochs=self.short_hp.epochs if self.short_hp is not None else None,
            short_perfs=curves(shorts, "perfs") if shorts else None,
            short_status=[r.status for r in shorts] if shorts else None,
            short_won=won if self.short_hp is not None else None, short_against=against,
            short_slices=self.t.s.length_short_runs if against == "end" else None,
            cool_factor=COOL_FACTOR if cools else None, cool_perfs=curves(cools, "perfs") if cools else None,
            cool_status=[r.status for r in cools] if cools else None, cool_won=cool_won,
            cool_because=cool_because if cools else None,
            lr_start=self.cool_hp.lr_start if cool_won else None, lr_end=self.cool_hp.lr_end if cool_won else None,
        )

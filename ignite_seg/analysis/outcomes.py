"""How the completed trials ended: the best checkpoint of each (``model_best.pt``) and the early stops.

:func:`outcomes_info` reads the trials' ``result.json`` records through their storage records
(:class:`~ignite_seg.storage.records.TrialResult`: its ``best`` and ``stop``); the summary's lines and table and the figures' marks
are drawn from the :class:`Outcomes` it returns. A run without a best checkpoint and without user
handlers gives no line at all.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from ..engine.constant_output import at_constant
from ..storage.records import RunRecord, TrialResult
from ..storage.result_keys import Mode, ResultKeys
from ._mpl import PERF_LABELS, fmt

__all__ = ["TrialBest", "Outcomes", "outcomes_info", "best_label", "epoch_text", "outcome_lines", "outcome_table",
           "outcomes_json", "TABLE_UP_TO", "BestMarks", "best_marks", "Rise", "loss_rise", "rising_trials", "rise_lines",
           "Dead", "ended_at_constant", "dead_trials", "had_learned", "dead_advice", "dead_lines", "Peak", "PEAK_TOL",
           "val_peak", "peaked_trials", "peak_lines"]

#: Up to this many completed trials the summary lists each in a table; above, condensed lines.
TABLE_UP_TO = 8


class TrialBest(NamedTuple):
    """Where one trial's best checkpoint was taken: the fractional epoch and the value measured there."""

    trial_id: int
    epoch: float
    value: float


class Outcomes(NamedTuple):
    """The completed trials (ids), their best checkpoints by ``metric`` in direction ``mode`` (none:
    the run kept no best checkpoint), the early stops ``(trial id, epoch)`` and how many user handlers
    the run attached."""

    completed: tuple[int, ...] = ()
    metric: str | None = None
    mode: Mode | None = None
    best: tuple[TrialBest, ...] = ()
    stops: tuple[tuple[int, float], ...] = ()
    handlers: int = 0
    #: the validation sets (key suffixes ``val``, ``val_<name>``) whose mean chose the best; empty: the primary one
    parts: tuple[str, ...] = ()


def outcomes_info(run: RunRecord | Mapping[str, Any], records: Sequence[TrialResult | Mapping[str, Any]]) -> Outcomes:
    """The completed trials' best checkpoints and early stops, in trial order (pure). ``run`` and
    ``records`` are the files' records (or mappings of their keys).

    Example:
        >>> o = outcomes_info({}, [{"format": 2, "trial_id": 1, "status": "completed", "stop": {"epoch": 7.0}}])
        >>> o.stops
        ((1, 7.0),)
    """
    metric, mode = None, None
    parts: tuple[str, ...] = ()
    completed, best, stops = [], [], []
    for rec in sorted((TrialResult.coerce(r) for r in records), key=lambda r: r.trial_id):
        if not rec.completed:
            continue
        tid = rec.trial_id
        completed.append(tid)
        b = rec.best
        if b is not None:
            metric, mode, parts = b.metric, b.mode, b.parts
            best.append(TrialBest(tid, b.epoch, b.value))
        s = rec.stop
        if s is not None and s.epoch is not None:
            stops.append((tid, s.epoch))
    return Outcomes(tuple(completed), metric, mode, tuple(best), tuple(stops), len(RunRecord.coerce(run).handlers),
                    parts)


def best_label(metric: str | None, keys: ResultKeys, accuracy_style: str = "classification",
               parts: tuple[str, ...] = ()) -> str:
    """How the summary and the figures name the best checkpoint's metric: on the primary validation set,
    or the mean over the sets ``parts`` (``train(best_over=...)``).

    Example:
        >>> keys = ResultKeys(val_names=("clean", "noisy"))
        >>> best_label("loss", keys), best_label("loss", keys, parts=("val", "val_noisy"))
        ('val (clean) loss', 'mean loss over val (clean), noisy')
    """
    name = {"loss": "loss", "perf": PERF_LABELS.get(accuracy_style, "perf")}.get(metric or "", metric or "")
    if parts:
        return f"mean {name} over {', '.join(keys.label(p) for p in parts)}"
    return f"{keys.label('val')} {name}"


def epoch_text(epoch: float) -> str:
    """A fractional epoch as a reader writes it: ``12``, ``7.5``, ``3.25``."""
    return f"{epoch:.2f}".rstrip("0").rstrip(".")


def _epochs(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return f"epoch {epoch_text(lo)}" if lo == hi else f"epochs {epoch_text(lo)}–{epoch_text(hi)}"


def _best_line(o: Outcomes, label: str) -> str:
    head = f"- **best checkpoint** (`model_best.pt`) by {label} ({o.mode}): "
    if len(o.best) == 1:
        b = o.best[0]
        return head + f"trial {b.trial_id} at epoch {epoch_text(b.epoch)}, value {fmt(b.value, 4)}"
    values = np.array([b.value for b in o.best], dtype=np.float64)
    fin = values[np.isfinite(values)]
    spread = (f"value mean {fmt(float(fin.mean()), 4)} [min {fmt(float(fin.min()), 4)}, max {fmt(float(fin.max()), 4)}]"
              if fin.size else "no finite value")
    line = head + f"{_epochs([b.epoch for b in o.best])} across {len(o.best)} trials, {spread}"
    if len(o.completed) > TABLE_UP_TO and fin.size:  # no table below: name the best trial
        k = int(np.nanargmin(values) if o.mode == "min" else np.nanargmax(values))
        b = o.best[k]
        line += f"; best trial {b.trial_id} (epoch {epoch_text(b.epoch)}, value {fmt(b.value, 4)})"
    return line


def _stop_line(o: Outcomes) -> str:
    n = len(o.completed)
    if not o.stops:
        who = "the one completed trial was not" if n == 1 else f"none of the {n} completed trials was"
        return f"- **early stops**: {who} stopped early by a handler"
    listed = _listed(o.stops, lambda stop: f"trial {stop[0]}: epoch {epoch_text(stop[1])}")
    return f"- **early stops**: {len(o.stops)} of {n} completed trials stopped early by a handler ({listed})"


def outcome_lines(o: Outcomes, label: str) -> list[str]:
    """The summary's bullets: the best checkpoint (when the run kept one) and the early stops (when the
    run attached handlers or a trial stopped); none for a run with neither."""
    out = [_best_line(o, label)] if o.best else []
    if o.stops or o.handlers:
        out.append(_stop_line(o))
    return out


def outcome_table(o: Outcomes, label: str) -> list[str]:
    """A row per completed trial (best epoch and value, the epoch it stopped at) when the run kept a best
    checkpoint and has 2 to :data:`TABLE_UP_TO` completed trials; otherwise no line."""
    if not o.best or not 1 < len(o.completed) <= TABLE_UP_TO:
        return []
    best = {b.trial_id: b for b in o.best}
    stops = dict(o.stops)
    head = ["trial", "best epoch", f"best {label}"] + (["stopped early at epoch"] if stops else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for tid in o.completed:
        b = best.get(tid)
        row = [str(tid), epoch_text(b.epoch) if b else "n/a", fmt(b.value, 4) if b else "n/a"]
        if stops:
            row.append(epoch_text(stops[tid]) if tid in stops else "—")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def outcomes_json(o: Outcomes) -> dict[str, Any]:
    """``summary.json``'s ``best_checkpoint`` and ``stopped_early`` (each only when the run has it)."""
    out: dict[str, Any] = {}
    if o.best:
        out["best_checkpoint"] = {"metric": o.metric, "mode": o.mode, "over": list(o.parts) or ["val"],
                                  "trials": [b._asdict() for b in o.best]}
    if o.stops or o.handlers:
        out["stopped_early"] = [{"trial_id": t, "epoch": e} for t, e in o.stops]
    return out


class BestMarks(NamedTuple):
    """Each trial's best checkpoint, as the through-time figure of its metric marks it: the ``metric``
    (``loss``, ``perf`` or a custom metric), its direction, its label and a point per trial."""

    metric: str
    mode: Mode
    label: str
    trial_ids: np.ndarray
    epochs: np.ndarray
    values: np.ndarray


def best_marks(o: Outcomes, label: str) -> BestMarks | None:
    """The marks of :class:`Outcomes`' best checkpoints; ``None`` when the run kept none."""
    if not o.best or o.metric is None or o.mode is None:
        return None
    return BestMarks(o.metric, o.mode, label, np.array([b.trial_id for b in o.best], dtype=np.int64),
                     np.array([b.epoch for b in o.best], dtype=np.float64),
                     np.array([b.value for b in o.best], dtype=np.float64))


class Rise(NamedTuple):
    """A trial whose training loss ended above where it began (its first and last through-time snapshots)."""

    trial_id: int
    first: float
    last: float


def loss_rise(losses_train: Any) -> tuple[float, float] | None:
    """``(first, last)`` finite snapshots of a trial's training loss when the last is above the first (the
    recipe made the model worse than its initialisation: issue 25's trials went from 2.3 to ~40); else None.

    Example:
        >>> loss_rise([2.3, 5.0, 40.0])
        (2.3, 40.0)
        >>> loss_rise([2.3, 0.1]) is None
        True
    """
    y = np.asarray(losses_train, dtype=np.float64).ravel()
    y = y[np.isfinite(y)]
    if y.size < 2 or not y[-1] > y[0]:
        return None
    return float(y[0]), float(y[-1])


def rising_trials(throughtimes: Mapping[str, Any] | None) -> tuple[Rise, ...]:
    """The trials of ``throughtimes.npz`` (``trial_ids``, ``losses_train`` (T, S)) whose train loss rose."""
    return tuple(Rise(tid, *r) for tid, r in _per_trial(throughtimes, "losses_train", loss_rise))


def _per_trial(throughtimes: Mapping[str, Any] | None, key: str, judge: Any) -> list[tuple[int, Any]]:
    """``(trial id, judge(row))`` for each trial's row of ``throughtimes[key]`` (T, S) where it is not None."""
    if not throughtimes or key not in throughtimes or "trial_ids" not in throughtimes:
        return []
    found = ((int(tid), judge(row)) for tid, row in zip(np.asarray(throughtimes["trial_ids"]).tolist(),
                                                        np.atleast_2d(throughtimes[key])))
    return [(tid, v) for tid, v in found if v is not None]


def _listed(items: Sequence[Any], describe: Any) -> str:
    """Up to :data:`TABLE_UP_TO` of ``items`` described, then how many more summary.json holds."""
    more = f", … ({len(items) - TABLE_UP_TO} more in summary.json)" if len(items) > TABLE_UP_TO else ""
    return ", ".join(describe(i) for i in items[:TABLE_UP_TO]) + more


def rise_lines(rises: Sequence[Rise]) -> list[str]:
    """The summary's warning about trials whose training loss rose (no line when none did)."""
    if not rises:
        return []
    listed = _listed(rises, lambda r: f"trial {r.trial_id}: {fmt(r.first, 4)} -> {fmt(r.last, 4)}")
    return [f"- **warning — train loss rose**: {len(rises)} trial(s) ended with a higher training loss than they "
            f"began with ({listed}): the recipe did not train them; check the learning rates"]


class Dead(NamedTuple):
    """A trial whose training loss ended no better than the best constant output's (``constant``, result.json's
    ``constant_loss_train``): it learned nothing from its inputs; ``lowest`` at ``lowest_epoch``: the lowest snapshot."""

    trial_id: int
    constant: float
    lowest: float
    lowest_epoch: float
    last: float


def ended_at_constant(epochs: Any, losses_train: Any, constant: float | None) -> tuple[float, float, float] | None:
    """``(lowest, its epoch, last)`` of a trial's training-loss snapshots when the last finite one is no better than
    the best constant output's ``constant`` (:func:`~ignite_seg.engine.constant_output.at_constant`) and not above
    the first (that trial's loss rose: :func:`loss_rise`); else None.

    A network that learned and then lost it all ends there: plain SGD on an unnormalised CNN (bench session 20,
    ``smooth_digits``: 2 of 24 seeds fell from ~0.05 back to the class shares' entropy, 2.30, for good).

    Example:
        >>> ended_at_constant([0, 1, 2, 3], [2.35, 0.05, 2.30, 2.30], 2.302)
        (0.05, 1.0, 2.3)
        >>> ended_at_constant([0, 1, 2], [2.35, 0.05, 0.04], 2.302) is None
        True
    """
    y = np.asarray(losses_train, dtype=np.float64).ravel()
    e = np.asarray(epochs, dtype=np.float64).ravel()
    e = np.pad(e[: y.size], (0, max(0, y.size - e.size)), constant_values=np.nan)
    ok = np.isfinite(y)
    y, e = y[ok], e[ok]
    if y.size < 2 or y[-1] > y[0] or not at_constant(float(y[-1]), constant):
        return None
    k = int(np.argmin(y))
    return float(y[k]), float(e[k]), float(y[-1])


def dead_trials(throughtimes: Mapping[str, Any] | None, records: Sequence[TrialResult]) -> tuple[Dead, ...]:
    """The trials of ``throughtimes.npz`` whose training loss ended at their record's constant output's loss."""
    constants = {r.trial_id: r.constant_loss_train for r in records}
    epochs = (throughtimes or {}).get("epochs", ())
    out = []
    for tid, row in _per_trial(throughtimes, "losses_train", lambda row: row):
        c = constants.get(tid)  # None (an older folder, an output it could not measure): never a hit
        hit = ended_at_constant(epochs, row, c)
        if hit is not None and c is not None:
            out.append(Dead(tid, float(c), *hit))
    return tuple(out)


def had_learned(d: Dead) -> bool:
    """Whether a dead trial's training loss had been clearly below the constant's before it ended there."""
    return not at_constant(d.lowest, d.constant) and bool(np.isfinite(d.lowest_epoch))


#: What to do about a trial that had learned and lost it, and one that never learned (the log's and the summary's).
SPIKE_ADVICE = ("a loss spike can undo training (plain SGD on a network without normalisation): lower the learning "
                "rates, clip the gradients (`grad_clip_norm`), or add trials with other seeds "
                "(`train(..., is_continuation=True, trials=N)`)")
BLIND_ADVICE = "check that the inputs reach the model (and differ between items) and that the learning rates train it"


def dead_advice(d: Dead) -> str:
    """What one dead trial's snapshots say, and what to do (the caller's log)."""
    if had_learned(d):
        return f"it had reached {fmt(d.lowest, 4)} at epoch {d.lowest_epoch:.0f} and lost it: {SPIKE_ADVICE}"
    return f"it never got clearly below it: {BLIND_ADVICE}"


def dead_lines(dead: Sequence[Dead]) -> list[str]:
    """The summary's warning about trials that learned nothing from their inputs (no line when none did)."""
    if not dead:
        return []

    def describe(d: Dead) -> str:
        had = f"; it had reached {fmt(d.lowest, 4)} at epoch {d.lowest_epoch:.0f}" if had_learned(d) else ""
        return f"trial {d.trial_id}: {fmt(d.last, 4)} (constant {fmt(d.constant, 4)}{had})"

    learned = sum(had_learned(d) for d in dead)
    if learned == len(dead):
        advice = f"they had learned and lost it: {SPIKE_ADVICE}"
    elif learned == 0:
        advice = f"they never got clearly below it: {BLIND_ADVICE}"
    else:
        advice = f"those that had learned lost it: {SPIKE_ADVICE}; those that never got clearly below it: {BLIND_ADVICE}"
    return [f"- **warning — learned nothing from the inputs**: {len(dead)} trial(s) ended with a training loss no "
            f"better than the best constant output's, one output for every item ({_listed(dead, describe)}): "
            + advice]


#: A trial's smoothed validation perf must end more than this fraction of its best below that best, and
#: have had the best in the first ``PEAK_BEFORE`` of the run, to be flagged as having peaked early.
PEAK_TOL = 0.02
PEAK_BEFORE = 0.8


class Peak(NamedTuple):
    """A trial whose validation perf peaked well before its end and ended clearly below that peak."""

    trial_id: int
    best_epoch: float
    best: float
    last_epoch: float
    last: float


def val_peak(epochs: Any, perfs_val: Any) -> tuple[float, float, float, float] | None:
    """``(best epoch, best, last epoch, last)`` of a trial's through-time validation perf (higher is better)
    when it peaked early: its moving mean (over a twentieth of the snapshots, at least 3) was best before
    :data:`PEAK_BEFORE` of the run and ends more than :data:`PEAK_TOL` of the best below it — the trial
    trained longer than the data supports (overfitting: session 13's diabetes trials peaked at ~20 of
    100 epochs, 0.70 -> 0.64); else None.

    Example:
        >>> e = np.arange(1, 101, dtype=float)
        >>> best_epoch, best, last_epoch, last = val_peak(e, 0.7 - 0.001 * np.abs(e - 20))
        >>> int(best_epoch), int(last_epoch), round(last, 2)
        (20, 100, 0.62)
        >>> val_peak(e, 0.7 - 0.3 / e) is None  # still improving at the end
        True
    """
    e = np.asarray(epochs, dtype=np.float64).ravel()
    y = np.asarray(perfs_val, dtype=np.float64).ravel()[: e.size]
    ok = np.isfinite(y) & np.isfinite(e[: y.size])
    e, y = e[: y.size][ok], y[ok]
    w = max(3, y.size // 20)
    if y.size < 2 * w:
        return None
    sm = np.convolve(y, np.ones(w) / w, mode="valid")
    at = e[w // 2 : w // 2 + sm.size]
    k = int(np.argmax(sm))
    if not (sm[k] - sm[-1] > PEAK_TOL * abs(sm[k]) and at[k] - e[0] <= PEAK_BEFORE * (e[-1] - e[0])):
        return None
    return float(at[k]), float(sm[k]), float(e[-1]), float(sm[-1])


def peaked_trials(throughtimes: Mapping[str, Any] | None, dead: Sequence[Dead] = ()) -> tuple[Peak, ...]:
    """The trials of ``throughtimes.npz`` (``trial_ids``, ``epochs`` (S,), ``perfs_val`` (T, S)) that peaked early,
    but those ``dead`` (a constant output's perf moves with its guess, not with overfitting)."""
    if not throughtimes or "epochs" not in throughtimes:
        return ()
    skip = {d.trial_id for d in dead}
    return tuple(Peak(tid, *p) for tid, p in _per_trial(throughtimes, "perfs_val",
                                                      lambda row: val_peak(throughtimes["epochs"], row))
                 if tid not in skip)


def peak_lines(peaks: Sequence[Peak]) -> list[str]:
    """The summary's warning about trials whose validation perf peaked early (no line when none did)."""
    if not peaks:
        return []
    listed = _listed(peaks, lambda p: f"trial {p.trial_id}: {fmt(p.best, 4)} at epoch {p.best_epoch:.0f} -> "
                                      f"{fmt(p.last, 4)} at {p.last_epoch:.0f}")
    return [f"- **warning — validation perf peaked early**: {len(peaks)} trial(s) ended clearly below their best "
            f"({listed}): they trained longer than this data supports (overfitting); fewer epochs would do "
            "better (the tuner's `max_epochs` / `train_examples`, or `epochs` of fixed hyperparameters)"]

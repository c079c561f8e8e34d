"""Captions of the report's figures, written from the same info records the figures are drawn from.

Each ``*_caption(info)`` is pure and says what the figure draws for that info (how many repeats or
trials, which band: a min–max spread or a 95% CI, and in which space); the figures' records
(:mod:`.figures`) name them as their ``caption_of``.
"""
from __future__ import annotations

from ..engine.schedule_text import describe_schedule
from ._mpl import band_phrase, count_text, fmt
from .curves import MINMAX_BELOW, ThroughTimeInfo
from .lr import LRSweepInfo, ScheduleInfo
from .metrics import MetricsInfo
from .stats import SPACE_NOTES

__all__ = ["band_phrase", "lr_caption", "schedule_caption", "throughtime_caption", "stops_phrase", "best_phrase",
           "metrics_caption", "MINMAX_BELOW"]

def schedule_caption(info: ScheduleInfo) -> str:
    """The schedule the trials used, in words, schedule and warmup included."""
    return describe_schedule({"lr_start": info.lr_start, "lr_end": info.lr_end,
                              "cycle_size_epochs": info.cycle_size_epochs, "epochs": int(round(info.n_epochs)),
                              "schedule": info.schedule, "warmup_epochs": info.warmup_epochs})


def lr_caption(info: LRSweepInfo) -> str:
    n = info.n_repeats
    band = f"band: {band_phrase(n, 'repeats', True)}" if n > 1 else "one repeat: no band"
    constant = (" Grey dashed: the loss of the best constant output (one output for every item): a floor there "
                "learned nothing from the inputs." if info.constant_loss is not None else "")
    return (f"{info.loss_label.capitalize()} and perf against the LR (log scale) for each repeat, with their mean; "
            f"{band}. Green: the chosen range; red dotted: divergence.{constant} Bottom: the derivatives used to "
            "choose the range.")


def throughtime_caption(info: ThroughTimeInfo) -> str:
    n = int(info.trial_ids.size)
    nt = count_text(info.counts)
    if n < 2:
        band = "one trial: no band"
    elif n < MINMAX_BELOW:
        band = f"band: {band_phrase(nt, 'trials', True)}"
    else:
        band = (f"band: {band_phrase(nt, 'trials', False)} across trials: losses' {SPACE_NOTES['log']}, "
                f"perf's {SPACE_NOTES['unit']}")
    more = "; every other named validation set (dashed): its mean and band" if info.more_val else ""
    constant = (" Grey dashed: the training loss of the best constant output (one output for every item, "
                f"{fmt(info.constant_train)}): a training curve on it learned nothing from its inputs."
                if info.constant_train is not None else "")
    return (f"Loss and perf on fixed train/val subsets: each trial (thin) and their mean; {band}{more}."
            + constant + stops_phrase(info.stops, n) + best_phrase(info))


def stops_phrase(stops: tuple[tuple[int, float], ...], n: int) -> str:
    """What the figure says of the trials that stopped early (nothing when none did)."""
    if not stops:
        return ""
    need = 2 if n < MINMAX_BELOW else MINMAX_BELOW
    return (f" Dotted vertical lines: where {len(stops)} of {n} trials stopped early; later points average fewer "
            f"trials (the legends' N), the mean is drawn where at least 2 remain and the band where {need} do.")


def best_phrase(info: ThroughTimeInfo | MetricsInfo) -> str:
    """What the stars mark (nothing when the run kept no best checkpoint, or chose it by a metric this
    figure does not draw)."""
    b = info.best
    drawn = ("loss", "perf") if isinstance(info, ThroughTimeInfo) else tuple(m.name for m in info.metrics)
    if b is None or b.metric not in drawn:
        return ""
    who = "each trial's best checkpoint" if b.trial_ids.size > 1 else "the best checkpoint"
    return (f" Stars on the {b.metric} panel: {who} (model_best.pt) by {b.label} ({b.mode}), at its epoch and "
            "the value measured there.")


def metrics_caption(info: MetricsInfo) -> str:
    n = int(info.trial_ids.size)
    stops = tuple(sorted({s for m in info.metrics for s in info.stops(m)}))
    band = "one trial: no band" if n < 2 else f"band: {band_phrase(count_text(info.counts(info.metrics[0])), 'trials', n < MINMAX_BELOW)}"
    return ("Each custom metric on the fixed train subset and on every validation set: each trial (thin) and their "
            f"mean; {band}; the title says which direction is better." + stops_phrase(stops, n) + best_phrase(info))

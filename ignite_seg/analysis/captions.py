"""Captions of the report's figures, written from the same info records the figures are drawn from.

Each ``*_caption(info)`` is pure and says what the figure draws for that info (how many repeats or
trials, which band: a min–max spread or a 95% CI, and in which space); the ``*_caption_of(folder)``
twins read the info as the builders do (:mod:`.view`).
"""
from __future__ import annotations

from .curves import MINMAX_BELOW, ThroughTimeInfo
from .lr import LRSweepInfo
from .stats import SPACE_NOTES

__all__ = ["band_phrase", "lr_caption", "throughtime_caption", "lr_caption_of", "throughtime_caption_of",
           "MINMAX_BELOW"]

def band_phrase(n: int, unit: str, minmax: bool) -> str:
    """What a band of ``n`` curves is, as the legend of :func:`._mpl.draw_band` writes it."""
    return f"min–max of {n} {unit}" if minmax else f"95% CI of the mean (N={n})"


def lr_caption(info: LRSweepInfo) -> str:
    n = info.n_repeats
    band = f"band: {band_phrase(n, 'repeats', True)}" if n > 1 else "one repeat: no band"
    return (f"{info.loss_label.capitalize()} and perf against the LR (log scale) for each repeat, with their mean; "
            f"{band}. Green: the chosen range; red dotted: divergence. Bottom: the derivatives used to choose "
            "the range.")


def throughtime_caption(info: ThroughTimeInfo) -> str:
    n = int(info.trial_ids.size)
    if n < 2:
        band = "one trial: no band"
    elif n < MINMAX_BELOW:
        band = f"band: {band_phrase(n, 'trials', True)}"
    else:
        band = (f"band: {band_phrase(n, 'trials', False)} across trials: losses' {SPACE_NOTES['log']}, "
                f"perf's {SPACE_NOTES['unit']}")
    more = "; every other named validation set (dashed): its mean and band" if info.more_val else ""
    return f"Loss and perf on fixed train/val subsets: each trial (thin) and their mean; {band}{more}."


def lr_caption_of(folder: str) -> str | None:
    from .view import lr_of

    info = lr_of(folder)
    return lr_caption(info) if info is not None else None


def throughtime_caption_of(folder: str) -> str | None:
    from .view import throughtime_of

    info = throughtime_of(folder)
    return throughtime_caption(info) if info is not None else None

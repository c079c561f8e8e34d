""":class:`FigureSpec`: everything the analysis needs of one PNG figure, in one keyword-only record.

A figure is one module (like Optuna's ``visualization/_intermediate_values.py``): its info record,
its extractor ``extract(snap) -> info | None`` (from a :class:`~.snapshot.Snapshot`; ``None``:
nothing to draw), its ``plot(info, dpi=) -> Figure`` and a ``FigureSpec`` naming them; then one
line in :data:`.products.PRODUCTS` (``png(module.FIGURE)``) makes it planned, built, skipped when
fresh and shown in ``index.html``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..storage.run_folder import RunFolder
    from .snapshot import Snapshot

__all__ = ["FigureSpec"]


@dataclass(frozen=True, kw_only=True)
class FigureSpec:
    """One PNG figure of the analysis.

    ``name``: the product's name (``lr_sweep_png``); ``file``: its output (``lr_sweep.png``);
    ``needs``: the flag of :class:`~ignite_seg.config.analysis.AnalysisSettings` that asks for it;
    ``inputs``: the files whose change redoes it; ``available``: whether the run has what it draws
    (``None``: whenever ``extract`` gives an info); ``title`` and ``caption``: the report's entry,
    ``caption_of(info)`` a caption written from the info (``None``: ``caption``); ``cost``: rough
    seconds on one core.
    """

    name: str
    file: str
    needs: str
    extract: Callable[[Snapshot], Any]
    plot: Callable[..., Figure]
    inputs: Callable[[RunFolder], list[Path]]
    title: str
    caption: str
    caption_of: Callable[[Any], str] | None = None
    available: Callable[[Snapshot], bool] | None = None
    cost: float = 0.5

    def is_available(self, snap: Snapshot) -> bool:
        return self.available(snap) if self.available is not None else self.extract(snap) is not None

    def caption_for(self, snap: Snapshot) -> str | None:
        """The caption written from the run's info (``None``: the entry's own ``caption``)."""
        if self.caption_of is None:
            return None
        info = self.extract(snap)
        return self.caption_of(info) if info is not None else None

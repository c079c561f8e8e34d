"""One figure = one module (info record, extractor, plot, FigureSpec) + one registry line; extractors get one
snapshot of the run, read once."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

import ignite_seg
from ignite_seg.analysis import products
from ignite_seg.analysis.figure_spec import FigureSpec
from ignite_seg.analysis.load import throughtimes_inputs
from ignite_seg.analysis.snapshot import Snapshot
from ignite_seg.storage.atomic import read_json

# -- a test figure, written as a figure module would be --------------------------------------------------------


class TrialCountInfo(NamedTuple):
    trial_ids: np.ndarray


def trial_count_of(snap: Snapshot) -> TrialCountInfo | None:
    tt = snap.throughtimes
    return TrialCountInfo(np.asarray(tt["trial_ids"])) if tt is not None else None


def plot_trial_count(info: TrialCountInfo, *, dpi: int = 100):
    from ignite_seg.analysis._mpl import new_figure

    fig = new_figure(3, 2, dpi)
    fig.add_subplot().bar(range(info.trial_ids.size), info.trial_ids + 1)
    return fig


FIGURE = FigureSpec(name="trial_count_png", file="trial_count.png", needs="text", extract=trial_count_of,
                    plot=plot_trial_count, inputs=throughtimes_inputs, title="Trials drawn",
                    caption="The trials.", caption_of=lambda info: f"{info.trial_ids.size} trials drawn.")

# -------------------------------------------------------------------------------------------------------------


def test_a_figure_registered_in_one_line_is_built_listed_and_captioned(tiny_run: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(products, "PRODUCTS", (*products.PRODUCTS, products.png(FIGURE)))  # the one line

    ignite_seg.analyze(tiny_run, analysis="text", cores=1)

    a = tiny_run / "analysis"
    assert (a / "trial_count.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (a / "index.html").read_text()
    assert 'src="trial_count.png"' in page and "Trials drawn" in page
    assert "3 trials drawn." in page and "The trials." not in page  # the caption from the info record
    assert "trial_count_png" in read_json(a / ".manifest.json")


def test_a_figure_with_nothing_to_draw_is_not_planned(tiny_run: Path, monkeypatch: pytest.MonkeyPatch):
    empty = FigureSpec(name="nothing_png", file="nothing.png", needs="text", extract=lambda snap: None,
                       plot=plot_trial_count, inputs=throughtimes_inputs, title="Nothing", caption="")
    monkeypatch.setattr(products, "PRODUCTS", (*products.PRODUCTS, products.png(empty)))

    ignite_seg.analyze(tiny_run, analysis="text", cores=1)

    assert not (tiny_run / "analysis" / "nothing.png").exists()
    assert "nothing_png" not in read_json(tiny_run / "analysis" / ".manifest.json")


def test_a_snapshot_reads_each_file_once_and_a_new_one_reads_it_again(tiny_run: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    from ignite_seg.analysis import snapshot

    reads: list[Path] = []
    real = snapshot.read_npz
    monkeypatch.setattr(snapshot, "read_npz", lambda p: reads.append(Path(p)) or real(p))
    snap = Snapshot(tiny_run)
    first = trial_count_of(snap)
    assert first is not None and trial_count_of(snap) is not None and snap.throughtimes is snap.throughtimes
    assert reads == [tiny_run / "throughtimes.npz"]
    trial_count_of(Snapshot(tiny_run))
    assert len(reads) == 2  # no cache across snapshots (a build task makes one)

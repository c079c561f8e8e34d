"""Damaged files found at a continuation are redone or named (issue 26, item 5): a truncated
weights or arrays file of a completed trial makes the trial run again (same seed, same bytes);
every reader of a damaged file raises a FolderError naming it."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from helpers import CE

import ignite_seg
from ignite_seg import FolderError

from .harness import BLOBS, MLP, small_run_kwargs, train_small_run

KW = small_run_kwargs()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    return train_small_run(tmp_path_factory.mktemp("run") / "current")


def _copy(finished_run: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "current"
    shutil.copytree(finished_run, folder)
    return folder


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("name", ["model.pt", "throughtime.npz", "model_init.pt"])
def test_a_completed_trial_with_a_truncated_file_is_run_again_to_the_same_bytes(finished_run, tmp_path, caplog, name):
    folder = _copy(finished_run, tmp_path)
    _truncate(folder / "trials" / "1" / name)
    with caplog.at_level(logging.WARNING, logger="ignite_seg"):
        result = ignite_seg.train(MLP, BLOBS, CE, folder=folder, trials=0, is_continuation=True, **KW)
    assert len(result.trials) == 2
    assert any(f"trials/1/{name}" in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    for f in ("model.pt", "model_init.pt", "throughtime.npz"):  # the rerun wrote the uninterrupted bytes
        assert (folder / "trials" / "1" / f).read_bytes() == (finished_run / "trials" / "1" / f).read_bytes(), f
    assert (folder / "trials" / "1" / "result.json.corrupt").is_file()
    assert not (folder / "trials" / "0" / "result.json.corrupt").exists()  # the intact trial was kept


def test_load_model_names_a_truncated_weights_file(finished_run, tmp_path):
    folder = _copy(finished_run, tmp_path)
    _truncate(folder / "trials" / "0" / "model.pt")
    with pytest.raises(FolderError, match=r"trials/0/model\.pt.* is damaged"):
        ignite_seg.load_model(folder, 0, trust_recipe=True)


def test_the_analysis_names_a_truncated_collated_file(finished_run, tmp_path):
    folder = _copy(finished_run, tmp_path)
    _truncate(folder / "results.npz")
    with pytest.raises(FolderError, match=r"results\.npz.* is damaged"):
        ignite_seg.analyze(folder, analysis="text", force=True)

"""reanalyze and load_model on unusable folders (issue 26, item 9): exit 2 (a folder error) with a
message, never 1 (a failed product) with a raw OSError; a run stopped during its analysis is
complete once reanalyze made that analysis."""
from __future__ import annotations

import errno
import json

import pytest
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg import FolderError
from ignite_seg.reanalyze import main
from ignite_seg.storage import folder_lock

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})


def test_reanalyze_and_load_model_on_a_file_say_so(tmp_path, caplog):
    path = tmp_path / "a_file"
    path.write_text("x")
    assert main([str(path), "--analysis", "text"]) == 2
    assert "not a folder" in caplog.text
    with pytest.raises(FolderError, match="not an ignite_seg run folder"):
        ignite_seg.load_model(path, 0, trust_recipe=True)


def test_reanalyze_where_the_lock_cannot_be_written_is_a_folder_error(tmp_path, monkeypatch, caplog):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"loaders": {}, "state": "complete", "analysis": "none"}))
    real_open = folder_lock.os.open

    def read_only(path, flags, *args, **kwargs):  # root writes anywhere: a read-only folder, simulated
        if str(path).endswith(folder_lock.LOCK_NAME) and flags & folder_lock.os.O_CREAT:
            raise PermissionError(errno.EROFS, "Read-only file system")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(folder_lock.os, "open", read_only)
    assert main([str(folder), "--analysis", "text"]) == 2
    assert "cannot take the lock" in caplog.text and "Read-only file system" in caplog.text


def test_a_run_stopped_during_its_analysis_is_complete_after_reanalyze(tmp_path):
    folder = tmp_path / "run"
    ignite_seg.train(MLP, BLOBS, CE, folder=folder, hyperparameters=FAST_HP, analysis="none",
                     allow_later_analysis_up_to="none", trials=1, trials_strict=True, cores=1, seed=0)
    run = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**run, "state": "collated", "analysis": "text"}))
    ignite_seg.analyze(folder, analysis="text")
    assert json.loads((folder / "run.json").read_text())["state"] == "complete"
    (folder / "run.json").write_text(json.dumps({**run, "state": "collated", "analysis": "images"}))
    ignite_seg.analyze(folder, analysis="text")  # less than the run asked for: still pending
    assert json.loads((folder / "run.json").read_text())["state"] == "collated"

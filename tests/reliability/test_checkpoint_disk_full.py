"""A full disk while a worker writes a mid-trial checkpoint is an error of the run, not of the
trial (issue 26, item 8): it reaches the caller, run.json is not ``complete``, and the
continuation resumes the trial from its last checkpoint to the uninterrupted result.

The full disk is simulated (ENOSPC raised by the atomic write of the second checkpoint.pt, in a
one-thread executor so the trial runs in this process); a 3 MB tmpfs gives the same errno."""
from __future__ import annotations

import errno
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg.exceptions import CheckpointWriteError
from ignite_seg.storage import atomic

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})
KW = dict(hyperparameters=FAST_HP, analysis="none", allow_later_analysis_up_to="none", trials=2, trials_strict=True,
          cores=1, seed=0, checkpoint_every=1)


def _train(folder, **kw):
    with ThreadPoolExecutor(1) as ex:
        return ignite_seg.train(MLP, BLOBS, CE, folder=folder, executor=ex, **{**KW, **kw})


def test_a_full_disk_at_a_checkpoint_stops_the_run_and_the_continuation_resumes_the_trial(tmp_path, monkeypatch):
    reference = tmp_path / "reference"
    _train(reference)
    folder = tmp_path / "current"
    seen = []

    def full(path):
        if path.name == "checkpoint.pt":
            seen.append(path)
            if len(seen) == 4:  # trial 1's second checkpoint (each trial writes one after epochs 1 and 2)
                raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "_before_replace_hooks", [full])
    with pytest.raises(CheckpointWriteError, match=r"trials/1/checkpoint\.pt.*No space left"):
        _train(folder)
    monkeypatch.setattr(atomic, "_before_replace_hooks", [])
    assert json.loads((folder / "run.json").read_text())["state"] != "complete"
    assert not (folder / "trials" / "1" / "result.json").exists()  # not recorded as a failed trial
    assert (folder / "trials" / "1" / "checkpoint.pt").is_file()  # the first checkpoint is intact
    result = _train(folder, trials=0, is_continuation=True)
    assert [t.status for t in result.trials] == ["completed", "completed"]
    assert json.loads((folder / "trials" / "1" / "result.json").read_text())["checkpoints"]["resumed_from_epoch"] == 1
    for t in (0, 1):
        assert (folder / "trials" / str(t) / "model.pt").read_bytes() == \
            (reference / "trials" / str(t) / "model.pt").read_bytes()

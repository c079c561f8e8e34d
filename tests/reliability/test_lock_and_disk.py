"""The folder lock, and write errors (disk full, permissions) that must leave the previous state intact."""
from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg.storage import atomic as fileio
from ignite_seg.storage.folder_lock import LOCK_NAME

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})


def _train(folder, **kw):
    with ThreadPoolExecutor(1) as ex:  # one thread: reproducible trials (more are refused)
        return ignite_seg.train(MLP, BLOBS, CE, folder=folder, hyperparameters=FAST_HP, analysis="none",
                                trials=2, cores=2, seed=0, executor=ex, **kw)


def _write_lock(folder, pid, created):
    (folder / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "created": created}))


@pytest.mark.parametrize("continuation", [True, False])
def test_a_live_lock_keeps_a_second_run_out(tmp_path, continuation):
    folder = tmp_path / "run"
    _train(folder)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        _write_lock(folder, sleeper.pid, time.time())
        listing = sorted(p.name for p in folder.rglob("*"))
        with pytest.raises(ignite_seg.FolderLockedError, match=f"in use by process {sleeper.pid}"):
            _train(folder, is_continuation=continuation, history_folder=tmp_path / "history")
        assert sorted(p.name for p in folder.rglob("*")) == listing  # not archived, not touched
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_stale_lock_is_taken_over_with_a_warning(tmp_path):
    folder = tmp_path / "run"
    _train(folder)
    dead = subprocess.Popen(["true"])
    dead.wait()
    _write_lock(folder, dead.pid, time.time() - 100)
    with pytest.warns(UserWarning, match="stale lock"):
        res = _train(folder, is_continuation=True)
    assert len(res.trials) == 4
    assert not (folder / LOCK_NAME).exists()


def test_lock_is_released_when_the_run_fails(tmp_path, monkeypatch):
    import ignite_seg.api as api

    def broken(*a, **k):
        raise RuntimeError("collation exploded")

    monkeypatch.setattr(api, "Collator", broken)
    with pytest.raises(RuntimeError, match="collation exploded"):
        _train(tmp_path / "run")
    assert not (tmp_path / "run" / LOCK_NAME).exists()


def _failing_replace(name, exc):
    def hook(path):
        if path.name == name:
            raise exc

    return hook


def test_atomic_write_that_fails_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    fileio.write_json(target, {"v": 1})
    monkeypatch.setattr(fileio, "_before_replace_hooks", [_failing_replace("x.json", OSError(errno.ENOSPC, "No space left on device"))])
    with pytest.raises(OSError, match="No space left"):
        fileio.write_json(target, {"v": 2})
    assert json.loads(target.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_atomic_files_get_the_usual_permissions(tmp_path):
    fileio.write_json(tmp_path / "a.json", {})
    (tmp_path / "b.txt").write_text("")
    assert (tmp_path / "a.json").stat().st_mode == (tmp_path / "b.txt").stat().st_mode


def test_disk_full_while_writing_the_file_itself(tmp_path, monkeypatch):
    target = tmp_path / "a.npz"
    fileio.write_npz(target, a=np.arange(3))
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def fileno(self):
            return self.fh.fileno()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio.os, "fdopen", lambda fd, mode: Full(real_fdopen(fd, mode)))
    with pytest.raises(OSError, match="No space left"):
        fileio.write_npz(target, a=np.arange(5))
    monkeypatch.undo()
    with np.load(target) as z:
        np.testing.assert_array_equal(z["a"], np.arange(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz"]


@pytest.mark.parametrize("name, exc", [
    ("results.npz", OSError(errno.ENOSPC, "No space left on device")),
    ("model.pt", PermissionError(errno.EACCES, "Permission denied")),
])
def test_write_error_in_a_run_leaves_the_previous_state_and_a_continuation_recovers(tmp_path, monkeypatch, name, exc):
    folder = tmp_path / "run"
    _train(folder)
    results_before = (folder / "results.npz").read_bytes()
    trials_before = {p.name: (p / "model.pt").read_bytes() for p in (folder / "trials").iterdir()}
    monkeypatch.setattr(fileio, "_before_replace_hooks", [_failing_replace(name, exc)])
    with pytest.raises(OSError):
        _train(folder, is_continuation=True)
    assert (folder / "results.npz").read_bytes() == results_before
    for tid, data in trials_before.items():
        assert (folder / "trials" / tid / "model.pt").read_bytes() == data
    assert not list(folder.rglob("*.tmp"))
    monkeypatch.setattr(fileio, "_before_replace_hooks", [])
    res = _train(folder, is_continuation=True)  # resumes the interrupted continuation
    assert [t.status for t in res.trials] == ["completed"] * 4
    with np.load(folder / "results.npz") as z:
        assert z["trial_ids"].tolist() == [0, 1, 2, 3]


def test_corrupted_results_npz_is_rebuilt_from_the_trial_folders(tmp_path):
    folder = tmp_path / "run"
    first = _train(folder)
    (folder / "results.npz").write_bytes(b"PK\x03\x04 garbage")
    res = _train(folder, is_continuation=True)
    with np.load(folder / "results.npz") as z:
        assert z["trial_ids"].tolist() == [0, 1, 2, 3]
        assert z["final_loss_val"][:2].tolist() == [t.loss_val for t in first.trials]
    assert len(res.trials) == 4


def test_a_forked_child_does_not_keep_a_dead_runs_lock(tmp_path):
    """A run that forked a worker (``IGNITE_SEG_START_METHOD=fork``, the analysis pool) and was then
    SIGKILLed: the orphaned child must not hold the folder's lock; the next run takes it at once."""
    folder = tmp_path / "run"
    folder.mkdir()
    script = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from ignite_seg.storage.folder_lock import FolderLock\n"
        f"FolderLock(Path({str(folder)!r})).acquire()\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    null = os.open(os.devnull, os.O_WRONLY)\n"
        "    os.dup2(null, 1), os.dup2(null, 2)\n"  # let the caller's pipes close
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "print(child, flush=True)\n"
        "os._exit(0)\n"  # dies holding the lock, as if killed; its child lives on
    )
    out = subprocess.run([os.environ.get("PYTHON", __import__("sys").executable), "-c", script],
                         capture_output=True, text=True, timeout=60)
    child = int(out.stdout)
    from ignite_seg.storage.folder_lock import FolderLock

    try:
        lock = FolderLock(folder)
        with pytest.warns(UserWarning, match="stale lock"):
            lock.acquire()  # FolderLockedError while the child holds a copy of the dead run's descriptor
        lock.release()
    finally:
        os.kill(child, 9)

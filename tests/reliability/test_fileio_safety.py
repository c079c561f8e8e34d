"""Atomic writes: only ignite_seg's own temporaries are cleaned up, renames are made durable,
and an error without a file name names the file being written."""
from __future__ import annotations

import errno
import os
import stat

import pytest

from ignite_seg.storage import atomic as fileio


def test_cleanup_removes_only_ignite_seg_temporaries(tmp_path, monkeypatch):
    mine = [tmp_path / ".notes.tmp", tmp_path / ".my.notes.tmp", tmp_path / "sub" / ".draft.v2.tmp"]
    for p in mine:
        p.parent.mkdir(exist_ok=True)
        p.write_text("user data")

    def killed(path):
        raise KeyboardInterrupt  # the writer dies between writing its temporary and the rename

    monkeypatch.setattr(fileio, "_before_replace_hooks", [killed])
    monkeypatch.setattr(fileio.os, "unlink", lambda p, **kw: None)  # ... and leaves the temporary behind
    with pytest.raises(KeyboardInterrupt):
        fileio.write_json(tmp_path / "sub" / "run.json", {})
    monkeypatch.undo()
    left = [p.name for p in (tmp_path / "sub").iterdir() if p.name.startswith(fileio.TMP_PREFIX)]
    assert len(left) == 1 and fileio.is_temporary(left[0])
    assert fileio.remove_stale_temporaries(tmp_path) == 1
    assert all(p.read_text() == "user data" for p in mine)
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == [".draft.v2.tmp"]


def test_the_folder_is_fsynced_after_the_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(fileio.os, "fsync", lambda fd: (events.append(("fsync", stat.S_ISDIR(os.fstat(fd).st_mode))),
                                                       real_fsync(fd))[1])
    monkeypatch.setattr(fileio.os, "replace", lambda a, b, **kw: (events.append(("replace", None)), real_replace(a, b, **kw))[1])
    fileio.write_json(tmp_path / "a.json", {"v": 1})
    assert events == [("fsync", False), ("replace", None), ("fsync", True)]


def test_a_full_disk_names_the_file_being_written(tmp_path, monkeypatch):
    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio, "_before_replace_hooks", [full])
    target = tmp_path / "results.npz"
    with pytest.raises(OSError, match="No space left on device") as info:
        fileio.write_npz(target, a=[1, 2])
    assert info.value.errno == errno.ENOSPC and str(target) in str(info.value)
    assert list(tmp_path.iterdir()) == []

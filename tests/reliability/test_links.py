"""Links inside a run folder never lead a write or a delete outside it (docs/reliability.md,
*Links in a run folder*): a lock file, ``analysis/``, ``trials/``, ``hparams/`` or a trial's own
folder that is a symbolic link to an outside place is refused with a FolderError naming the link,
by the analysis, a continuation and a fresh run alike, and the outside place is left byte for byte."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import CE

import ignite_seg
from ignite_seg import FolderError
from ignite_seg.storage.atomic import atomic_write_bytes
from ignite_seg.storage.contained import contained

from .harness import BLOBS, MLP, small_run_kwargs, train_small_run

KW = small_run_kwargs()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A complete 2-trial run, copied by each test."""
    return train_small_run(tmp_path_factory.mktemp("run") / "current")


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` (not following links): its bytes and mtime."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = (p.read_bytes(), p.stat().st_mtime_ns)
    return out


def _outside(tmp_path: Path, what: str) -> Path:
    """An outside place for the link: a file (the lock's target) or a folder with a file of its own."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "precious.txt").write_text("mine\n")
    if what == "lock":
        return out / "precious.txt"
    return out


def _plant(folder: Path, where: str, target: Path) -> None:
    link = folder / where
    if link.is_dir():
        shutil.rmtree(link)
    elif link.exists():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


WHERE = {"lock": ".ignite_seg.lock", "analysis": "analysis", "trials": "trials", "hparams": "hparams",
         "trial": "trials/2"}


#: The calls that write under the link, so must refuse: every one takes the lock; the analysis
#: writes analysis/; a continuation adding trial 2 writes trials/2.
MUST_REFUSE = {("lock", "reanalyze"), ("lock", "continuation"), ("lock", "fresh"), ("analysis", "reanalyze"),
               ("trials", "continuation"), ("trial", "continuation")}


def _entry(entry: str, folder: Path, tmp_path: Path) -> None:
    if entry == "reanalyze":
        ignite_seg.analyze(folder, analysis="text", force=True)
    elif entry == "continuation":
        ignite_seg.train(MLP, BLOBS, CE, folder=folder, trials=1, trials_strict=True, is_continuation=True, **KW)
    else:
        ignite_seg.train(MLP, BLOBS, CE, folder=folder, history_folder=tmp_path / "history", trials=1,
                         trials_strict=True, **KW)


@pytest.mark.parametrize("where", list(WHERE))
@pytest.mark.parametrize("entry", ["reanalyze", "continuation", "fresh"])
def test_no_write_or_delete_follows_a_link_out_of_the_run_folder(finished_run, tmp_path, where, entry):
    folder = tmp_path / "current"
    shutil.copytree(finished_run, folder, symlinks=True)
    target = _outside(tmp_path, where)
    _plant(folder, WHERE[where], target)
    before = _snapshot(tmp_path / "outside")
    if (where, entry) in MUST_REFUSE:
        with pytest.raises(FolderError, match="symbolic link") as info:
            _entry(entry, folder, tmp_path)
        assert repr(str(folder / WHERE[where]))[1:-1] in str(info.value)
    else:  # it may write under the link (refused) or not (a fresh run moves the folder whole, links as links)
        try:
            _entry(entry, folder, tmp_path)
        except FolderError as exc:
            assert "symbolic link" in str(exc)
    assert _snapshot(tmp_path / "outside") == before
    assert (tmp_path / "outside" / "precious.txt").read_text() == "mine\n"


def test_an_atomic_write_under_a_linked_folder_names_the_link_and_writes_nothing(tmp_path):
    run, out = tmp_path / "run", tmp_path / "out"
    (run / "a").mkdir(parents=True)
    out.mkdir()
    (run / "a" / "b").symlink_to(out)
    with contained(run), pytest.raises(FolderError, match=r"a/b.*a link to"):
        atomic_write_bytes(run / "a" / "b" / "c" / "x.json", b"{}")
    assert list(out.iterdir()) == []
    (run / "target").write_text("old")
    (run / "a" / "f").symlink_to(run / "target")
    with contained(run):  # a link as the final name is replaced by the file, never written through
        atomic_write_bytes(run / "a" / "f", b"new")
    assert (run / "target").read_text() == "old" and not (run / "a" / "f").is_symlink()

"""The run folder: what train() refuses to move, continuations that write nothing before every
check passed, the recovery of a killed call, and unreadable trial records."""
from __future__ import annotations

import functools
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg import ConfigError, FolderError

from .harness import run_driver

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})
KW = dict(hyperparameters=FAST_HP, analysis="none", allow_later_analysis_up_to="none", trials=2, cores=1,
          trials_strict=True, seed=0)


def _train(folder, **kw):
    return ignite_seg.train(MLP, BLOBS, CE, folder=folder, **{**KW, **kw})


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _home_like(root: Path) -> Path:
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".bashrc").write_text("export A=1\n")
    (home / ".ssh" / "id_ed25519").write_text("secret")
    return home


def test_a_non_empty_folder_that_is_no_run_is_refused_and_left_in_place(tmp_path):
    home = _home_like(tmp_path)
    before = _listing(tmp_path)
    with pytest.raises(FolderError, match=r"not empty and is not an ignite_seg run folder"):
        _train(home)
    with pytest.raises(FolderError, match=r"not an ignite_seg run folder"):  # up front: no loader runs first
        ignite_seg.train(("tasks", "raises", (), {}), BLOBS, CE, folder=home, **KW)
    assert _listing(tmp_path) == before  # nothing moved, no history folder


@pytest.mark.parametrize("where", ["home", "tilde", "cwd", "dot", "empty", "parent-of-cwd", "root"])
def test_precious_folders_are_refused_up_front(tmp_path, monkeypatch, where):
    home = _home_like(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    work = home / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    folder = {"home": home, "tilde": "~", "cwd": os.getcwd(), "dot": ".", "empty": "", "parent-of-cwd": "..",
              "root": "/"}[where]
    before = _listing(tmp_path)
    with pytest.raises(FolderError, match=r"(home directory|working directory|filesystem root).*subfolder"):
        _train(folder)
    assert _listing(tmp_path) == before


def test_a_history_folder_inside_the_folder_is_refused(tmp_path):
    with pytest.raises(FolderError, match="history_folder=.* is inside folder"):
        _train(tmp_path / "current", history_folder=tmp_path / "current" / "old")
    assert list(tmp_path.iterdir()) == []


def chdir_then(where: str, **kw):
    """A dataset loader that changes the working directory (as some data libraries do)."""
    os.chdir(where)
    return __import__("tasks").blobs(**kw)


def test_a_relative_folder_is_resolved_before_any_loader_runs(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    loader = functools.partial(chdir_then, str(tmp_path / "b"))
    with ThreadPoolExecutor(1) as ex:
        res = ignite_seg.train(MLP, loader, CE, folder="runs/current", executor=ex, **KW)
    assert list((tmp_path / "b").iterdir()) == []
    assert (tmp_path / "a" / "runs" / "current" / "run.json").is_file()
    assert res.folder == tmp_path / "a" / "runs" / "current"


def test_a_refused_continuation_writes_nothing_and_the_right_one_adds_its_trials(tmp_path):
    folder = tmp_path / "current"
    _train(folder)
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    other = ignite_seg.FixedHyperparameters(**{**FAST_HP.to_dict(), "lr_start": 0.01})
    with pytest.raises(ConfigError, match="trials of one run share one recipe"):
        _train(folder, hyperparameters=other, is_continuation=True)
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    res = _train(folder, is_continuation=True)
    assert [t.trial_id for t in res.completed] == [0, 1, 2, 3]


def test_recovering_a_killed_call_with_trials_0_never_adds_trials(tmp_path):
    folder = tmp_path / "current"
    first = _train(folder)
    # killed after run.json said "complete": the folder is a finished run's, there is nothing to finish
    res = _train(folder, is_continuation=True, trials=0)
    assert [t.trial_id for t in res.trials] == [0, 1]
    assert [t.loss_val for t in res.trials] == [t.loss_val for t in first.trials]
    # killed in the middle of a continuation that planned trials 2 and 3: trials=0 finishes that plan
    run = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**run, "state": "running", "planned_trials": [0, 1, 2, 3]}))
    assert [t.trial_id for t in _train(folder, is_continuation=True, trials=0).completed] == [0, 1, 2, 3]
    assert [t.trial_id for t in _train(folder, is_continuation=True, trials=0).completed] == [0, 1, 2, 3]
    assert json.loads((folder / "run.json").read_text())["state"] == "complete"
    # a continuation of the complete run adds its trials
    assert len(_train(folder, is_continuation=True, trials=1).completed) == 5
    with pytest.raises(ConfigError, match="trials must be >= 1"):
        _train(tmp_path / "fresh", trials=0)


def test_a_continuation_killed_before_it_planned_adds_its_trials_when_rerun(tmp_path):
    folder = str(tmp_path / "current")
    assert run_driver({"folder": folder, "trials": 2}).returncode == 0
    # the continuation's first write (run.json, state running) lands; the kill comes at the second
    assert run_driver({"folder": folder, "trials": 2, "continuation": True}, kill_at=2).returncode == -9
    assert json.loads(Path(folder, "run.json").read_text())["state"] == "running"
    done = run_driver({"folder": folder, "trials": 2, "continuation": True})
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(p.read_text())["status"] for p in Path(folder, "trials").glob("*/result.json")]
    assert results == ["completed"] * 4


def test_an_unreadable_trial_record_is_kept_aside_and_the_trial_rerun(tmp_path):
    folder = tmp_path / "current"
    first = _train(folder)
    (folder / "trials" / "1" / "result.json").write_text("{ garbage")
    res = _train(folder, is_continuation=True, trials=1)
    assert [t.trial_id for t in res.completed] == [0, 1, 2]
    assert res.completed[1].loss_val == first.trials[1].loss_val  # rerun with the same seed
    assert (folder / "trials" / "1" / "result.json.corrupt").read_text() == "{ garbage"
    with np.load(folder / "results.npz") as z:
        assert z["trial_ids"].tolist() == [0, 1, 2]


def test_run_json_takes_only_the_documented_states(tmp_path):
    from ignite_seg.storage.records import RunRecord
    from ignite_seg.storage.run_folder import RUN_STATES

    assert RUN_STATES == ("running", "collated", "complete", "failed")  # docs/reliability.md
    with pytest.raises(ValueError, match="not a run state: 'done'"):
        RunRecord(state="done", loaders={})  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_fresh_run_killed_before_its_plan_is_recovered_with_its_requested_trials(tmp_path):
    """Issue 26, item 6: the first write (run.json, state running) lands, the kill comes before the
    plan; the documented recovery (is_continuation=True, trials=0) runs the 3 trials asked for."""
    folder = str(tmp_path / "current")
    assert run_driver({"folder": folder, "trials": 3}, kill_at=2).returncode == -9
    run = json.loads(Path(folder, "run.json").read_text())
    assert run["state"] == "running" and not run.get("planned_trials")
    done = run_driver({"folder": folder, "trials": 0, "continuation": True})
    assert done.returncode == 0, done.stderr[-3000:]
    results = sorted(json.loads(p.read_text())["status"] for p in Path(folder, "trials").glob("*/result.json"))
    assert results == ["completed"] * 3


@pytest.mark.parametrize("record", ['{"project": "mine"}', "not json at all", "[1, 2]"])
def test_a_folder_with_a_foreign_run_json_is_no_run_and_is_left_in_place(tmp_path, record):
    """Issue 26, item 4: a fresh run moved such a folder (with the user's keys) to the history."""
    home = _home_like(tmp_path)
    (home / "run.json").write_text(record)
    before = _listing(tmp_path)
    with pytest.raises(FolderError, match=r"not empty and is not an ignite_seg run folder"):
        _train(home)
    with pytest.raises(FolderError, match=r"not valid JSON|not written by ignite_seg"):
        _train(home, is_continuation=True)
    assert _listing(tmp_path) == before


def test_a_users_own_lock_named_file_is_neither_overwritten_nor_deleted(tmp_path):
    folder = tmp_path / "current"
    folder.mkdir()
    (folder / ".ignite_seg.lock").write_text("my notes\n")
    with pytest.raises(FolderError, match=r"not a lock file of ignite_seg"):
        _train(folder)
    assert (folder / ".ignite_seg.lock").read_text() == "my notes\n"
    assert sorted(p.name for p in folder.iterdir()) == [".ignite_seg.lock"]

"""The records of run.json and result.json: today's round trip, and a folder written before them
(tests/data/run_cc515ec, commit cc515ec: format-1 run.json, flat result.json) read, continued and
reanalysed by today's code."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import FAST_HP

import ignite_seg
from ignite_seg.storage.records import RESULT_FORMAT, RUN_FORMAT, CheckpointReport, RunRecord, TrialResult
from ignite_seg.storage.result_keys import BestRecord, ResultKeys, StopRecord
from ignite_seg.storage.run_folder import RunFolder

OLD = Path(__file__).parent / "data" / "run_cc515ec"
#: the call that wrote the old folder (tests/data/run_cc515ec_make.py)
CALL = dict(hyperparameters=dataclasses.replace(FAST_HP, epochs=2), seed=0, cores=1, metric_modes={"iou": "max"},
            metrics={"iou": ("real_tasks", "class_iou", (), {})}, best_metric="loss", best_mode="min",
            snapshots_per_epoch=2)
LOADERS = (("tasks", "mlp", (), {}), ("real_tasks", "two_val_sets", (), {}), ("torch.nn", "CrossEntropyLoss", (), {}))


@pytest.fixture
def old(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(OLD, folder)
    return folder


def test_today_s_records_read_back_as_written():
    result = TrialResult(trial_id=3, status="completed", seconds=1.5, metrics={"loss_val": 0.25, "perf_val": None},
                         best=BestRecord("loss", "min", 1.5, 0.25, ("val", "val_b")), stop=StopRecord(None),
                         checkpoints=CheckpointReport(resumed_from_epoch=2), devices=("cpu",), processes=1)
    data = json.loads(json.dumps(result.to_json()))
    assert data["format"] == RESULT_FORMAT and data["metrics"] == {"loss_val": 0.25, "perf_val": None}
    assert data["best"] == {"metric": "loss", "mode": "min", "epoch": 1.5, "value": 0.25, "parts": ["val", "val_b"]}
    assert data["stop"] == {"epoch": None} and data["checkpoints"] == {"resumed_from_epoch": 2}
    assert "error" not in data and "diverged_iteration" not in data  # fields that say nothing are left out
    assert TrialResult.from_json(data, trial_id=3) == result
    run = RunRecord(loaders={"model": {"describe": "m()"}}, val_names=("a", "b"), planned_trials=(0, 1),
                    best_over=("val", "val_b"), state="collated")
    assert RunRecord.from_json(json.loads(json.dumps(run.to_json()))) == run
    assert run.keys == ResultKeys(("a", "b"))
    with pytest.raises(ValueError, match="newer"):
        RunRecord.from_json({**run.to_json(), "format": RUN_FORMAT + 1})


def test_a_folder_of_cc515ec_reads_as_today_s_records(old):
    rf = RunFolder(old)
    assert json.loads((old / "run.json").read_text())["format"] == 1
    run = rf.read_run()
    assert run.format == RUN_FORMAT and run.state == "complete" and run.planned_trials == (0, 1)
    assert run.keys == ResultKeys(("clean", "shifted"), ("iou",), (("iou", "max"),))
    assert (run.best_metric, run.best_mode, run.best_over, run.seed) == ("loss", "min", "primary", 0)
    assert "format" not in json.loads((old / "trials" / "0" / "result.json").read_text())  # flat
    trials = dict(rf.finished_trials())
    assert sorted(trials) == [0, 1]
    t0 = trials[0]
    assert set(t0.metrics) == set(run.keys.final_keys())  # every final value, nothing else, no regex
    assert t0.completed and t0.stop == StopRecord(None) and t0.devices == ("cpu",) and t0.processes == 1
    assert t0.best == BestRecord("loss", "min", 2.0, t0.metric("loss_val"))
    assert t0.checkpoints == CheckpointReport()
    assert rf.read_final() == CALL["hyperparameters"]


def test_a_folder_of_cc515ec_is_continued_and_reanalysed(old):
    before = np.load(old / "results.npz")["final_perf_val_shifted"]
    res = ignite_seg.train(*LOADERS, folder=old, trials=1, trials_strict=True, is_continuation=True,
                           analysis="text", **CALL)
    assert [t.trial_id for t in res.trials] == [0, 1, 2] and all(t.status == "completed" for t in res.trials)
    with np.load(old / "results.npz") as z:
        assert z["trial_ids"].tolist() == [0, 1, 2]
        np.testing.assert_array_equal(z["final_perf_val_shifted"][:2], before)  # the old trials, collated as before
    run = json.loads((old / "run.json").read_text())
    assert run["format"] == RUN_FORMAT and run["state"] == "complete" and run["planned_trials"] == [2]
    new = json.loads((old / "trials" / "2" / "result.json").read_text())
    assert new["format"] == RESULT_FORMAT and set(new["metrics"]) == set(RunFolder(old).read_run().keys.final_keys())
    assert "format" not in json.loads((old / "trials" / "0" / "result.json").read_text())  # never rewritten
    summary = (old / "analysis" / "summary.md").read_text()
    assert "shifted" in summary and "iou" in summary
    ignite_seg.analyze(old, analysis="text", force=True)  # reanalysed from the folder alone
    assert (old / "analysis" / "summary.json").is_file()

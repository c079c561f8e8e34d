"""A worker's TrialOutcome holds its result.json record (TrialResult) rather than a copy of its
fields: a field added to the record reaches result.json with nothing else changed."""
from __future__ import annotations

import dataclasses
import json

from ignite_seg.engine.trial_records import TrialOutcome
from ignite_seg.storage.records import TrialResult
from ignite_seg.storage.result_keys import StopRecord
from ignite_seg.storage.run_folder import RunFolder


def test_the_outcome_repeats_none_of_the_record_s_fields():
    own = {f.name for f in dataclasses.fields(TrialOutcome)}
    record = {f.name for f in dataclasses.fields(TrialResult)}
    assert "result" in own and TrialOutcome.__dataclass_fields__["result"].type == "TrialResult"
    assert own & record == set()


@dataclasses.dataclass(frozen=True, repr=False, kw_only=True)
class _WithGpuHours(TrialResult):
    """TrialResult with one field more, as a change to result.json would add it."""

    gpu_hours: float | None = None


def test_a_field_added_to_the_record_reaches_result_json_with_nothing_else(tmp_path):
    outcome = TrialOutcome(_WithGpuHours(trial_id=2, status="failed", gpu_hours=1.5), model=b"weights")
    outcome.end("completed")
    result = RunFolder(tmp_path).write_trial(outcome)
    written = json.loads((tmp_path / "trials" / "2" / "result.json").read_text())
    assert written["gpu_hours"] == 1.5 and written["status"] == "completed"
    assert _WithGpuHours.from_json(written, trial_id=2) == result
    assert (tmp_path / "trials" / "2" / "model.pt").read_bytes() == b"weights"


def test_end_keeps_the_whole_error_for_error_txt_and_its_last_line_cut_to_500_for_the_record(tmp_path):
    outcome = TrialOutcome(TrialResult(trial_id=0, status="failed"))
    outcome.end("failed", "Traceback (most recent call last):\n  File x\nValueError: " + "v" * 600 + "\n\n")
    assert outcome.status == "failed" and outcome.result.stop is None
    assert outcome.result.error == ("ValueError: " + "v" * 600)[:500]
    result = RunFolder(tmp_path).write_trial(outcome)
    assert (tmp_path / "trials" / "0" / "error.txt").read_text() == outcome.error_text
    assert result.error == outcome.result.error and len(result.error) == 500


def test_end_records_a_completed_trial_s_stop_and_no_stop_for_the_others():
    outcome = TrialOutcome(TrialResult(trial_id=0, status="failed"))
    outcome.end("completed", stopped_epoch=2.5)
    assert outcome.result.stop == StopRecord(2.5) and outcome.result.error is None and outcome.error_text is None
    outcome.end("completed")
    assert outcome.result.stop == StopRecord(None)
    outcome.end("diverged", "loss became non-finite at iteration 7")
    assert outcome.result.stop is None and outcome.result.error == "loss became non-finite at iteration 7"

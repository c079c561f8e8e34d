"""Mid-trial resume of trials on several processes: a driver SIGKILLed while a group trains (its
ranks die with their worker), continued with ``is_continuation=True``, resumes the trial from the
checkpoint rank 0 wrote and ends with the uninterrupted run's weights, byte for byte."""
from __future__ import annotations

import json
import subprocess
import tempfile
import uuid
from pathlib import Path

from .harness import load_npz, processes_with_marker, start_script, wait_until

SCRIPT = Path(__file__).with_name("resumerun.py")
VOLATILE = ("seconds", "started_at", "pid", "peak_rss_mib", "checkpoints")  # checkpoints: resumed_from_epoch


def _run(spec: dict) -> str:
    with tempfile.TemporaryFile("w+") as out:
        proc: subprocess.Popen = start_script(SCRIPT, spec, uuid.uuid4().hex, out)
        code = proc.wait(timeout=600)
        out.seek(0)
        log = out.read()
    assert code == 0 and "DONE" in log, log[-3000:]
    return log


def test_a_killed_run_resumes_its_group_trial_from_rank_0s_checkpoint_to_the_uninterrupted_result(tmp_path):
    spec = {"case": "tensors", "trial_processes": 2}  # cores=2: one group of 2 at a time, trial 0 first
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    _run({**spec, "folder": str(reference)})

    marker = uuid.uuid4().hex
    first = killed / "trials" / "0"
    with tempfile.TemporaryFile("w+") as out:
        proc = start_script(SCRIPT, {**spec, "folder": str(killed)}, marker, out)
        try:
            wait_until(lambda: (first / "checkpoint.pt").is_file() or proc.poll() is not None, 300,
                       "trial 0's first checkpoint", poll=0.02)
            proc.kill()
            proc.wait()
        finally:
            proc.kill()
    wait_until(lambda: not processes_with_marker(marker), 30, "the killed run's workers and ranks to end")
    assert not (first / "result.json").exists(), "trial 0 finished before the kill: nothing was interrupted"

    log = _run({**spec, "folder": str(killed), "continuation": True})
    result = json.loads((first / "result.json").read_text())
    assert result["checkpoints"]["resumed_from_epoch"] >= 1 and result["processes"] == 2, result
    assert f"trial 0 resumed from its checkpoint at epoch {result['checkpoints']['resumed_from_epoch']}" in log
    for t in (0, 1):
        got, want = killed / "trials" / str(t), reference / "trials" / str(t)
        mine, theirs = json.loads((got / "result.json").read_text()), json.loads((want / "result.json").read_text())
        assert {k: v for k, v in mine.items() if k not in VOLATILE} == \
               {k: v for k, v in theirs.items() if k not in VOLATILE}
        assert (got / "model.pt").read_bytes() == (want / "model.pt").read_bytes(), t
        got_tt, want_tt = load_npz(got / "throughtime.npz"), load_npz(want / "throughtime.npz")
        assert got_tt.keys() == want_tt.keys() and all((got_tt[k] == want_tt[k]).all() for k in want_tt), t
        assert not (got / "checkpoint.pt").exists()

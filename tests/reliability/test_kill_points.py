"""SIGKILL the driver at every atomic write of a run, continue it, and compare with an
uninterrupted run: every completed trial intact and counted once, collated files rebuilt."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from .harness import assert_same_run, completed_trials, run_driver, writes_of

CONFIGS = {
    "fixed-3-trials": {"trials": 3},
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_killed_at_every_write_then_continued_equals_uninterrupted(config, tmp_path):
    spec = CONFIGS[config]
    reference = tmp_path / "reference"
    total = writes_of(run_driver({**spec, "folder": str(reference)}))
    assert total >= 10
    points = list(range(1, total + 1))
    folders = {n: tmp_path / f"killed_at_{n}" for n in points}
    with ThreadPoolExecutor(2) as ex:
        procs = dict(zip(points, ex.map(lambda n: run_driver({**spec, "folder": str(folders[n])}, kill_at=n), points), strict=True))
    for n, proc in procs.items():
        assert proc.returncode == -9, f"kill point {n} did not kill: {proc.stderr[-2000:]}"
    before = {n: completed_trials(f) for n, f in folders.items()}
    assert any(before.values()) and not all(before.values())  # kills before and after trials completed
    cont = run_driver({**spec, "folder": "", "folders": [str(f) for f in folders.values()], "continuation": True})
    assert cont.returncode == 0, cont.stderr[-3000:]
    for n, folder in folders.items():
        assert_same_run(folder, reference)
        after = completed_trials(folder)
        for tid, snap in before[n].items():  # completed trials were kept, not rerun
            assert after[tid]["digest"] == snap["digest"], (n, tid)

"""SIGKILL the driver at every atomic write of a run, continue it, and compare with an
uninterrupted run: every completed trial intact and counted once, collated files rebuilt."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from .harness import assert_same_run, completed_trials, run_driver, writes_of

#: Each configuration: the run, and which of its writes to kill at (the first config covers the
#: writes every run makes; the later ones add the kill points of their own stage).
CONFIGS = {
    "fixed-3-trials": ({"trials": 3}, lambda path: True),
    "fixed-2-trials-images-min": ({"trials": 2, "analysis": "images-min"},
                                  lambda path: "/analysis/" in path or path.endswith("run.json")),
    "tuned-fastest-2-trials": ({"trials": 2, "hyperparameters": "fastest"},
                               lambda path: "/hparams/" in path or path.endswith("run.json")),
}


#: ``IGNITE_SEG_KILL_POINTS=all`` kills at every selected write; by default the suite kills at
#: every write of the first configuration and at every second write of the others (time).
EVERY = os.environ.get("IGNITE_SEG_KILL_POINTS") == "all"


def killed_and_continued(tmp_path, spec, select, stride=1):
    """Kill a run at each selected write, continue each, compare with the uninterrupted run.

    Returns the paths the kills hit.
    """
    reference = tmp_path / "reference"
    writes = writes_of(run_driver({**spec, "folder": str(reference)}, trace=True))
    points = [n for n, path in enumerate(writes, start=1) if select(path)][::1 if EVERY else stride]
    folders = {n: tmp_path / f"killed_at_{n}" for n in points}
    with ThreadPoolExecutor(2) as ex:
        procs = dict(zip(points, ex.map(lambda n: run_driver({**spec, "folder": str(folders[n])}, kill_at=n), points)))
    for n, proc in procs.items():
        assert proc.returncode == -9, f"kill point {n} ({writes[n - 1]}) did not kill: {proc.stderr[-2000:]}"
    before = {n: completed_trials(f) for n, f in folders.items()}
    cont = run_driver({**spec, "folder": "", "folders": [str(f) for f in folders.values()], "continuation": True})
    assert cont.returncode == 0, cont.stderr[-3000:]
    for n, folder in folders.items():
        assert_same_run(folder, reference)
        after = completed_trials(folder)
        for tid, snap in before[n].items():  # completed trials were kept, not rerun
            assert after[tid]["digest"] == snap["digest"], (n, tid)
    return [writes[n - 1][len(str(reference)) + 1:] for n in points], before


@pytest.mark.parametrize("config", list(CONFIGS))
def test_killed_at_every_write_then_continued_equals_uninterrupted(config, tmp_path):
    spec, select = CONFIGS[config]
    hit, before = killed_and_continued(tmp_path, spec, select, stride=1 if config == "fixed-3-trials" else 2)
    print(f"{config}: killed at {len(hit)} writes: {hit}")
    assert len(hit) >= 5
    if config == "fixed-3-trials":
        assert any(before.values()) and not all(before.values())  # kills before and after trials completed
    elif "images" in config:
        assert any(p.startswith("analysis/") for p in hit)
    else:
        assert any(p.startswith("hparams/") for p in hit)

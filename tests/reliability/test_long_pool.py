"""One pool running more tasks than the workers' start announcements fit in their pipe."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# each task announces (key, pid) on a queue before it runs; with 250-byte keys 2000 tasks write
# ~0.5 MB, eight times what a pipe holds: the runner must read them as it goes, or every worker
# blocks in its next announcement and the run hangs (in a child process, so a hang fails the
# test instead of blocking the pool's shutdown in pytest; its workers' watchdog ends them)
SCRIPT = """
from ignite_seg.runtime.tasks import TaskRunner

if __name__ == "__main__":
    with TaskRunner(2) as runner:
        out = sorted(runner.map_unordered(abs, range(-2000, 0), key=lambda t: ("task", t, "k" * 250)))
        assert out == list(range(1, 2001)), out[:5]
        assert sorted(runner.map_unordered(abs, [-1, -2])) == [1, 2]  # still usable for a later stage
    print("ok")
"""


def test_a_pool_runs_thousands_of_tasks_without_blocking_on_its_announcements(tmp_path):
    script = tmp_path / "many_tasks.py"
    script.write_text(SCRIPT)
    try:
        proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("2000 tasks on one pool did not finish in 90 s (blocked workers?)") from exc
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]

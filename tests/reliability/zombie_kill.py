"""SIGKILL of a driver that its parent has not reaped (issue 26, item 3).

Each round starts killrun.py (trials in the default worker pool) with its stdout on a pipe, as
``subprocess.Popen(..., stdout=PIPE)`` + ``communicate()`` does, waits until its fork server,
resource tracker and a worker are up, SIGKILLs the driver and, without reaping it, measures how
long any process of the run (by the marker in its environment; zombies count as gone) stays
alive, then reads the pipe to its end (the parent that hung in the issue). The goal: nothing of
ours alive 2 s after the kill. ``python -m tests.reliability.zombie_kill 20 [forkserver|fork]`` runs 20
rounds with the workers started from the fork server (default) or forked from the driver.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from .harness import ROOT, SCRIPT, processes_with_marker

GOAL_S = 2.0


#: The processes of a run up before the kill, by start method (killrun.py runs one worker): the
#: driver, its worker, and the fork server and the resource tracker where the fork server starts it.
PROCESSES = {"forkserver": 4, "fork": 2}


def one_kill(folder: Path, limit: float = 10.0, method: str = "forkserver") -> tuple[float, float]:
    """Seconds until no process of the killed run is alive, and until its stdout pipe reached EOF;
    ``method``: how the run starts its workers (``forkserver``, or ``fork``: forks of the driver)."""
    marker = uuid.uuid4().hex
    env = {**os.environ, "IGNITE_SEG_TEST_MARKER": marker, "IGNITE_SEG_START_METHOD": method,
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    env.pop("IGNITE_SEG_KILL_AT_WRITE", None)
    spec = {"pool": "process", "trials": 40, "folder": str(folder)}
    err = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, str(SCRIPT), json.dumps(spec)], env=env, stdout=subprocess.PIPE,
                            stderr=err)
    try:
        deadline = time.monotonic() + 120
        while len(processes_with_marker(marker)) < PROCESSES[method]:
            if proc.poll() is not None or time.monotonic() > deadline:
                err.seek(0)
                raise RuntimeError(f"the driver ended (or never started its workers) before the kill: {err.read()[-2000:]}")
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # not reaped until the end: a zombie meanwhile
        t0 = time.monotonic()
        while processes_with_marker(marker) and time.monotonic() - t0 < limit:
            time.sleep(0.05)
        gone = time.monotonic() - t0
        assert proc.stdout is not None
        proc.stdout.read()  # EOF only once every holder of the pipe is gone
        eof = time.monotonic() - t0
        return gone, eof
    finally:
        err.close()
        proc.kill()
        proc.wait()
        for pid in processes_with_marker(marker):  # leave nothing behind, whatever happened
            os.kill(pid, signal.SIGKILL)


def main(rounds: int, method: str = "forkserver") -> int:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            times.append(one_kill(Path(tmp) / f"run{r}", method=method))
            print(f"kill {r + 1}: nothing alive after {times[-1][0]:.2f} s, pipe at EOF after {times[-1][1]:.2f} s",
                  flush=True)
    late = sum(gone > GOAL_S for gone, _ in times)
    print(f"{rounds} kills ({method}): the last process of the run gone after at most {max(g for g, _ in times):.2f} s "
          f"(median {sorted(g for g, _ in times)[rounds // 2]:.2f} s); {late} over {GOAL_S} s")
    return 0 if late == 0 else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20, sys.argv[2] if len(sys.argv) > 2 else "forkserver"))

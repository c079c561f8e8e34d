"""Two fresh runs claiming one existing run folder at the same moment (issue 26, item 2).

Each round: an old run sits in the folder; two processes released together at a barrier claim it
as a fresh run does (``storage.claim.claimed``: check, archive to the history, lock); the winner
writes its own run.json and holds the folder to the round's end. Exactly one must proceed, the
other must get FolderLockedError, and the history must hold the old run (never the winner's live
folder). ``python -m tests.reliability.fresh_race 300`` runs the goal's 300 rounds.
"""
from __future__ import annotations

import json
import multiprocessing
import sys
import tempfile
import time
import warnings
from pathlib import Path

import ignite_seg
from ignite_seg.storage.claim import claimed

RACERS = 2


def _old_run(folder: Path, r: int) -> None:
    (folder / "trials" / "0").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"loaders": {}, "round": r, "by": "old"}))
    (folder / "trials" / "0" / "result.json").write_text("{}")


def _race(root: str, rank: int, barrier, outcomes, rounds: int) -> None:
    warnings.simplefilter("ignore")
    folder, history = Path(root) / "current", Path(root) / "history"
    for r in range(rounds):
        if rank == 0:
            _old_run(folder, r)
        barrier.wait()
        try:
            with claimed(folder, history, fresh=True) as rf:
                (rf.path / "run.json").write_text(json.dumps({"loaders": {}, "round": r, "by": rank}))
                outcomes[r * RACERS + rank] = 1
                barrier.wait()  # the other has tried while this one holds the folder
        except ignite_seg.FolderLockedError:
            outcomes[r * RACERS + rank] = 2
            barrier.wait()
        except Exception:  # anything else is a failure of the round
            outcomes[r * RACERS + rank] = 3
            barrier.wait()
        barrier.wait()
        if rank == 0:  # the next round's old run replaces this round's new one (its history is checked)
            for p in sorted(folder.rglob("*"), reverse=True):
                p.rmdir() if p.is_dir() else p.unlink()


def race(root: Path, rounds: int) -> list[tuple[int, ...]]:
    """Run ``rounds`` rounds under ``root``; per round, each racer's outcome (1 ok, 2 locked, 3 other)."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(RACERS)
    outcomes = ctx.Array("i", rounds * RACERS)
    procs = [ctx.Process(target=_race, args=(str(root), k, barrier, outcomes, rounds)) for k in range(RACERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60 + rounds)
    if [p.exitcode for p in procs] != [0] * RACERS:
        raise RuntimeError(f"racers exited with {[p.exitcode for p in procs]}")
    return [tuple(outcomes[r * RACERS:(r + 1) * RACERS]) for r in range(rounds)]


def archived(root: Path) -> list[dict]:
    """The run.json of every folder moved to the history."""
    return [json.loads((d / "run.json").read_text()) for d in sorted((root / "history").iterdir())]


def main(rounds: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        results = race(Path(tmp), rounds)
        seconds = time.perf_counter() - t0
        good = sum(sorted(o) == [1, 2] for o in results)
        runs = archived(Path(tmp))
        old = sum(run.get("by") == "old" for run in runs)
    print(f"{rounds} rounds in {seconds:.1f} s: exactly one proceeded and the other got FolderLockedError in "
          f"{good}; {len(runs)} folders archived, {old} of them an old run (expected {rounds} and {rounds})")
    return 0 if good == rounds and old == len(runs) == rounds else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))

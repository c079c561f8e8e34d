"""Analysis speed on a digits run with 8 trials (2 cores): images-min, images, video-draft, no-op.

Run from the repository root::

    PYTHONPATH=. python bench/analysis_speed.py [--folder out/bench/digits] [--cores 1,2] [--fake-tuner]

The run is trained once with a fixed recipe (lr 0.05 -> 0.5, batch 32, 40 epochs, 8 trials) and
reused on later calls. Each preset is timed on a fresh copy of the folder (``--force`` semantics:
nothing to skip), then a second analysis of the same folder times the no-op re-analysis; times are
the wall time of ``python -m ignite_seg.reanalyze`` (interpreter start-up included). Goals:
images-min <= 5 s, images <= 15 s, video-draft <= 40 s, no-op <= 1 s.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

GOALS = {"images-min": 5.0, "images": 15.0, "video-draft": 40.0, "no-op": 1.0}


def make_run(folder: Path, cores: int) -> None:
    """Train the digits example with a fixed recipe into ``folder`` (analysis none, data for video)."""
    import ignite_seg

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import digits

    ignite_seg.train(
        digits.model, digits.dataset, ("torch.nn", "CrossEntropyLoss", (), {}),
        folder=folder,
        hyperparameters=ignite_seg.FixedHyperparameters(
            lr_start=0.05, lr_end=0.5, batch_size=32, cycle_size_epochs=10, epochs=40
        ),
        analysis="none", allow_later_analysis_up_to="video", trials=8, trials_strict=True,
        cores=cores, seed=0,
    )


def time_cli(folder: Path, preset: str, cores: int, force: bool = False) -> float:
    """Wall time of ``python -m ignite_seg.reanalyze`` (the user-visible cost, start-up included)."""
    cmd = [sys.executable, "-m", "ignite_seg.reanalyze", str(folder), "--analysis", preset, "--cores", str(cores)]
    if force:
        cmd.append("--force")
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default="out/bench/digits")
    parser.add_argument("--cores", default="2", help="comma-separated core counts to compare, e.g. 1,2")
    parser.add_argument("--presets", default="images-min,images,video-draft")
    parser.add_argument("--fake-tuner", action="store_true",
                        help="add hand-built tuner files (tests/analysis/fakes.py) so the tuning figures are made too")
    args = parser.parse_args()
    folder = Path(args.folder)
    cores_list = [int(c) for c in args.cores.split(",")]
    if not (folder / "results.npz").is_file():
        t0 = time.perf_counter()
        make_run(folder, max(cores_list))
        print(f"made the digits run in {time.perf_counter() - t0:.1f} s")
    work = folder.parent / (folder.name + "_bench")
    rows = []
    for cores in cores_list:
        numbers: dict[str, float] = {}
        for preset in args.presets.split(","):
            if work.exists():
                shutil.rmtree(work)
            shutil.copytree(folder, work, ignore=shutil.ignore_patterns("analysis", "history"))
            if args.fake_tuner:
                _add_fake_tuner(work)
            numbers[preset] = time_cli(work, preset, cores)
            numbers[f"no-op {preset}"] = time_cli(work, preset, cores)
        rows.append((cores, numbers))
    shutil.rmtree(work, ignore_errors=True)
    for cores, numbers in rows:
        print(f"-- {cores} core(s){' (with hand-built tuner files)' if args.fake_tuner else ''}")
        for name, secs in numbers.items():
            goal = GOALS.get("no-op" if name.startswith("no-op") else name)
            verdict = "" if goal is None else ("  ok" if secs <= goal else f"  MISSED (goal {goal:g} s)")
            print(f"{name:22s} {secs:6.2f} s{verdict}")
    print(json.dumps({str(c): n for c, n in rows}))


def _add_fake_tuner(folder: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "analysis"))
    from fakes import add_tuner_files

    add_tuner_files(folder)
    run = json.loads((folder / "run.json").read_text())
    run["hyperparameters"]["kind"] = "tuned"
    (folder / "run.json").write_text(json.dumps(run))


if __name__ == "__main__":
    main()

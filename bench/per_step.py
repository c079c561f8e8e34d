"""Per-step cost of a trial vs a plain PyTorch loop doing the same work, on both data paths.

A whole-run ratio on a shared machine moves by ±25% with whatever else runs. This times every
step instead: both loops note the time at the start of each iteration (the trial through a
handler on ``Events.ITERATION_STARTED``, the plain loops through their ``stamps`` list), so each
interval is one iteration's whole cost (the step, the schedule, the event dispatch, fetching the
next batch, and on snapshot iterations the snapshot). Intervals are split into plain steps and
snapshot steps; the medians of each (pooled over ``--repeats`` runs, interleaved) are robust to
the preemptions a loaded machine adds, and give the per-epoch estimate
``(iterations - snapshots) * step + snapshots * snapshot step`` whose ratio is the goal's figure.
The whole runs' CPU times (``time.process_time``, best of the repeats) are printed beside it.

* ``tensor``: ``bench/overhead.py``'s plain loop batching by tensor indexing vs ``run_trial`` on
  the digits ``TensorDataset`` (the fast tensor path);
* ``loader``: ``bench/real_data.py``'s plain loop over a ``DataLoader`` of a map-style digits
  dataset vs ``run_trial`` on that dataset (the DataLoader path);
* ``features`` (issue 15): the tensor path with an EMA of the weights, linear warmup and the best
  checkpoint by validation perf, in both (``bench/overhead.py --variant features``'s pair);
* ``research`` (issue 30): ``features`` with two named validation sets (``clean``, ``noisy``), a custom
  metric measured on the validation sets only (ignite's ``TopKCategoricalAccuracy(k=2)``; by hand in the
  plain loop) and the best checkpoint by the mean val perf over both sets (``best_over="mean"``).

``--compare TREE`` runs this script alternately on this tree and on another checkout of the
package (e.g. the commit before a change), one process per round, and prints both.

    PYTHONPATH=. python bench/per_step.py [--epochs 20] [--repeats 5] [--cpu 1] [--compare /tmp/old]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

import torch
from common import DIGITS, ROOT, machine

if os.environ.get("PER_STEP_TREE"):  # --compare: the package from the other checkout (common put this one first)
    sys.path.insert(0, os.environ["PER_STEP_TREE"])

LOOPS = ("plain-tensor", "trial-tensor", "plain-loader", "trial-loader", "plain-features", "trial-features",
         "plain-research", "trial-research")
#: The loops compared pairwise: trial-<path> against plain-<path>.
PATHS = ("tensor", "loader", "features", "research")
BATCH, PER_EPOCH = 32, 10


def _stamped_trial(task: object, stamps: list[float] | None) -> None:
    """``run_trial(task)`` with the time noted at the start of every iteration (``stamps`` not ``None``)."""
    from ignite.engine import Events

    import ignite_seg.engine.trainer as trainer

    if stamps is None:
        out = trainer.run_trial(task)
        assert out.status == "completed", out.error_text
        return
    create = trainer.create_trainer

    def stamped(*args, **kwargs):  # type: ignore[no-untyped-def]
        engine = create(*args, **kwargs)
        engine.add_event_handler(Events.ITERATION_STARTED, lambda _: stamps.append(time.perf_counter()))
        return engine

    trainer.create_trainer = stamped
    try:
        out = trainer.run_trial(task)
    finally:
        trainer.create_trainer = create
    assert out.status == "completed", out.error_text


def _loops(epochs: int) -> dict[str, Callable[[list[float] | None], object]]:
    from overhead import EMA_DECAY, WARMUP_EPOCHS, plain_loop
    from real_data import LISTED, plain_loader_loop

    import ignite_seg
    from ignite_seg.api import trial_seed
    from ignite_seg.config.specs import normalize_spec
    from ignite_seg.engine.trainer import TrialSetup, TrialTask

    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=BATCH, cycle_size_epochs=8, epochs=epochs)

    def task(dataset: tuple) -> TrialTask:
        setup = TrialSetup(model=normalize_spec(DIGITS["model"], "m"), dataset=normalize_spec(dataset, "d"),
                           loss=normalize_spec(DIGITS["loss"], "l"), accuracy_style="classification", device="cpu",
                           snapshots_per_epoch=PER_EPOCH)
        return TrialTask(trial_id=0, setup=setup, hparams=hp, seed=trial_seed(0, 0), threads=1)

    tensor_task, loader_task = task(DIGITS["dataset"]), task(LISTED)
    featured = dataclasses.replace(
        tensor_task, hparams=dataclasses.replace(hp, ema_decay=EMA_DECAY, warmup_epochs=WARMUP_EPOCHS),
        setup=dataclasses.replace(tensor_task.setup, best_metric="perf", best_mode="max"))
    research = dataclasses.replace(  # issue 30's goal: every feature on
        featured, setup=dataclasses.replace(
            featured.setup, dataset=normalize_spec(("overhead", "two_val_digits", (), {}), "d"),
            metrics={"top2": normalize_spec(("ignite.metrics", "TopKCategoricalAccuracy", (), {"k": 2}), "m")},
            val_only_metrics=("top2",), best_parts=("val", "val_noisy")))
    return {
        "plain-tensor": lambda s: plain_loop(epochs, BATCH, (0.05, 0.5), 8, 0, True, PER_EPOCH, stamps=s),
        "trial-tensor": lambda s: _stamped_trial(tensor_task, s),
        "plain-loader": lambda s: plain_loader_loop(epochs, hp, 0, PER_EPOCH, stamps=s),
        "trial-loader": lambda s: _stamped_trial(loader_task, s),
        "plain-features": lambda s: plain_loop(epochs, BATCH, (0.05, 0.5), 8, 0, True, PER_EPOCH, features=True,
                                               stamps=s),
        "trial-features": lambda s: _stamped_trial(featured, s),
        "plain-research": lambda s: plain_loop(epochs, BATCH, (0.05, 0.5), 8, 0, True, PER_EPOCH, features=True,
                                               stamps=s, research=True),
        "trial-research": lambda s: _stamped_trial(research, s),
    }


def measure(epochs: int, repeats: int) -> dict[str, dict[str, list[float]]]:
    """Per loop: the whole runs' CPU seconds and every run's iteration intervals (seconds)."""
    torch.set_num_threads(1)
    loops = _loops(epochs)
    for fn in loops.values():  # warm up (imports, first-call costs)
        fn([])
    got: dict[str, dict[str, list[float]]] = {k: {"cpu": [], "intervals": []} for k in LOOPS}
    for r in range(repeats):
        for name in LOOPS[r % len(LOOPS):] + LOOPS[: r % len(LOOPS)]:
            stamps: list[float] = []
            t = time.process_time()
            loops[name](stamps)
            got[name]["cpu"].append(time.process_time() - t)
            got[name]["intervals"].extend(b - a for a, b in zip(stamps, stamps[1:]))
    return got


def summary(got: dict[str, dict[str, list[float]]], epochs: int) -> dict[str, float]:
    """Median step and snapshot-step times (us), the per-epoch estimates and the trial/plain ratios."""
    from ignite_seg.engine.recorders import snapshot_iterations

    n_iter = (1437 + BATCH - 1) // BATCH  # the digits training set
    snaps = set(snapshot_iterations(n_iter, epochs, PER_EPOCH))
    out: dict[str, float] = {}
    for name, g in got.items():
        per_run = n_iter * epochs - 1
        steps, snap_steps = [], []
        for k, dt in enumerate(g["intervals"]):
            (snap_steps if (k % per_run) + 1 in snaps else steps).append(dt)
        out[f"{name} step us"] = statistics.median(steps) * 1e6
        out[f"{name} snapshot step us"] = statistics.median(snap_steps) * 1e6
        out[f"{name} ms/epoch"] = ((n_iter - PER_EPOCH) * out[f"{name} step us"]
                                   + PER_EPOCH * out[f"{name} snapshot step us"]) / 1e3
        out[f"{name} best cpu s"] = min(g["cpu"])
    for path in PATHS:
        for what in ("step us", "snapshot step us", "ms/epoch", "best cpu s"):
            out[f"{path} ratio {what}"] = out[f"trial-{path} {what}"] / out[f"plain-{path} {what}"]
    return out


def _print(label: str, s: dict[str, float]) -> None:
    print(f"  {label}")
    for name in LOOPS:
        print(f"    {name:13s} step {s[f'{name} step us']:6.1f} us, snapshot step {s[f'{name} snapshot step us']:7.1f} us, "
              f"{s[f'{name} ms/epoch']:6.2f} ms/epoch, whole run {s[f'{name} best cpu s']:.3f} s CPU (best)")
    for path in PATHS:
        print(f"    {path} path trial/plain: " + ", ".join(
            f"{what} {s[f'{path} ratio {what}']:.3f}x" for what in ("step us", "snapshot step us", "ms/epoch", "best cpu s")))


def compare(tree: str, args: argparse.Namespace) -> None:
    """Alternate one-round processes of this script on this tree and on ``tree``."""
    trees = {"this": ROOT, "other": os.path.abspath(tree)}
    got: dict[str, dict[str, dict[str, list[float]]]] = {}
    for _ in range(args.rounds):
        for label, root in trees.items():
            env = dict(os.environ, PER_STEP_TREE=root)
            cmd = [sys.executable, os.path.abspath(__file__), "--json", "--repeats", str(args.repeats),
                   "--epochs", str(args.epochs)] + (["--cpu", str(args.cpu)] if args.cpu is not None else [])
            run = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
            for name, g in run.items():
                for key, values in g.items():
                    got.setdefault(label, {}).setdefault(name, {}).setdefault(key, []).extend(values)
    for label, root in trees.items():
        _print(f"{label} ({root}):", summary(got[label], args.epochs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=None, help="pin this process to one core")
    ap.add_argument("--compare", default=None, help="another checkout of the package to measure alternately")
    ap.add_argument("--rounds", type=int, default=3, help="with --compare: processes per tree")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    if not args.json:
        print(f"machine: {machine()}; load {os.getloadavg()[0]:.1f}; digits MLP, {args.epochs} epochs, batch {BATCH}, "
              f"{PER_EPOCH} snapshots per epoch, pinned to core {args.cpu}")
    if args.compare:
        compare(args.compare, args)
    else:
        got = measure(args.epochs, args.repeats)
        if args.json:
            print(json.dumps(got))
            return
        _print(f"medians over {args.repeats} interleaved runs of each:", summary(got, args.epochs))
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

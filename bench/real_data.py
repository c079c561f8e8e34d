"""Real-data paths (issue 14), measured side by side in one run.

* ``lazy``: a lazy dataset of 50,000 items of 3x32x32 (computed on the fly in ``__getitem__``, never
  held) through ``train()``: the peak RSS of the calling process and the time from the call to
  the first training step in the worker (goals: ≤ 500 MiB, ≤ 3 s). The trial is stopped after a
  few steps (the model raises): only the start is measured. ``IGNITE_SEG_START_METHOD=fork``
  measures workers forked from the caller instead of the fork server.
* ``loader``: one digits trial whose dataset is map-style (not a TensorDataset), so it takes the
  DataLoader path, vs a plain PyTorch loop with the same DataLoader doing the same work (training,
  10 snapshots per epoch on fixed subsets, final full-set metrics); best of ``--repeats``
  (goal: ≤ 1.10x). The tensor fast path is measured by ``bench/overhead.py``.

    PYTHONPATH=.:bench python bench/real_data.py [--part lazy|loader|all] [--epochs 20] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from common import DIGITS, machine

import ignite_seg
from ignite_seg.api import trial_seed
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.trainer import TrialSetup, TrialTask, run_trial
from ignite_seg.runtime.workers import start_method

LISTED = ("real_bench", "digits_listed", (), {})


def _import_floor() -> float:
    """Seconds a fresh interpreter takes to import what a trial worker needs (the fork server's preload)."""
    from ignite_seg.api import WORKER_PRELOAD

    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import " + ", ".join(WORKER_PRELOAD)], check=True,
                   env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    return time.perf_counter() - t


def part_lazy() -> None:
    stamp = tempfile.mktemp(prefix="first_step_")
    os.environ["BENCH_FIRST_STEP"] = stamp
    os.environ["BENCH_STOP_AFTER"] = "3"
    hp = ignite_seg.FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=128, cycle_size_epochs=1, epochs=1)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.time()
    ignite_seg.train(("lazy_task", "StampedCNN", (), {}), ("lazy_task", "lazy_images", (), {}),
                     ("torch.nn", "CrossEntropyLoss", (), {}), folder=tempfile.mkdtemp() + "/run",
                     hyperparameters=hp, analysis="none", allow_later_analysis_up_to="none", trials=1,
                     trials_strict=True, cores=1, seed=0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    first, built = (float(open(p).read()) - t0 if os.path.exists(p) else float("nan") for p in (stamp, stamp + ".built"))
    print(f"[lazy] 50,000 items of 3x32x32: caller peak RSS {peak:.0f} MiB (at start {rss0:.0f} MiB; goal <= 500), "
          f"first training step {first:.2f} s after the call (goal <= 3 s; workers started by {start_method()})")
    print(f"[lazy]   of which: model built in the trial worker at {built:.2f} s (imports, worker start), "
          f"then {first - built:.2f} s to the first step (snapshot subsets read, epoch-0 snapshot); "
          f"a fresh interpreter importing the worker's modules alone: {_import_floor():.2f} s; "
          f"load {os.getloadavg()[0]:.1f}")


def _snapshot_subsets(train_set, val_set, seed: int):
    rng = np.random.default_rng(seed)
    m = min(1024, len(train_set), len(val_set))
    return [np.sort(rng.choice(len(ds), m, replace=False)) for ds in (train_set, val_set)]


def plain_loader_loop(epochs: int, hp: ignite_seg.FixedHyperparameters, seed: int, per_epoch: int = 10,
                      stamps: list[float] | None = None) -> float:
    """The loop a user writes around a DataLoader over a map-style dataset, with the same measurements."""
    import digits
    import real_bench

    torch.manual_seed(seed)
    model = digits.model()
    train_set, val_set = real_bench.digits_listed()
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=hp.lr_start)
    collate = torch.utils.data.default_collate
    subsets = [collate([ds[int(i)] for i in idx]) for ds, idx in zip((train_set, val_set),
                                                                      _snapshot_subsets(train_set, val_set, seed))]
    loader = torch.utils.data.DataLoader(train_set, batch_size=hp.batch_size, shuffle=True,
                                         generator=torch.Generator().manual_seed(seed))
    n_iter = len(loader)
    cycle = hp.cycle_size_epochs * n_iter
    snaps = {int(round(k * n_iter / per_epoch)) for k in range(1, per_epoch * epochs + 1)}
    curve = []

    def measure(batches):
        model.eval()
        with torch.no_grad():
            for x, y in batches:
                out = model(x)
                curve.append((loss_fn(out, y).item(), (out.argmax(1) == y).float().mean().item()))
        model.train()

    measure(subsets)
    it = 0
    for _ in range(epochs):
        for x, y in loader:
            if stamps is not None:  # bench/per_step.py: the start of every step
                stamps.append(time.perf_counter())
            phase = (it % cycle) / cycle
            frac = 2 * phase if phase < 0.5 else 2 - 2 * phase
            for g in opt.param_groups:
                g["lr"] = hp.lr_start + (hp.lr_end - hp.lr_start) * frac
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            it += 1
            if it in snaps:
                measure(subsets)
    for ds in (train_set, val_set):
        measure(torch.utils.data.DataLoader(ds, batch_size=1024))
    return curve[-1][1]


def part_loader(epochs: int, repeats: int) -> None:
    torch.set_num_threads(1)
    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=32, cycle_size_epochs=8, epochs=epochs)
    setup = TrialSetup(model=normalize_spec(DIGITS["model"], "m"), dataset=normalize_spec(LISTED, "d"),
                       loss=normalize_spec(DIGITS["loss"], "l"), accuracy_style="classification", device="cpu")
    task = TrialTask(trial_id=0, setup=setup, hparams=hp, seed=trial_seed(0, 0), threads=1)
    times: dict[str, list[float]] = {"plain DataLoader loop": [], "ignite_seg run_trial": []}
    accs: dict[str, float] = {}
    for _ in range(repeats):
        t = time.perf_counter()
        accs["plain DataLoader loop"] = plain_loader_loop(epochs, hp, 0)
        times["plain DataLoader loop"].append(time.perf_counter() - t)
        t = time.perf_counter()
        out = run_trial(task)
        times["ignite_seg run_trial"].append(time.perf_counter() - t)
        accs["ignite_seg run_trial"] = out.result.metrics.get("perf_val", float("nan"))
        assert out.status == "completed", out.error_text
    best = {k: min(v) for k, v in times.items()}
    base = best["plain DataLoader loop"]
    print(f"[loader] digits as a map-style dataset (DataLoader path), {epochs} epochs, batch 32, best of {repeats}:")
    for k, v in best.items():
        print(f"  {k:24s} {v:6.2f} s  val acc {accs[k]:.4f}  ratio {v / base:.2f}x (goal <= 1.10x)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="all", choices=["lazy", "loader", "all"])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {machine()}")
    if args.part in ("lazy", "all"):
        part_lazy()
    if args.part in ("loader", "all"):
        part_loader(args.epochs, args.repeats)


if __name__ == "__main__":
    main()

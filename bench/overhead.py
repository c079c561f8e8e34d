"""One digits trial through ignite_seg vs a plain PyTorch loop doing the same work, in one run.

Same recipe (MLP 64-32-10, SGD, triangular cyclical LR, batch 32, 80 epochs, 10 snapshots per
epoch on fixed subsets of min(1024, n_train, n_val) points, final full-set metrics), one torch
thread. Measured side by side, alternating, best of ``--repeats``:

* ``plain-dataloader``: the loop a user would write with ``DataLoader(TensorDataset)``;
* ``plain-tensor``: the same loop batching by tensor indexing (the fastest plain loop);
* ``ignite_seg run_trial``: the trainer of one trial (ignite Engine + handlers), in-process;
* ``ignite_seg train()``: the whole call with ``cores=1``: validation, worker start-up, the trial,
  the files written.

    python bench/overhead.py [--epochs 80] [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from common import DIGITS, machine

import ignite_seg
from ignite_seg.api import trial_seed
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.trainer import TrialTask, run_trial


def plain_loop(epochs: int, batch_size: int, lr: tuple[float, float], cycle_epochs: float, seed: int,
               tensor_batches: bool, per_epoch: int = 10, stamps: list[float] | None = None) -> float:
    import digits

    torch.manual_seed(seed)
    model = digits.model()
    train_set, val_set = digits.dataset()
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=lr[0])
    xt, yt = train_set.tensors
    xv, yv = val_set.tensors
    rng = np.random.default_rng(seed)
    m = min(1024, len(xt), len(xv))
    it_, iv_ = np.sort(rng.choice(len(xt), m, replace=False)), np.sort(rng.choice(len(xv), m, replace=False))
    subsets = [(xt[it_], yt[it_]), (xv[iv_], yv[iv_])]
    loader = torch.utils.data.DataLoader(train_set, batch_size=batch_size, shuffle=True)
    n_iter = (len(xt) + batch_size - 1) // batch_size
    cycle = cycle_epochs * n_iter
    snaps = {int(round(k * n_iter / per_epoch)) for k in range(1, per_epoch * epochs + 1)}
    curve = []

    def measure():
        model.eval()
        with torch.no_grad():
            for x, y in subsets:
                out = model(x)
                curve.append((loss_fn(out, y).item(), (out.argmax(1) == y).float().mean().item()))
        model.train()

    measure()
    it = 0
    for _ in range(epochs):
        if tensor_batches:
            perm = torch.randperm(len(xt))
            batches = ((xt[perm[i:i + batch_size]], yt[perm[i:i + batch_size]]) for i in range(0, len(xt), batch_size))
        else:
            batches = iter(loader)
        for x, y in batches:
            if stamps is not None:  # bench/per_step.py: the start of every step
                stamps.append(time.perf_counter())
            phase = (it % cycle) / cycle
            frac = 2 * phase if phase < 0.5 else 2 - 2 * phase
            for g in opt.param_groups:
                g["lr"] = lr[0] + (lr[1] - lr[0]) * frac
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            it += 1
            if it in snaps:
                measure()
    model.eval()
    with torch.no_grad():
        out = model(xv)
        return float((out.argmax(1) == yv).float().mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=80)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=32, cycle_size_epochs=8,
                                         epochs=args.epochs)
    task = TrialTask(trial_id=0, model=normalize_spec(DIGITS["model"], "m"),
                     dataset=normalize_spec(DIGITS["dataset"], "d"), loss=normalize_spec(DIGITS["loss"], "l"),
                     hparams=hp, accuracy_style="classification", seed=trial_seed(0, 0), device="cpu", threads=1)
    timings: dict[str, list[float]] = {k: [] for k in ("plain-dataloader", "plain-tensor", "run_trial", "train")}
    accs: dict[str, float] = {}
    for r in range(args.repeats):
        t = time.perf_counter()
        accs["plain-dataloader"] = plain_loop(args.epochs, 32, (0.05, 0.5), 8, 0, tensor_batches=False)
        timings["plain-dataloader"].append(time.perf_counter() - t)
        t = time.perf_counter()
        accs["plain-tensor"] = plain_loop(args.epochs, 32, (0.05, 0.5), 8, 0, tensor_batches=True)
        timings["plain-tensor"].append(time.perf_counter() - t)
        t = time.perf_counter()
        out = run_trial(task)
        timings["run_trial"].append(time.perf_counter() - t)
        accs["run_trial"] = out.metrics["perf_val"]
        t = time.perf_counter()
        res = ignite_seg.train(DIGITS["model"], DIGITS["dataset"], DIGITS["loss"], folder=f"/tmp/bench_overhead/{r}",
                               hyperparameters=hp, analysis="none", trials=1, trials_strict=True, cores=1, seed=0)
        timings["train"].append(time.perf_counter() - t)
        accs["train"] = res.trials[0].perf_val
    best = {k: min(v) for k, v in timings.items()}
    print(f"machine: {machine()}; digits MLP, {args.epochs} epochs, batch 32, best of {args.repeats}")
    for k, v in best.items():
        print(f"  {k:18s} {v:7.2f} s   val acc {accs[k]:.4f}   "
              f"ratio vs plain-dataloader {v / best['plain-dataloader']:.2f}x, vs plain-tensor {v / best['plain-tensor']:.2f}x")


if __name__ == "__main__":
    main()

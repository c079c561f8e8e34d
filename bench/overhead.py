"""One digits trial through ignite_seg vs a plain PyTorch loop doing the same work, in one run.

Same recipe (MLP 64-32-10, SGD, triangular cyclical LR, batch 32, 80 epochs, 10 snapshots per
epoch on fixed subsets of min(1024, n_train, n_val) points, final full-set metrics), one torch
thread. Measured side by side, alternating, best of ``--repeats``:

* ``plain-dataloader``: the loop a user would write with ``DataLoader(TensorDataset)``;
* ``plain-tensor``: the same loop batching by tensor indexing (the fastest plain loop);
* ``ignite_seg run_trial``: the trainer of one trial (ignite Engine + handlers), in-process;
* ``ignite_seg train()``: the whole call with ``cores=1``: validation, worker start-up, the trial,
  the files written.

``--variant features`` (issue 15) times the trainer with an EMA of the weights (decay 0.99), a
linear warmup (2 epochs) and the best checkpoint by the validation perf against the fastest plain
loop doing the same: the warmup LR, an EMA update after every step, snapshots measured on the EMA
weights, and a copy of the EMA weights kept whenever a snapshot's val perf beats the best so far
(goal: at most 1.15x).

``--model cnn`` trains a small CNN on the same 8x8 digits (two 3x3 convolutions of 8 and 16
channels, a 2x2 max-pool, a linear layer) instead of the 64-32-10 MLP: a step like a user's model
takes (about ten times the MLP's on this machine), beside the MLP's worst case of a step that costs
nearly nothing.

    python bench/overhead.py [--epochs 80] [--repeats 3] [--variant base|features] [--model mlp|cnn]
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import time

import numpy as np
import torch
from common import DIGITS, machine

import ignite_seg
from ignite_seg.api import trial_seed
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.trainer import TrialOutcome, TrialSetup, TrialTask, run_trial

EMA_DECAY = 0.99
WARMUP_EPOCHS = 2.0


def noisy_copy(val_set: torch.utils.data.TensorDataset) -> torch.utils.data.TensorDataset:
    """The validation set with fixed Gaussian noise (sd 2 on pixels of 0..16): a second validation set."""
    x, y = val_set.tensors
    return torch.utils.data.TensorDataset(x + 2.0 * torch.randn(x.shape, generator=torch.Generator().manual_seed(1)), y)


def two_val_digits() -> ignite_seg.Data:
    """Digits with two named validation sets, ``clean`` and ``noisy`` (the research pair's dataset)."""
    import digits

    train_set, val_set = digits.dataset()
    return ignite_seg.Data(train_set, {"clean": val_set, "noisy": noisy_copy(val_set)})


def cnn() -> torch.nn.Module:
    """A small CNN on the 64 digit pixels as a 1x8x8 image (``--model cnn``)."""
    nn = torch.nn
    return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 4 * 4, 10))


#: The models of ``--model``: the plain loop's constructor and the trial's loader spec.
MODELS = {"mlp": DIGITS["model"], "cnn": ("overhead", "cnn", (), {})}


def plain_loop(epochs: int, batch_size: int, lr: tuple[float, float], cycle_epochs: float, seed: int,
               tensor_batches: bool, per_epoch: int = 10, features: bool = False,
               stamps: list[float] | None = None, model_name: str = "mlp", research: bool = False) -> float:
    """The plain loop; ``features``: EMA, warmup and the best weights by val perf; ``research`` (with
    ``features``, issue 30): two validation sets (``two_val_digits``: the val set and a noisy copy), a top-2
    accuracy measured on the validation sets only, the best weights by the mean val perf over both sets."""
    import importlib

    import digits

    torch.manual_seed(seed)
    module, name, _, _ = MODELS[model_name]
    model = getattr(importlib.import_module(module), name)()
    train_set, val_set = digits.dataset()
    noisy_set = noisy_copy(val_set)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=lr[0])
    xt, yt = train_set.tensors
    xv, yv = val_set.tensors
    rng = np.random.default_rng(seed)
    m = min(1024, len(xt), len(xv))
    it_, iv_ = np.sort(rng.choice(len(xt), m, replace=False)), np.sort(rng.choice(len(xv), m, replace=False))
    subsets = [(xt[it_], yt[it_]), (xv[iv_], yv[iv_])]
    if research:  # the second validation set's subset (same size, same draw as the first's)
        xn, yn = noisy_set.tensors
        subsets.append((xn[iv_], yn[iv_]))
    loader = torch.utils.data.DataLoader(train_set, batch_size=batch_size, shuffle=True)
    n_iter = (len(xt) + batch_size - 1) // batch_size
    cycle = cycle_epochs * n_iter
    snaps = {int(round(k * n_iter / per_epoch)) for k in range(1, per_epoch * epochs + 1)}
    curve = []
    warmup = int(round(WARMUP_EPOCHS * n_iter)) if features else 0
    ema = [p.detach().clone() for p in model.parameters()] if features else None
    raw = [p.detach() for p in model.parameters()]
    evaluated = copy.deepcopy(model) if features else model  # the EMA weights' model
    best = {"perf": -1.0, "state": None}
    top2: list[float] = []

    def measure():
        if ema is not None:
            with torch.no_grad():
                for e, p in zip(evaluated.parameters(), ema):
                    e.copy_(p)
        evaluated.eval()
        with torch.no_grad():
            for k, (x, y) in enumerate(subsets):
                out = evaluated(x)
                curve.append((loss_fn(out, y).item(), (out.argmax(1) == y).float().mean().item()))
                if research and k > 0:  # the validation-only metric
                    top2.append((out.topk(2, 1).indices == y[:, None]).any(1).float().mean().item())
        evaluated.train()
        perf = (curve[-1][1] + curve[-2][1]) / 2 if research else curve[-1][1]
        if features and perf > best["perf"]:
            best["perf"], best["state"] = perf, {k: v.clone() for k, v in evaluated.state_dict().items()}

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
            if it < warmup:  # from 0 up to the schedule's first value
                rate = lr[0] * it / (warmup - 1)
            else:
                phase = ((it - max(warmup - 1, 0)) % cycle) / cycle
                frac = 2 * phase if phase < 0.5 else 2 - 2 * phase
                rate = lr[0] + (lr[1] - lr[0]) * frac
            for g in opt.param_groups:
                g["lr"] = rate
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            if ema is not None:  # list-wise, as fast as a hand-written EMA gets
                torch._foreach_mul_(ema, EMA_DECAY)
                torch._foreach_add_(ema, raw, alpha=1 - EMA_DECAY)
            it += 1
            if it in snaps:
                measure()
    measure()  # the final weights, as the trainer does for model.pt
    evaluated.eval()
    with torch.no_grad():
        out = evaluated(xv)
        return float((out.argmax(1) == yv).float().mean())


def features_variant(args: argparse.Namespace, hp: ignite_seg.FixedHyperparameters, task: TrialTask) -> None:
    """EMA + warmup + best checkpoint: run_trial vs the plain tensor loop doing the same, alternating with
    the two without the features (so the features' own cost shows apart from the base gap).

    Both wall and CPU time (``time.process_time``) are kept: on a shared machine the CPU time is the
    steadier of the two."""
    featured = dataclasses.replace(task, hparams=dataclasses.replace(hp, ema_decay=EMA_DECAY, warmup_epochs=WARMUP_EPOCHS),
                                   setup=dataclasses.replace(task.setup, best_metric="perf", best_mode="max"))
    runs = {
        "plain-tensor+features": lambda: plain_loop(args.epochs, 32, (0.05, 0.5), 8, 0, tensor_batches=True,
                                                    features=True, model_name=args.model),
        "run_trial+features": lambda: _perf(run_trial(featured)),
        "plain-tensor": lambda: plain_loop(args.epochs, 32, (0.05, 0.5), 8, 0, tensor_batches=True,
                                           model_name=args.model),
        "run_trial": lambda: _perf(run_trial(task)),
    }
    wall: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    accs: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, run in runs.items():
            t, c = time.perf_counter(), time.process_time()
            accs[name] = run()
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    print(f"machine: {machine()}; load {os.getloadavg()[0]:.1f}; digits {args.model}, {args.epochs} epochs, batch 32, "
          f"EMA {EMA_DECAY}, warmup "
          f"{WARMUP_EPOCHS} epochs, best checkpoint by val perf; best of {args.repeats}")
    for k in runs:
        print(f"  {k:22s} wall {min(wall[k]):6.2f} s  cpu {min(cpu[k]):6.2f} s   val acc {accs[k]:.4f}   "
              f"(walls: {', '.join(f'{x:.2f}' for x in wall[k])})")
    for what, t in (("wall", wall), ("cpu", cpu)):
        best = {k: min(v) for k, v in t.items()}
        print(f"  {what}: run_trial+features / plain+features {best['run_trial+features'] / best['plain-tensor+features']:.2f}x "
              f"(goal <= 1.15x); without the features {best['run_trial'] / best['plain-tensor']:.2f}x; the features "
              f"add {best['run_trial+features'] / best['run_trial']:.2f}x to run_trial, "
              f"{best['plain-tensor+features'] / best['plain-tensor']:.2f}x to the plain loop")


def _perf(out: TrialOutcome) -> float:
    assert out.status == "completed", out.error_text
    return out.result.metrics["perf_val"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=80)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variant", choices=("base", "features"), default="base")
    ap.add_argument("--model", choices=tuple(MODELS), default="mlp")
    args = ap.parse_args()
    torch.set_num_threads(1)
    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=32, cycle_size_epochs=8,
                                         epochs=args.epochs)
    setup = TrialSetup(model=normalize_spec(MODELS[args.model], "m"), dataset=normalize_spec(DIGITS["dataset"], "d"),
                       loss=normalize_spec(DIGITS["loss"], "l"), accuracy_style="classification", device="cpu")
    task = TrialTask(trial_id=0, setup=setup, hparams=hp, seed=trial_seed(0, 0), threads=1)
    if args.variant == "features":
        features_variant(args, hp, task)
        return
    timings: dict[str, list[float]] = {k: [] for k in ("plain-dataloader", "plain-tensor", "run_trial", "train")}
    accs: dict[str, float] = {}
    for r in range(args.repeats):
        t = time.perf_counter()
        accs["plain-dataloader"] = plain_loop(args.epochs, 32, (0.05, 0.5), 8, 0, tensor_batches=False,
                                              model_name=args.model)
        timings["plain-dataloader"].append(time.perf_counter() - t)
        t = time.perf_counter()
        accs["plain-tensor"] = plain_loop(args.epochs, 32, (0.05, 0.5), 8, 0, tensor_batches=True,
                                          model_name=args.model)
        timings["plain-tensor"].append(time.perf_counter() - t)
        t = time.perf_counter()
        out = run_trial(task)
        timings["run_trial"].append(time.perf_counter() - t)
        accs["run_trial"] = out.result.metrics["perf_val"]
        t = time.perf_counter()
        res = ignite_seg.train(MODELS[args.model], DIGITS["dataset"], DIGITS["loss"], folder=f"/tmp/bench_overhead/{r}",
                               hyperparameters=hp, analysis="none", trials=1, trials_strict=True, cores=1, seed=0)
        timings["train"].append(time.perf_counter() - t)
        accs["train"] = res.trials[0].perf_val
    best = {k: min(v) for k, v in timings.items()}
    print(f"machine: {machine()}; load {os.getloadavg()[0]:.1f}; digits {args.model}, {args.epochs} epochs, batch 32, "
          f"best of {args.repeats}")
    for k, v in best.items():
        print(f"  {k:18s} {v:7.2f} s   val acc {accs[k]:.4f}   "
              f"ratio vs plain-dataloader {v / best['plain-dataloader']:.2f}x, vs plain-tensor {v / best['plain-tensor']:.2f}x")


if __name__ == "__main__":
    main()

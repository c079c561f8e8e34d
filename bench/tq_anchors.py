"""Anchors of the tuner benchmark (issue 18): Optuna's TPE and an LR-free optimizer (Prodigy).

Both are dev-only dependencies (``pip install optuna prodigyopt``); a missing one is reported in the
results as ``{"missing": "<package>"}`` and the benchmark goes on.

* :func:`tpe_anchor`: Optuna's TPE over (log peak LR, batch size) of the grid's own recipe (the
  trials' schedule and epochs), each candidate trained once and scored on the **validation set**
  (as the issue measured it: an advantage the tuner, which never reads the validation set, does not
  have), until it has used the worker CPU seconds ``fast`` used; its best recipe then trains
  ``trials`` fresh seeds.
* :func:`prodigy_anchor`: Prodigy (``lr=1``, its default) at batch 32 for the trials' epochs, in a
  plain loop in a worker, ``seeds`` seeds.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


def missing(package: str) -> dict[str, Any] | None:
    """``{"missing": package, ...}`` when ``package`` is not installed, else ``None``."""
    if importlib.util.find_spec(package) is None:
        return {"missing": package, "install": f"pip install {package}"}
    return None


def tpe_anchor(
    run: Callable[[list[tuple[float, int, int]]], list[tuple[float, float]]],
    lr_bounds: tuple[float, float], batches: tuple[int, ...], budget_cpu: float, *, seed: int, trials: int,
) -> dict[str, Any]:
    """TPE given ``budget_cpu`` worker CPU seconds, then its best recipe re-run with ``trials`` seeds.

    ``run([(lr, batch, seed), ...])`` trains the grid recipe for each and returns ``(val perf, worker
    CPU seconds)`` per entry (two at a time: the pool's two workers).
    """
    gone = missing("optuna")
    if gone:
        return gone
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    spent, history = 0.0, []
    while spent < budget_cpu or len(history) < 2:
        asked = [study.ask() for _ in range(2)]
        cells = [(t.suggest_float("lr", *lr_bounds, log=True), t.suggest_categorical("batch", list(batches)),
                  4000 + 100 * seed + len(history) + i) for i, t in enumerate(asked)]
        for t, cell, (perf, cpu) in zip(asked, cells, run(cells)):
            study.tell(t, perf if math.isfinite(perf) else 0.0)
            spent += cpu
            history.append({"lr": cell[0], "batch": cell[1], "val_perf": perf, "cpu": cpu})
    best = study.best_params
    fresh = run([(best["lr"], best["batch"], 5000 + 100 * seed + k) for k in range(trials)])
    perfs = np.array([p for p, _ in fresh])
    return {"history": history, "spent_cpu": spent, "best": best, "fresh_perfs": perfs.tolist(),
            "val_perf_mean": float(np.nanmean(perfs))}


@dataclass(frozen=True)
class ProdigyTask:
    """One Prodigy run: the task's loaders, batch size, epochs and seed (picklable)."""

    key: int
    specs: dict[str, Any]
    style: str
    batch_size: int
    epochs: int
    seed: int


def run_prodigy(task: ProdigyTask) -> tuple[int, float, float]:
    """Train with Prodigy in this (worker) process; ``(key, val perf, CPU seconds)``."""
    import time

    import torch
    from prodigyopt import Prodigy

    from ignite_seg.engine.batching import BatchSource
    from ignite_seg.engine.scoring import Scorer
    from ignite_seg.engine.trainer import build_recipe

    cpu0 = time.process_time()
    torch.set_num_threads(1)
    torch.manual_seed(task.seed)
    recipe = build_recipe(task.specs["model"], task.specs["dataset"], task.specs["loss"])
    data, net, loss_fn, prepare = recipe.data, recipe.model, recipe.loss_fn, recipe.prepare_batch
    train = BatchSource(data.train, data)
    opt = Prodigy(net.parameters(), lr=1.0)
    gen = torch.Generator().manual_seed(task.seed)
    for _ in range(task.epochs):
        for batch in train.loader(task.batch_size, gen, shuffle=True):
            x, y = prepare(batch, "cpu", False)
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            if not torch.isfinite(loss):
                return task.key, float("nan"), time.process_time() - cpu0
            loss.backward()
            opt.step()
    scorer = Scorer(loss_fn, task.style, prepare_batch=prepare)
    perf = scorer.measure(net, BatchSource(data.primary, data).in_order())["perf"]
    return task.key, float(perf), time.process_time() - cpu0

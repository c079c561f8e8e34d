"""The trainer's per-step and per-snapshot work taken apart, for ``bench/instructions.py --what components``.

Each loop runs ``n`` units of one configuration: engine iterations with a no-op step (the
digits model's weights untouched, so the EMA averages real tensors) and a growing set of the
trial's handlers, or ``n`` snapshots / best-checkpoint calls / plain measurements on the digits
fixed subsets. The instruction count per unit is the difference between two ``n`` over their
difference (fixed costs cancel); a handler's own cost is the difference between two rows.
"""
from __future__ import annotations

import copy
import dataclasses
import os
import sys
from typing import Callable

import numpy as np
import torch
from common import ROOT  # noqa: F401  (puts the package and examples/ on the path)
from ignite.engine import Engine, Events

if os.environ.get("PER_STEP_TREE"):  # instructions.py --tree: the package from another checkout
    sys.path.insert(0, os.environ["PER_STEP_TREE"])

#: The configurations in the order they add work (each row the one above plus one thing).
ENGINE_ROWS = ("engine", "+triangular", "+warmup", "+ema", "+divergence", "+recorder")
PLAIN_SNAPSHOT_ROWS = ("plain-measure", "plain-measure+ema", "plain-measure+ema+best")
SNAPSHOT_ROWS = ("scorer", "snapshot", "snapshot+best-same", "snapshot+best-better")


def _digits():  # type: ignore[no-untyped-def]
    import digits

    from ignite_seg import FixedHyperparameters

    torch.manual_seed(0)
    model = digits.model()
    train, val = digits.dataset()
    rng = np.random.default_rng(0)
    m = min(1024, len(train), len(val))
    sets = {}
    for part, ds in (("train", train), ("val", val)):
        idx = torch.from_numpy(np.sort(rng.choice(len(ds), m, replace=False)))
        sets[part] = [(ds.tensors[0][idx], ds.tensors[1][idx])]  # one prepared batch per part
    hp = FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=32, cycle_size_epochs=8, epochs=10)
    return model, sets, hp


def _engine(rows: int, n: int) -> Callable[[], None]:
    """An engine with the first ``rows`` of :data:`ENGINE_ROWS`' handlers, run for ``n`` no-op iterations."""
    from ignite_seg.engine.ema import attach_ema
    from ignite_seg.engine.handlers import DivergenceStop
    from ignite_seg.engine.recorders import ThroughTimeRecorder
    from ignite_seg.engine.schedules import build_scheduler
    from ignite_seg.engine.scoring import Scorer

    model, sets, hp = _digits()
    loss_fn = torch.nn.CrossEntropyLoss()

    def run() -> None:
        engine = Engine(lambda e, b: 0.5)
        opt = torch.optim.SGD(model.parameters(), lr=hp.lr_start)
        if rows > 1:
            warm = dataclasses.replace(hp, warmup_epochs=0.5) if rows > 2 else hp  # 5 warmup steps: fewer than n
            engine.add_event_handler(Events.ITERATION_STARTED, build_scheduler(warm, 10, opt))
        if rows > 3:
            attach_ema(engine, model, 0.99)
        if rows > 4:
            DivergenceStop().attach(engine)
        if rows > 5:  # no snapshot is due (per_epoch=0) but the check runs every step
            scorer = Scorer(loss_fn, "classification")
            ThroughTimeRecorder(scorer, model, sets, n, 1, 0).attach(engine)
        engine.run(range(n), max_epochs=1)

    return run


def _plain_step_parts(row: str, n: int) -> Callable[[], None]:
    """What ``bench/overhead.py``'s plain loop does per step for the LR and the EMA, ``n`` times."""
    model, _, hp = _digits()
    opt = torch.optim.SGD(model.parameters(), lr=hp.lr_start)
    ema = [p.detach().clone() for p in model.parameters()]
    raw = [p.detach() for p in model.parameters()]

    def run() -> None:
        for it in range(n):
            if row == "plain-lr":  # bench/overhead.py's triangular LR after the warmup
                phase = ((it + 4) % 80) / 80
                frac = 2 * phase if phase < 0.5 else 2 - 2 * phase
                rate = hp.lr_start + (hp.lr_end - hp.lr_start) * frac
                for g in opt.param_groups:
                    g["lr"] = rate
            else:
                torch._foreach_mul_(ema, 0.99)
                torch._foreach_add_(ema, raw, alpha=1 - 0.99)

    return run


def _plain_measure(row: str, n: int) -> Callable[[], None]:
    """``n`` measurements as ``bench/overhead.py``'s plain loop makes them (``+ema``: copying the EMA weights
    into the evaluated model first; ``+best``: and keeping a copy of its weights, as at an improvement)."""
    model, sets, _ = _digits()
    loss_fn = torch.nn.CrossEntropyLoss()
    evaluated = copy.deepcopy(model)
    ema = [p.detach().clone() for p in model.parameters()]

    def plain() -> None:
        curve = []
        for _ in range(n):
            if "+ema" in row:
                with torch.no_grad():
                    for e, p in zip(evaluated.parameters(), ema):
                        e.copy_(p)
            evaluated.eval()
            with torch.no_grad():
                for [(x, y)] in sets.values():
                    out = evaluated(x)
                    curve.append((loss_fn(out, y).item(), (out.argmax(1) == y).float().mean().item()))
            evaluated.train()
            if "+best" in row:
                {k: v.clone() for k, v in evaluated.state_dict().items()}

    return plain


def _snapshots(row: str, n: int) -> Callable[[], None]:
    """``n`` through-time snapshots of the trial (``scorer``: its measurement alone), with the best
    checkpoint attached (``+best-same``: no snapshot improves; ``+best-better``: every one saves)."""
    from ignite_seg.engine.best import BestCheckpoint
    from ignite_seg.engine.recorders import ThroughTimeRecorder
    from ignite_seg.engine.scoring import Scorer

    model, sets, _ = _digits()
    loss_fn = torch.nn.CrossEntropyLoss()

    def snap() -> None:
        engine = Engine(lambda e, b: None)
        scorer = Scorer(loss_fn, "classification")
        recorder = ThroughTimeRecorder(scorer, model, sets, 10, 1, 0)
        recorder.attach(engine)
        best = BestCheckpoint(model, recorder, "perf", "max") if "+best" in row else None
        if best is not None:
            best.attach(engine)
        for _ in range(n):
            if row == "scorer":
                scorer.measure_parts(model, sets)
                continue
            if best is not None and row.endswith("better"):  # forget the best: this snapshot saves
                best.checkpoint.reset()
                best.value = None
            recorder.snapshot(engine)

    return snap


#: Units per count: an engine row runs this many iterations per unit (its figure is per iteration).
SCALE = 25


def loops(n: int) -> dict[str, Callable[[], None]]:
    """Every configuration at ``n`` units, by name (engine rows: ``n * SCALE`` iterations)."""
    out = {name: _engine(k + 1, n * SCALE) for k, name in enumerate(ENGINE_ROWS)}
    out.update({name: _plain_step_parts(name, n * SCALE) for name in ("plain-lr", "plain-ema")})
    out.update({name: _plain_measure(name, n) for name in PLAIN_SNAPSHOT_ROWS})
    out.update({name: _snapshots(name, n) for name in SNAPSHOT_ROWS})
    return out


def scale(name: str) -> int:
    """How many units a row runs per count (instructions.py divides by it)."""
    return 1 if name in PLAIN_SNAPSHOT_ROWS + SNAPSHOT_ROWS else SCALE

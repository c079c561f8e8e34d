"""Models and task functions of the runtime tests (importable by worker processes as ``runtime_tasks``;
the tests put this folder on ``sys.path``)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import torch
from torch import nn


class Misbehaves(nn.Module):
    """An MLP that misbehaves in training, only in the trial whose seed is ``only_seed``
    (``None``: every trial but the one of ``except_seed``): ``"hang"`` sleeps an hour, ``"exit"`` raises SystemExit,
    ``"interrupt"`` raises KeyboardInterrupt, ``"slow"`` sleeps ``seconds`` per step, ``"die"`` ends the worker process.

    The first training step of a misbehaving trial creates ``started/<pid>`` when ``started`` is set.
    """

    def __init__(self, how: str, only_seed: int | None = None, seconds: float = 5.0, started: str | None = None,
                 except_seed: int | None = None):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        self.how, self.seconds, self.started = how, seconds, started
        seed = torch.initial_seed()
        self.armed = (only_seed is None or seed == only_seed) and seed != except_seed

    def forward(self, x):
        if self.training and self.armed:
            if self.started is not None:
                Path(self.started).mkdir(parents=True, exist_ok=True)
                (Path(self.started) / str(os.getpid())).touch()
            if self.how == "hang":
                time.sleep(3600)
            elif self.how == "exit":
                raise SystemExit(3)
            elif self.how == "interrupt":
                raise KeyboardInterrupt
            elif self.how == "slow":
                time.sleep(self.seconds)
            elif self.how == "die":  # the worker process ends at once, as the OOM killer would end it
                os._exit(9)
        return self.net(x)


def quick_or_sleep(task: tuple):
    """``("quick", v)`` returns ``v``; ``("sleep", s)`` sleeps ``s`` seconds; ``("block", event)``
    waits for a ``threading.Event`` (threads only); ``("module", name)`` says whether ``name`` is imported."""
    import sys

    if task[0] == "quick":
        return task[1]
    if task[0] == "sleep":
        time.sleep(task[1])
        return "slept"
    if task[0] == "block":
        task[1].wait()
        return "unblocked"
    return task[1] in sys.modules


def span_or_die(task: tuple):
    """``("span", s)``: sleeps ``s`` seconds and returns ``(pid, start, end)`` (wall clock);
    ``("die",)``: the worker process exits at once (status 7), as a segfault or the OOM killer would end it."""
    if task[0] == "die":
        os._exit(7)
    start = time.time()
    time.sleep(task[1])
    return os.getpid(), start, time.time()

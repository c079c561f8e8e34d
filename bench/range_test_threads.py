"""``lr_range_test`` with one torch thread (the default) against the caller's two, side by side.

A small CNN (conv 16@5x5, maxpool 2, ReLU, dense 10) on 2,000 synthetic 1x28x28 images of 10
classes; one repeat of ``--steps`` steps at batch 32, the two settings alternated ``--rounds``
times in one process. Prints each repeat's wall and CPU seconds (``time.process_time``: on an
oversubscribed machine a second thread spins and waits, which CPU time shows) and whether both
settings chose the same range.

    PYTHONPATH=. python bench/range_test_threads.py [--steps 100] [--rounds 3]
"""
from __future__ import annotations

import argparse
import time

import torch

import ignite_seg


def _data(n: int = 2000) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 10, (n,), generator=g)
    protos = torch.randn(10, 1, 28, 28, generator=g)
    return torch.utils.data.TensorDataset(protos[y] + 2.0 * torch.randn(n, 1, 28, 28, generator=g), y)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 16, 5), torch.nn.MaxPool2d(2), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(16 * 12 * 12, 10))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    ds = _data()
    torch.set_num_threads(2)  # the caller's count
    ranges: dict[str, set[tuple[float, float]]] = {"threads=1": set(), "threads=None (2)": set()}
    for r in range(args.rounds):
        for name, threads in (("threads=1", 1), ("threads=None (2)", None)):
            wall, cpu = time.perf_counter(), time.process_time()
            res = ignite_seg.lr_range_test(_model(), ds, torch.nn.CrossEntropyLoss(), batch_size=32, lr_start=1e-4,
                                           lr_end=10.0, steps=args.steps, repeats=1, threads=threads)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            ranges[name].add((round(res.lr_min, 6), round(res.lr_max, 6)))
            print(f"round {r} {name:17s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  range "
                  f"[{res.lr_min:.3g}, {res.lr_max:.3g}]  threads after: {torch.get_num_threads()}", flush=True)
    print("ranges:", ranges)


if __name__ == "__main__":
    main()

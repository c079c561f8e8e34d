"""The per-epoch cost of DataLoader workers: persistent, re-seeded each epoch (ignite_seg's), restarted each epoch.

A map-style dataset of ``--items`` images of 3x32x32 with random flips and crops drawn in
``__getitem__``, read by ``--workers`` DataLoader worker processes in batches of 64, plus ``--ballast``
MiB of tensors the dataset holds (which each fork maps copy-on-write). Each epoch is timed from
``iter()`` to the last batch, with a matmul per batch standing in for a training step; the
modes alternate epoch by epoch so that load on a shared machine hits all alike. Reports the
median epoch time of each: a plain persistent DataLoader, ignite_seg's training loader
(``BatchSource.epochs``: persistent workers that re-seed from the epoch's seed), and a
non-persistent DataLoader (workers started afresh each epoch).

    PYTHONPATH=. python bench/loader_workers.py [--epochs 15] [--items 4096] [--workers 2] [--ballast 200]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.utils.data import DataLoader, Dataset

from ignite_seg.engine.batching import BatchSource, Data, _seed_worker


class Flipped(Dataset):
    """Images with a random flip and a random 28x28 crop padded back to 32x32, drawn per read."""

    def __init__(self, items: int, ballast_mib: int) -> None:
        self.x = torch.randn(items, 3, 32, 32)
        self.y = torch.randint(0, 10, (items,))
        self.ballast = torch.zeros(ballast_mib * 2**18)  # float32: 4 bytes each

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        x = self.x[i]
        if torch.rand(()) < 0.5:
            x = x.flip(-1)
        a, b = torch.randint(0, 5, (2,)).tolist()
        return torch.nn.functional.pad(x[:, a : a + 28, b : b + 28], (2, 2, 2, 2)), self.y[i]


def epoch_seconds(loader: DataLoader, weight: torch.Tensor) -> float:
    t = time.perf_counter()
    for x, _y in loader:
        x.flatten(1) @ weight  # a stand-in for the training step
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--items", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ballast", type=int, default=200, help="MiB of tensors the dataset holds")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = Flipped(args.items, args.ballast)
    weight = torch.randn(3 * 32 * 32, 256)
    loaders = {
        mode: DataLoader(data, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0),
                         num_workers=args.workers, persistent_workers=mode == "persistent", worker_init_fn=_seed_worker)
        for mode in ("persistent", "restarted")
    }
    source = BatchSource(data, Data(data, data, num_workers=args.workers))
    loaders["re-seeded"] = source.epochs(64, torch.Generator().manual_seed(0))
    times: dict[str, list[float]] = {mode: [] for mode in loaders}
    for loader in loaders.values():
        epoch_seconds(loader, weight)  # warm-up (the persistent loaders' first start)
    for _ in range(args.epochs):
        for mode, loader in loaders.items():
            times[mode].append(epoch_seconds(loader, weight))
    median = {mode: statistics.median(t) for mode, t in times.items()}
    print(f"{args.items} items, {len(loaders['persistent'])} batches of 64, {args.workers} workers, {args.ballast} MiB "
          f"held, {args.epochs} epochs each (start method: {torch.multiprocessing.get_start_method()})")
    print("median epoch: " + ", ".join(
        f"{mode} {m * 1e3:.1f} ms ({m / median['persistent']:.3f}x)" for mode, m in median.items()))


if __name__ == "__main__":
    main()

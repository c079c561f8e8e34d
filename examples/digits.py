"""Train a small MLP on scikit-learn's bundled digits (1437 train / 360 val images of 8x8).

Run from the repository root::

    python examples/digits.py [--preset fast] [--trials 4] [--cores 2] [--analysis images]

The loaders below are module-level functions of this script; ignite_seg resolves them so that
the worker processes can import this file (hence the ``if __name__ == "__main__"`` guard).
"""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.utils.data import TensorDataset

if TYPE_CHECKING:
    from ignite_seg.api import TrainResult


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_va, y_tr, y_va = train_test_split(x / 16.0, y, test_size=0.2, random_state=0, stratify=y)
    as_set = lambda a, b: TensorDataset(torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b))  # noqa: E731
    return as_set(x_tr, y_tr), as_set(x_va, y_va)


def main() -> None:
    import ignite_seg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="fast", help="tuner preset: fastest, fast, slow, slowest")
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--cores", default="2", help='worker processes, or "all"')
    parser.add_argument("--analysis", default="images", help="analysis preset, e.g. none, text, images, video")
    parser.add_argument("--folder", default="out/digits/current")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    result = ignite_seg.train(
        model, dataset, ("torch.nn", "CrossEntropyLoss", (), {}),
        folder=args.folder,
        hyperparameters=args.preset,
        analysis=args.analysis,
        accuracy_style="classification",
        trials=args.trials,
        cores=args.cores if args.cores == "all" else int(args.cores),
        seed=args.seed,
    )
    _print_where_to_look(result, args.analysis)


def _print_where_to_look(result: TrainResult, analysis: str) -> None:
    """The outcome in a few lines, and where to look next (not the recipe's full repr)."""
    done, hp, folder = result.completed, result.hyperparameters, result.folder
    print(f"\n{len(done)} trial(s) completed: lr {hp.lr_start:.3g} -> {hp.lr_end:.3g}, batch size "
          f"{hp.batch_size}, {hp.epochs} epochs (all of it in {folder / 'hparams' / 'final.json'})")
    if done:
        perfs = [t.perf_val for t in done]
        print(f"validation accuracy: mean {sum(perfs) / len(perfs):.4f}, best {max(perfs):.4f}")
    if analysis != "none":
        print(f"report: {folder / 'analysis' / 'index.html'}")
    else:
        print(f"report: python -m ignite_seg.reanalyze {folder} --analysis images")
    print(f"video:  python -m ignite_seg.reanalyze {folder} --analysis video")


if __name__ == "__main__":
    main()

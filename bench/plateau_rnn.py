"""Which LR range trains ignite-simple's ``gaussian_blobs_delayed_class`` RNN (issue 25, the plateau case).

The tuner chose [0.00027, 0.00087] at batch 8 from a sweep whose loss fell to the trivial floor (0.25: the
constant 0.5 for 0/1 targets) and stayed flat for over a decade before diverging at ~0.03; the author says the
model needs lr >= 0.02. This trains the example's own model, data and loss (its script from ``--repo``, run
through bench/ignite_simple_examples.py's import alias) with fixed triangular ranges at batch 8 for 5 epochs
(one cycle), ``--trials`` seeds each, and prints the mean final val perf per range (chance 0.5); with
``--tune``, the example's own tuned ``train()`` (its ``fastest`` with 16 sweep repeats) on the same data.
The example draws its data afresh on every run; ``--dataset`` reuses a saved draw.

    PYTHONPATH=. nice -n 10 python bench/plateau_rnn.py --repo /tmp/is_repo --out /tmp/plateau_rnn \
        [--dataset OUT/datasets/advanced/gaussian_blobs_delayed_class] [--tune]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ignite_simple_examples import EXAMPLES, alias  # noqa: E402

#: (lr_start, lr_end) of each triangular range tried
RANGES = ((0.0003, 0.0009), (0.001, 0.003), (0.003, 0.01), (0.007, 0.02), (0.0015, 0.015), (0.01, 0.03))
MODULE = "gaussian_blobs_delayed_class"


def _prepare(repo: Path, work: Path, dataset: Path | None) -> None:
    """The example as an importable module in ``work`` (the cwd); its dataset copied from ``dataset`` (a
    saved one, e.g. the one an earlier run of the example drew) or built once with fixed seeds."""
    import numpy as np
    import torch

    work.mkdir(parents=True, exist_ok=True)
    (work / f"{MODULE}.py").write_text(alias((repo / EXAMPLES[MODULE][0]).read_text()))
    os.chdir(work)
    sys.path.insert(0, str(work))
    if dataset is not None:
        target = work / "datasets" / "advanced" / MODULE
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(dataset, target)
        return
    np.random.seed(0)
    torch.manual_seed(0)
    __import__(MODULE).dataset(True)


def _tune(out: Path, seed: int) -> dict[str, object]:
    """The example's own ``single_gain(0.4)`` call (its ``fastest`` with 16 sweep repeats), 2 trials."""
    import ignite_seg
    import ignite_seg.hyperparams as hyperparameters

    hp = hyperparameters.fastest()
    hp.lr_min_inits = 16
    hp.lr_width_only_gradients = True
    t0 = time.perf_counter()
    res = ignite_seg.train((MODULE, "model", (0.4,), {}), (MODULE, "dataset", (), {}), (MODULE, "loss", (), {}),
                           out / "tuned", hyperparameters=hp, analysis="none", allow_later_analysis_up_to="none",
                           accuracy_style="classification", trials=2, trials_strict=True, cores=2, seed=seed)
    h = res.hyperparameters
    perfs = [t.perf_val for t in res.completed]
    print(f"tuned: [{h.lr_start:.3g}, {h.lr_end:.3g}] batch {h.batch_size}: val perf {perfs} mean "
          f"{sum(perfs) / max(len(perfs), 1):.4f}", flush=True)
    return {"lr_start": h.lr_start, "lr_end": h.lr_end, "batch_size": h.batch_size, "val_perfs": perfs,
            "seconds": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, required=True, help="checkout of ignite-simple")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--dataset", type=Path, help="a saved (train, val) of the example (default: drawn with seed 0)")
    ap.add_argument("--tune", action="store_true", help="run the example's tuned train() instead of the ranges")
    ap.add_argument("--seed", type=int, default=0, help="train()'s seed (the sweep's and the trials')")
    args = ap.parse_args()
    out = args.out.resolve()
    _prepare(args.repo.resolve(), out, args.dataset.resolve() if args.dataset else None)
    if args.tune:
        (out / "tuned.json").write_text(json.dumps(_tune(out, args.seed), indent=1))
        return
    import ignite_seg

    rows = []
    for lo, hi in RANGES:
        t0 = time.perf_counter()
        hp = ignite_seg.FixedHyperparameters(lr_start=lo, lr_end=hi, batch_size=args.batch,
                                             cycle_size_epochs=float(args.epochs), epochs=args.epochs)
        res = ignite_seg.train((MODULE, "model", (0.4,), {}), (MODULE, "dataset", (), {}), (MODULE, "loss", (), {}),
                               out / f"run_{lo:g}_{hi:g}", hyperparameters=hp, analysis="none",
                               allow_later_analysis_up_to="none", accuracy_style="classification",
                               trials=args.trials, trials_strict=True, cores=2, seed=args.seed)
        perfs = [t.perf_val for t in res.completed]
        rows.append({"lr_start": lo, "lr_end": hi, "val_perfs": perfs, "seconds": time.perf_counter() - t0})
        print(f"[{lo:g}, {hi:g}]: val perf {perfs} mean {sum(perfs) / max(len(perfs), 1):.4f} "
              f"({rows[-1]['seconds']:.0f} s)", flush=True)
    (out / "results.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

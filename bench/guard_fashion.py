"""The recipe check on the recipe whose trials died (issue 25): ignite-simple's fashion_mnist CNN, SGD,
lr 0.0882 -> 0.3867 triangular over 10 epochs at batch 32, on the synthetic FashionMNIST of
``bench/is_shims`` — the tuner's choice in one run of ``bench/ignite_simple_examples.py``, whose two
trials learned in epoch 1 and were back at chance (val 0.105) from epoch 2 on.

Runs the check's two 200-step short runs by hand (the same held-out slice of 512 training items, the
same judgement: the mean held-out loss must end 2% below its start) with the schedule compressed as
the check did before session 10 and with its peak held (:func:`ignite_seg.engine.guard_run.guard_lrs`),
and prints both verdicts. Needs torchluent and a checkout of ignite-simple (``--repo``).

    PYTHONPATH=. python bench/guard_fashion.py --repo /path/to/ignite-simple
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent


def _example(repo: str):  # type: ignore[no-untyped-def]
    """ignite-simple's examples/fashion_mnist.py with the import alias, as a module."""
    source = (Path(repo) / "examples" / "fashion_mnist.py").read_text().replace("\r\n", "\n")
    source = source.replace("import ignite_simple\n", "import ignite_seg as ignite_simple\n", 1)
    source = source.replace("import ignite_simple.helper\n", "import ignite_seg.helper\n", 1)
    spec = importlib.util.spec_from_loader("fashion_mnist_example", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, "fashion_mnist.py", "exec"), module.__dict__)  # noqa: S102 (a benchmark's own input)
    return module


def short_run(example, x, y, lrs: np.ndarray, seed: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Held-out loss before and after ``len(lrs)`` SGD steps at batch 32 (the first 512 items held out)."""
    torch.manual_seed(seed)
    model = example.model()
    model = model[1] if isinstance(model, tuple) else model  # ignite-simple's (hidden, stripped) pair
    opt = torch.optim.SGD(model.parameters(), lr=float(lrs[0]))
    gen, ce = torch.Generator().manual_seed(seed), torch.nn.CrossEntropyLoss()
    hold, fit = np.arange(512), np.arange(512, len(y))

    def held() -> float:
        model.eval()
        with torch.no_grad():
            loss = ce(model(x[hold]), y[hold]).item()
        model.train()
        return loss

    start, order, k = held(), fit[torch.randperm(len(fit), generator=gen).numpy()], 0
    for lr in lrs:
        if k + 32 > len(order):
            order, k = fit[torch.randperm(len(fit), generator=gen).numpy()], 0
        batch, k = order[k:k + 32], k + 32
        for group in opt.param_groups:
            group["lr"] = float(lr)
        opt.zero_grad()
        ce(model(x[batch]), y[batch]).backward()
        opt.step()
    return start, held()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True, help="a checkout of Tjstretchalot/ignite-simple")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE / "is_shims"))
    from ignite_seg import FixedHyperparameters
    from ignite_seg.engine.guard_run import compressed, guard_lrs
    from ignite_seg.engine.schedules import simulate_lrs

    torch.set_num_threads(1)
    example = _example(args.repo)
    train, _ = example.dataset()
    x = torch.stack([train[i][0] for i in range(len(train))])
    y = torch.tensor([train[i][1] for i in range(len(train))])
    hp = FixedHyperparameters(lr_start=0.08821, lr_end=0.3867, batch_size=32, cycle_size_epochs=10, epochs=10)
    for name, lrs in (("compressed (before)", simulate_lrs(compressed(hp), 200)), ("peak held", guard_lrs(hp, 200))):
        runs = [short_run(example, x, y, lrs, seed) for seed in (1, 2)]
        start, end = float(np.mean([r[0] for r in runs])), float(np.mean([r[1] for r in runs]))
        verdict = "passes" if end <= 0.98 * start else "fails (backs off)"
        print(f"{name:20s} held-out loss {start:.4f} -> {[round(r[1], 4) for r in runs]}: {verdict}", flush=True)


if __name__ == "__main__":
    main()

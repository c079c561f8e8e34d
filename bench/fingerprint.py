"""Fingerprints of what trials return, to check that a speed change left every result bit-identical.

Runs a set of small trials in-process (``run_trial``: the tensor fast path and the DataLoader path,
every schedule with and without warmup, EMA, the best checkpoint by a metric in both directions,
hidden layers, AdamW, a padded sequence-tagging recipe with a custom metric, two validation sets)
and prints, per trial, a SHA-256 of each output: the initial, final, raw and best weights (the
tensors' bytes, not the pickle), every through-time and hidden array, the final metrics, the best
record, the status. Run it on the commit before a change and after, and compare:

    PYTHONPATH=. python bench/fingerprint.py --out /tmp/after.json
    PYTHONPATH=/tmp/before python bench/fingerprint.py --tree /tmp/before --out /tmp/before.json
    python bench/fingerprint.py --compare /tmp/before.json /tmp/after.json
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

DIGITS = (("digits", "model", (), {}), ("digits", "dataset", (), {}), ("torch.nn", "CrossEntropyLoss", (), {}))
LISTED = ("real_bench", "digits_listed", (), {})
TAGGING = (("real_tasks", "Tagger", (), {}), ("real_tasks", "tagging", (), {}), ("real_tasks", "tagging_loss", (), {}))


def _cases() -> dict[str, dict[str, Any]]:
    """Trial name -> the changes to a base digits task (``hp``: to its hyperparameters)."""
    cases: dict[str, dict[str, Any]] = {"base": {}, "loader": {"dataset": LISTED}}
    for schedule in ("triangular", "one-cycle", "cosine", "inv-sqrt", "constant"):
        cases[f"{schedule}+warmup+ema+best"] = {"hp": {"schedule": schedule, "warmup_epochs": 1.0, "ema_decay": 0.9},
                                                "best_metric": "perf", "best_mode": "max"}
    cases["warmup"] = {"hp": {"warmup_epochs": 0.5}}
    cases["ema"] = {"hp": {"ema_decay": 0.99}}
    cases["best-loss-min+hidden"] = {"best_metric": "loss", "best_mode": "min", "record_hidden": True}
    cases["adamw+ema+best+loader"] = {"dataset": LISTED, "hp": {"optimizer": "adamw", "ema_decay": 0.95},
                                      "best_metric": "perf", "best_mode": "max"}
    cases["regression+diverges"] = {"recipe": (("tasks", "linear", (), {}), ("tasks", "regression", (), {}),
                                               ("torch.nn", "MSELoss", (), {})), "style": "inv-loss",
                                    "hp": {"lr_start": 1e5, "lr_end": 1e6}}
    cases["regression+ema+best"] = {"recipe": cases["regression+diverges"]["recipe"], "style": "inv-loss",
                                    "hp": {"lr_start": 0.01, "lr_end": 0.1, "ema_decay": 0.9, "warmup_epochs": 1.0},
                                    "best_metric": "loss", "best_mode": "min"}
    cases["tagging+iou+best"] = {"recipe": TAGGING, "metrics": {"iou": ("real_tasks", "class_iou", (), {})},
                                 "best_metric": "iou", "best_mode": "max", "hp": {"ema_decay": 0.9, "warmup_epochs": 1.0}}
    cases["two-val-sets"] = {"recipe": (("tasks", "mlp", (), {}), ("real_tasks", "two_val_sets", (), {}),
                                        DIGITS[2]), "best_metric": "loss", "best_mode": "min"}
    return cases


def _tasks(epochs: int) -> dict[str, Any]:
    import ignite_seg
    from ignite_seg.api import trial_seed
    from ignite_seg.config.specs import normalize_spec
    from ignite_seg.engine.trainer import TrialSetup, TrialTask

    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=32, cycle_size_epochs=2, epochs=epochs)
    tasks = {}
    for k, (name, case) in enumerate(_cases().items()):
        model, dataset, loss = case.get("recipe", DIGITS)
        dataset = case.get("dataset", dataset)
        setup = TrialSetup(
            model=normalize_spec(model, "m"), dataset=normalize_spec(dataset, "d"), loss=normalize_spec(loss, "l"),
            accuracy_style=case.get("style", "classification"), device="cpu",
            metrics={m: normalize_spec(s, m) for m, s in case.get("metrics", {}).items()},
            best_metric=case.get("best_metric"), best_mode=case.get("best_mode"))
        tasks[name] = TrialTask(trial_id=k, setup=setup, hparams=dataclasses.replace(hp, **case.get("hp", {})),
                                seed=trial_seed(0, k), threads=1, record_hidden=case.get("record_hidden", False))
    return tasks


def _digest(value: Any) -> str:
    import numpy as np
    import torch

    h = hashlib.sha256()
    if isinstance(value, bytes):  # a torch.save blob: hash its tensors, not the pickle
        value = torch.load(io.BytesIO(value), weights_only=True) if value else {}
    if isinstance(value, dict):
        for k in sorted(value):
            h.update(k.encode() + _digest(value[k]).encode())
    elif isinstance(value, torch.Tensor):
        h.update(str(value.dtype).encode() + value.detach().cpu().contiguous().numpy().tobytes())
    elif isinstance(value, np.ndarray):
        h.update(str(value.dtype).encode() + (value.tobytes() if value.dtype != object else repr(value).encode()))
    else:
        h.update(repr(value).encode())
    return h.hexdigest()[:16]


def fingerprints(epochs: int) -> dict[str, dict[str, str]]:
    from ignite_seg.engine.trainer import run_trial

    out = {}
    for name, task in _tasks(epochs).items():
        o = run_trial(task)
        # the outcome holds its result.json record (an older --tree: the record's fields, `error` the whole text)
        r, text = (o.result, o.error_text) if hasattr(o, "error_text") else (o, o.error)
        got = {"status": o.status, "error": _digest((text or "").splitlines()[-1:]),
               "diverged_iteration": repr(r.diverged_iteration), "metrics": _digest(r.metrics),
               "best": repr(r.best)}
        for field in ("model_init", "model", "model_raw", "model_best"):
            got[field] = _digest(getattr(o, field))
        for key, arr in o.throughtime.items():
            got[f"throughtime.{key}"] = _digest(arr)
        for key, arr in o.hidden.items():
            got[f"hidden.{key}"] = _digest(arr)
        out[name] = got
        print(f"{name:28s} {o.status:9s} {len(got)} fingerprints", file=sys.stderr)
    return out


def compare(before: str, after: str) -> int:
    a, b = json.load(open(before)), json.load(open(after))
    bad = [(t, k) for t in sorted(set(a) | set(b)) for k in sorted(set(a.get(t, {})) | set(b.get(t, {})))
           if a.get(t, {}).get(k) != b.get(t, {}).get(k)]
    n = sum(len(v) for v in a.values())
    print(f"{len(a)} trials, {n} fingerprints: " + ("all identical" if not bad else f"{len(bad)} differ"))
    for t, k in bad:
        print(f"  {t}: {k}: {a.get(t, {}).get(k)} -> {b.get(t, {}).get(k)}")
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--tree", default=ROOT, help="the checkout whose package to run")
    ap.add_argument("--out", default=None)
    ap.add_argument("--compare", nargs=2, default=None, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    sys.path[:0] = [os.path.abspath(args.tree), os.path.join(ROOT, "examples"), os.path.join(ROOT, "tests"), HERE]
    import torch

    torch.set_num_threads(1)
    text = json.dumps(fingerprints(args.epochs), indent=1, sort_keys=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()

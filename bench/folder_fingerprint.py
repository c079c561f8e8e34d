"""Fingerprints of whole run folders, to check that a change to the call path (argument checks,
run.json, the tuner's recipe, the trial tasks) left every file's content identical.

``bench/fingerprint.py`` hashes what ``run_trial`` returns in this process; this one runs
``train()`` and ``tune()`` through the worker pool (a tuned run, a tuned AdamW + cosine + warmup +
EMA + clipping run, a fixed noam recipe with a best checkpoint and mid-trial checkpoints, a tune
only) and hashes every file they write: JSON parsed (keys sorted; times, pids, versions, ids and
argv dropped), npz arrays and saved weights by their bytes. Run it on the commit before a change
and after, and compare:

    python bench/folder_fingerprint.py --tree /tmp/before --out /tmp/before.json
    python bench/folder_fingerprint.py --out /tmp/after.json
    python bench/folder_fingerprint.py --compare /tmp/before.json /tmp/after.json

``--tree`` is put on ``PYTHONPATH`` too, and the runs start from a temporary working directory, so
the workers import the same package as this process (an editable install, or the checkout the
command was started in, would otherwise win in the workers).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
#: keys whose values differ between two identical runs
VOLATILE = {"created", "versions", "run_id", "argv", "seconds", "started_at", "pid", "peak_rss_mib", "elapsed"}
MLP, BLOBS, CE = ("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), ("torch.nn", "CrossEntropyLoss", (), {})


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k not in VOLATILE and not k.endswith("_seconds")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _digest(path: str) -> str | None:
    import numpy as np
    import torch

    h = hashlib.sha256()
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            h.update(json.dumps(_clean(json.load(f)), sort_keys=True).encode())
    elif path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            for k in sorted(k for k in z.files if not k.endswith("seconds")):
                if k == "meta":  # a tuner task's result record (hparams/tasks/): JSON with its times
                    h.update(json.dumps(_clean(json.loads(str(z[k]))), sort_keys=True).encode())
                else:
                    h.update(k.encode() + str(z[k].dtype).encode() + z[k].tobytes())
    elif path.endswith(".pt"):
        state = torch.load(path, weights_only=True)
        for k in sorted(state):
            h.update(k.encode() + state[k].numpy().tobytes())
    else:
        return None
    return h.hexdigest()[:16]


def _runs() -> dict[str, Callable[[str], Any]]:
    import ignite_seg

    fixed = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=3,
                                            optimizer="adamw", betas=(0.8, 0.99), warmup_steps=3, schedule="noam")
    adamw = dataclasses.replace(ignite_seg.get_preset("fastest"), optimizer="adamw", schedule="cosine",
                                warmup_epochs=1.0, ema_decay=0.9, eps=1e-6, grad_clip_norm=1.0)
    common = {"analysis": "none", "cores": 1}
    return {
        "tuned-fastest": lambda f: ignite_seg.train(MLP, BLOBS, CE, folder=f, hyperparameters="fastest", trials=2,
                                                    trials_strict=True, seed=3, **common),
        "tuned-adamw-cosine": lambda f: ignite_seg.train(MLP, BLOBS, CE, folder=f, hyperparameters=adamw, trials=1,
                                                         seed=5, **common),
        "fixed-best": lambda f: ignite_seg.train(MLP, BLOBS, CE, folder=f, hyperparameters=fixed, trials=2, seed=1,
                                                 best_metric="loss", best_mode="min", checkpoint_every=1, **common),
        "tune-only": lambda f: ignite_seg.tune(MLP, BLOBS, CE, folder=f, hyperparameters="fastest", seed=2, **common),
    }


def fingerprints() -> dict[str, str]:
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the workers put their working directory first on sys.path: not a checkout's root
        for name, call in _runs().items():
            folder = os.path.join(tmp, name)
            call(folder)
            for root, _, files in os.walk(folder):
                for fn in files:
                    path = os.path.join(root, fn)
                    if (d := _digest(path)) is not None:
                        out[f"{name}/{os.path.relpath(path, folder)}"] = d
            print(f"{name}: done", file=sys.stderr, flush=True)
    return out


def compare(before: str, after: str) -> int:
    with open(before) as f, open(after) as g:
        a, b = json.load(f), json.load(g)
    bad = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    print(f"{len(a)} files: " + ("all identical" if not bad else f"{len(bad)} differ"))
    for k in bad:
        print(f"  {k}: {a.get(k)} -> {b.get(k)}")
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", default=ROOT, help="the checkout whose package to run")
    ap.add_argument("--out", default=None)
    ap.add_argument("--compare", nargs=2, default=None, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    tree, tests = os.path.abspath(args.tree), os.path.join(ROOT, "tests")
    os.environ["PYTHONPATH"] = os.pathsep.join([tree, tests, os.environ.get("PYTHONPATH", "")])
    sys.path[:0] = [tree, tests]
    text = json.dumps(fingerprints(), indent=1, sort_keys=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()

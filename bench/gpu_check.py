"""The device check (issue 19): what only a machine with a GPU can run, in one command, in minutes.

    python bench/gpu_check.py [--epochs 20] [--folder /tmp/ignite_seg_gpu_check]

Each check prints one line ``ok``/``FAIL``/``skip`` and the script exits non-zero if one failed:

1. placement: ``device="auto"`` trials in one process each (trial ``i`` on GPU ``i mod n``), and a
   trial on 2 processes (``trial_processes=2``, ``nccl``: one GPU per rank; skipped with one GPU);
2. fp16 AMP with ``GradScaler``, a loss with a ``weight=`` tensor, the EMA of the weights and
   mid-trial checkpoints, all on CUDA through ``train()``;
3. the digits example on ``device="cuda"`` vs ``"cpu"``: the same final val accuracy within noise,
   and the wall-time ratio.

Written without a GPU at hand; run it on one and record the output in bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import time
from pathlib import Path

import torch
from common import DIGITS, machine

import ignite_seg
from ignite_seg.api import trial_seed
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.trainer import TrialTask, run_trial

HP = ignite_seg.FixedHyperparameters(lr_start=0.02, lr_end=0.3, batch_size=32, cycle_size_epochs=4, epochs=20)
FAILED: list[str] = []


def weighted_loss() -> torch.nn.Module:
    """Cross-entropy with a class ``weight`` tensor (moved to the GPU with the loss)."""
    return torch.nn.CrossEntropyLoss(weight=torch.linspace(0.5, 1.5, 10))


def report(name: str, ok: bool | None, detail: str) -> None:
    print(f"{'skip' if ok is None else 'ok' if ok else 'FAIL':4}  {name}: {detail}", flush=True)
    if ok is False:
        FAILED.append(name)


def digits_task(trial_id: int, hp: ignite_seg.FixedHyperparameters, **kw: object) -> TrialTask:
    spec = {k: normalize_spec(v, k) for k, v in DIGITS.items()}
    return TrialTask(trial_id, spec["model"], spec["dataset"], spec["loss"], hp, "classification",  # type: ignore[arg-type]
                     seed=trial_seed(0, trial_id), **kw)  # type: ignore[arg-type]


def check_placement(hp: ignite_seg.FixedHyperparameters) -> None:
    n = torch.cuda.device_count()
    short = dataclasses.replace(hp, epochs=2)
    got = [run_trial(digits_task(i, short, device="auto")).devices for i in range(min(n, 2) + 1)]
    want = [(f"cuda:{i % n}",) for i in range(len(got))]
    report("placement, one process per trial", got == want, f"devices {got} (want {want})")
    if n < 2:
        report("placement, 2 processes per trial (nccl)", None, f"needs 2 GPUs, found {n}")
        return
    from ignite_seg.engine.distributed import run_trial_group

    out = run_trial_group(digits_task(1, short, device="cuda", processes=2))
    want2 = tuple(f"cuda:{(2 + r) % n}" for r in range(2))  # trial 1's ranks: GPUs 2 and 3, mod n
    ok = out.status == "completed" and out.devices == want2
    report("placement, 2 processes per trial (nccl)", ok, f"{out.status}, devices {out.devices} (want {want2})"
           + (f"\n{out.error}" if out.error else ""))


def check_features(folder: Path, hp: ignite_seg.FixedHyperparameters, device: str = "cuda") -> None:
    hp = dataclasses.replace(hp, amp=True, ema_decay=0.99)
    res = ignite_seg.train(DIGITS["model"], DIGITS["dataset"], weighted_loss, folder / "features",
                           hyperparameters=hp, analysis="none", trials=1, trials_strict=True, cores=1,
                           seed=0, device=device, checkpoint_every=5, history_folder=folder / "history")
    result = json.loads((res.folder / "trials" / "0" / "result.json").read_text())
    ok = result["status"] == "completed" and result["perf_val"] > 0.8 and (res.folder / "trials/0/model_raw.pt").exists()
    report("fp16 AMP + GradScaler, weight= loss, EMA, checkpoints on CUDA", ok,
           f"{result['status']}, perf_val {result.get('perf_val', float('nan')):.3f}, devices {result.get('devices')}")


def check_digits(folder: Path, hp: ignite_seg.FixedHyperparameters) -> None:
    perf, wall = {}, {}
    for device in ("cpu", "cuda"):
        t0 = time.perf_counter()
        res = ignite_seg.train(*DIGITS.values(), folder / device, hyperparameters=hp, analysis="none", trials=2,
                               trials_strict=True, cores=2, seed=0, device=device, history_folder=folder / "history")
        wall[device] = time.perf_counter() - t0
        perf[device] = sum(t.perf_val for t in res.completed) / max(len(res.completed), 1)
    ok = abs(perf["cuda"] - perf["cpu"]) < 0.03
    report("digits on cuda vs cpu", ok, f"val perf cpu {perf['cpu']:.4f}, cuda {perf['cuda']:.4f}; "
           f"wall cpu {wall['cpu']:.1f} s, cuda {wall['cuda']:.1f} s (cuda/cpu {wall['cuda'] / wall['cpu']:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=HP.epochs)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/ignite_seg_gpu_check"))
    args = parser.parse_args()
    print(machine())
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        sys.exit(2)
    print(f"torch {torch.__version__}, {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")
    shutil.rmtree(args.folder, ignore_errors=True)
    hp = dataclasses.replace(HP, epochs=args.epochs)
    t0 = time.perf_counter()
    check_placement(hp)
    check_features(args.folder, hp)
    check_digits(args.folder, hp)
    print(f"{len(FAILED)} failed ({', '.join(FAILED) or 'none'}); {time.perf_counter() - t0:.0f} s")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()

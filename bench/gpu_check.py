"""The device check (issue 19): what only a machine with a GPU can run, in one command, in minutes.

    python bench/gpu_check.py [--epochs 20] [--folder /tmp/ignite_seg_gpu_check] [--cpu]

Each check prints one line ``ok``/``FAIL``/``skip`` and the script exits non-zero if one failed:

1. placement: ``device="auto"`` trials in one process each (trial ``i`` on GPU ``i mod n``), and a
   trial on 2 processes (``trial_processes=2``, ``nccl``: one GPU per rank); with one GPU, that
   such a trial fails at once with the fix in its error (``nccl`` needs a GPU per rank);
2. fp16 AMP with ``GradScaler``, a loss with a ``weight=`` tensor, the EMA of the weights and
   mid-trial checkpoints, all on CUDA through ``train()``;
3. resume on CUDA: the same recipe (AMP, EMA, ``weight=`` loss) stopped after a checkpoint and run
   again resumes from it; prints whether its weights equal the uninterrupted trial's byte for byte,
   else their largest difference (the ``GradScaler``'s scale is not in the checkpoint: it restarts);
4. the digits example on ``device="cuda"`` vs ``"cpu"``: the same final val accuracy within noise,
   and the wall-time ratio.

``--cpu`` is a dry run of the same checks with ``cpu`` for ``cuda`` (``gloo`` for the 2-process
trial), for a machine without a GPU: it checks the script, not the GPU code paths.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch
from common import DIGITS, machine

import ignite_seg
from ignite_seg.api import trial_seed
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.checkpoints import CheckpointPlan
from ignite_seg.engine.trainer import TrialSetup, TrialTask, run_trial

HP = ignite_seg.FixedHyperparameters(lr_start=0.02, lr_end=0.3, batch_size=32, cycle_size_epochs=4, epochs=20)
FAILED: list[str] = []


def weighted_loss() -> torch.nn.Module:
    """Cross-entropy with a class ``weight`` tensor (moved to the GPU with the loss)."""
    return torch.nn.CrossEntropyLoss(weight=torch.linspace(0.5, 1.5, 10))


def report(name: str, ok: bool | None, detail: str) -> None:
    print(f"{'skip' if ok is None else 'ok' if ok else 'FAIL':4}  {name}: {detail}", flush=True)
    if ok is False:
        FAILED.append(name)


def digits_task(trial_id: int, hp: ignite_seg.FixedHyperparameters, threads: int | None = None, **kw: Any) -> TrialTask:
    """A digits trial; ``kw`` are fields of its :class:`TrialSetup` (device, handlers, processes, ...)."""
    spec = {k: normalize_spec(v, k) for k, v in DIGITS.items()}
    setup = TrialSetup(spec["model"], spec["dataset"], spec["loss"], "classification", **kw)
    return TrialTask(trial_id, setup, hp, seed=trial_seed(0, trial_id), threads=threads)


def check_placement(hp: ignite_seg.FixedHyperparameters, device: str) -> None:
    from ignite_seg.engine.distributed import run_trial_group

    n = torch.cuda.device_count() if device == "cuda" else 0
    short = dataclasses.replace(hp, epochs=2)
    got = [run_trial(digits_task(i, short, device="auto" if n else "cpu")).devices for i in range(min(n, 2) + 1)]
    want = [(f"cuda:{i % n}" if n else "cpu",) for i in range(len(got))]
    report("placement, one process per trial", got == want, f"devices {got} (want {want})")
    out = run_trial_group(digits_task(1, short, device=device, processes=2, threads=1))
    if n == 1:  # nccl needs a GPU per rank: the trial must fail at once, saying so
        ok = out.status == "failed" and "needs a GPU per process" in (out.error_text or "")
        report("2 processes per trial on 1 GPU fail with the fix", ok, (out.error_text or out.status).strip()[-200:])
        return
    want2 = tuple(f"cuda:{(2 + r) % n}" if n else "cpu" for r in range(2))  # trial 1's ranks: GPUs 2, 3 mod n
    ok = out.status == "completed" and out.result.devices == want2
    report(f"placement, 2 processes per trial ({'nccl' if n else 'gloo'})", ok,
           f"{out.status}, devices {out.result.devices} (want {want2})" + (f"\n{out.error_text}" if out.error_text else ""))


def stop_once(marker: str, at_iteration: int):
    """Raise at ``at_iteration`` while the file ``marker`` exists (the trial fails there, once)."""
    from ignite.engine import Events

    def attach(trainer, context):
        def stop(_engine):
            if Path(marker).exists():
                raise RuntimeError("stopped for the resume check")
        trainer.add_event_handler(Events.ITERATION_COMPLETED(once=at_iteration), stop)
    return attach


def check_resume(folder: Path, hp: ignite_seg.FixedHyperparameters, device: str) -> None:
    hp = dataclasses.replace(hp, amp=True, ema_decay=0.99, epochs=6)
    run = folder / "resume"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": "gpu_check", "loaders": {}}))
    marker = folder / "stop"
    per_epoch = (1437 + hp.batch_size - 1) // hp.batch_size  # the digits' training set
    stop = normalize_spec(("gpu_check", "stop_once", (), {"marker": str(marker), "at_iteration": 4 * per_epoch + 5}),
                          "handlers")  # in epoch 5, after the checkpoint of epoch 4
    loss = normalize_spec(("gpu_check", "weighted_loss", (), {}), "loss")
    task = digits_task(0, hp, device=device, handlers=(stop,), loss=loss)
    reference = run_trial(task)
    plan = CheckpointPlan(2, str(run), "gpu_check")
    marker.touch()
    stopped = run_trial(dataclasses.replace(task, checkpoints=plan))
    marker.unlink()
    resumed = run_trial(dataclasses.replace(task, checkpoints=plan))
    a, b = (torch.load(io.BytesIO(o.model), weights_only=True) for o in (reference, resumed))
    diff = max(float((a[k].float() - b[k].float()).abs().max()) for k in a) if resumed.model else float("nan")
    ok = stopped.status == "failed" and resumed.status == "completed" and resumed.result.checkpoints.resumed_from_epoch == 4
    report(f"resume from a checkpoint on {device} (AMP, EMA, weight= loss)", ok and diff < 1e-2,
           f"resumed from epoch {resumed.result.checkpoints.resumed_from_epoch}; weights "
           + ("byte-identical" if resumed.model == reference.model else f"differ by at most {diff:.2e}")
           + f"; perf_val {resumed.result.metrics.get('perf_val', float('nan')):.4f} vs {reference.result.metrics.get('perf_val', float('nan')):.4f}")


def check_features(folder: Path, hp: ignite_seg.FixedHyperparameters, device: str = "cuda") -> None:
    hp = dataclasses.replace(hp, amp=True, ema_decay=0.99)
    res = ignite_seg.train(DIGITS["model"], DIGITS["dataset"], weighted_loss, folder / "features",
                           hyperparameters=hp, analysis="none", trials=1, trials_strict=True, cores=1,
                           seed=0, device=device, checkpoint_every=5, history_folder=folder / "history")
    result = json.loads((res.folder / "trials" / "0" / "result.json").read_text())
    ok = result["status"] == "completed" and result["metrics"]["perf_val"] > 0.8 and (res.folder / "trials/0/model_raw.pt").exists()
    report(f"AMP{' (fp16, GradScaler)' if device == 'cuda' else ''}, weight= loss, EMA, checkpoints on {device}", ok,
           f"{result['status']}, perf_val {result.get('perf_val', float('nan')):.3f}, devices {result.get('devices')}")


def check_digits(folder: Path, hp: ignite_seg.FixedHyperparameters, device: str) -> None:
    perf, wall = [], []
    for i, dev in enumerate(("cpu", device)):
        t0 = time.perf_counter()
        res = ignite_seg.train(*DIGITS.values(), folder / f"digits{i}", hyperparameters=hp, analysis="none", trials=2,
                               trials_strict=True, cores=2, seed=0, device=dev, history_folder=folder / "history")
        wall.append(time.perf_counter() - t0)
        perf.append(sum(t.perf_val for t in res.completed) / max(len(res.completed), 1))
    ok = abs(perf[1] - perf[0]) < 0.03
    report(f"digits on {device} vs cpu", ok, f"val perf cpu {perf[0]:.4f}, {device} {perf[1]:.4f}; "
           f"wall cpu {wall[0]:.1f} s, {device} {wall[1]:.1f} s ({device}/cpu {wall[1] / wall[0]:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=HP.epochs)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/ignite_seg_gpu_check"))
    parser.add_argument("--cpu", action="store_true", help="a dry run on the CPU (checks the script, not the GPU)")
    args = parser.parse_args()
    print(machine())
    device = "cpu" if args.cpu else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to check (--cpu runs the checks on the CPU)")
        sys.exit(2)
    if device == "cuda":
        print(f"torch {torch.__version__}, {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")
    shutil.rmtree(args.folder, ignore_errors=True)
    args.folder.mkdir(parents=True)
    hp = dataclasses.replace(HP, epochs=args.epochs)
    t0 = time.perf_counter()
    for check in (lambda: check_placement(hp, device), lambda: check_features(args.folder, hp, device),
                  lambda: check_resume(args.folder, hp, device), lambda: check_digits(args.folder, hp, device)):
        t1 = time.perf_counter()
        check()
        print(f"      ({time.perf_counter() - t1:.0f} s)", flush=True)
    print(f"{len(FAILED)} failed ({', '.join(FAILED) or 'none'}); {time.perf_counter() - t0:.0f} s")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()

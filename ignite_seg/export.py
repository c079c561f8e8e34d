"""Export a run folder to other tools.

Usage::

    python -m ignite_seg.export FOLDER tensorboard OUT

``tensorboard`` (needs ``pip install ignite_seg[tensorboard]``) writes, under ``OUT``:

* ``trial_<i>/``: every key of the trial's ``throughtime.npz`` as the scalar ``throughtime/<key>``,
  one step per snapshot (global step ``k`` = the k-th snapshot; the scalar ``throughtime/epochs``
  holds each step's fractional epoch, so the epoch of step ``k`` is its value);
* ``lr_sweep/`` (when the run was tuned): ``lr_sweep/lr`` and ``lr_sweep/loss/repeat_<r>`` per sweep step
  (from ``hparams/lr_vs_perf.npz``; steps after a repeat stopped are left out);
* ``hparams/trial_<i>/``: the run's recipe (``hparams/final.json``) with the trial's final metrics
  (the numbers of its ``result.json``) for TensorBoard's HParams plugin, metrics under ``hparam/<name>``.

Exit codes: 0 done, 2 the folder is no run folder or the optional package is missing.
"""
from __future__ import annotations

import argparse
import logging
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .exceptions import FolderError, IgniteSegError
from .storage.names import THROUGHTIME_NPZ
from .storage.run_folder import RunFolder
from .storage.schemas import LR_NPZ, LRSweepFile

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

__all__ = ["MissingExtraError", "export_tensorboard", "main"]

logger = logging.getLogger(__name__)


class MissingExtraError(IgniteSegError, ImportError):
    """An optional package an export needs is not installed."""


def _summary_writer() -> type[SummaryWriter]:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise MissingExtraError(
            "the TensorBoard export needs the tensorboard package; install it with "
            "pip install ignite_seg[tensorboard] (or pip install tensorboard)."
        ) from None
    return SummaryWriter


def export_tensorboard(folder: str | Path, out: str | Path) -> list[Path]:
    """Write the run in ``folder`` as TensorBoard event files under ``out``; return the run folders written.

    Example:
        >>> export_tensorboard("runs/current", "runs/tb")  # doctest: +SKIP
        [PosixPath('runs/tb/trial_0'), ...]
    """
    writer_cls = _summary_writer()
    rf = RunFolder(folder)
    rf.read_run()  # FolderError when folder is no run folder
    out = Path(out)
    written = [_trial_curves(writer_cls, rf, i, out / f"trial_{i}") for i, _ in rf.finished_trials()]
    sweep = LRSweepFile.read(rf.hparams / LR_NPZ)
    if sweep is not None and sweep.lrs.size and sweep.losses is not None:
        written.append(_lr_sweep(writer_cls, sweep, out / "lr_sweep"))
    written += _hparams(writer_cls, rf, out / "hparams")
    return [p for p in written if p is not None]


def _trial_curves(writer_cls: type[SummaryWriter], rf: RunFolder, trial: int, logdir: Path) -> Path | None:
    path = rf.trial(trial) / THROUGHTIME_NPZ
    if not path.is_file():
        return None
    curves = rf.read_throughtime(trial)
    n = curves["epochs"].size if "epochs" in curves else 0
    with writer_cls(log_dir=str(logdir)) as writer:
        for key, values in curves.items():
            if values.ndim != 1 or values.size != n:
                logger.warning("trial %d: throughtime key %r is not one value per snapshot; left out", trial, key)
                continue
            for step, value in enumerate(values.tolist()):
                writer.add_scalar(f"throughtime/{key}", value, global_step=step)
    return logdir


def _lr_sweep(writer_cls: type[SummaryWriter], sweep: LRSweepFile, logdir: Path) -> Path:
    losses = np.atleast_2d(np.asarray(sweep.losses))
    with writer_cls(log_dir=str(logdir)) as writer:
        for step, lr in enumerate(sweep.lrs.tolist()):
            writer.add_scalar("lr_sweep/lr", lr, global_step=step)
        for r, row in enumerate(losses):
            for step, value in enumerate(row.tolist()):
                if math.isfinite(value):
                    writer.add_scalar(f"lr_sweep/loss/repeat_{r}", value, global_step=step)
    return logdir


def _hparams(writer_cls: type[SummaryWriter], rf: RunFolder, logdir: Path) -> list[Path]:
    final = rf.read_final()
    if final is None:
        return []
    recipe = {k: _hparam_value(v) for k, v in final.to_dict().items()}
    written = []
    with writer_cls(log_dir=str(logdir)) as writer:
        for trial, result in rf.finished_trials():
            numbers = {**{k: v for k, v in result.to_json().items() if k not in ("format", "metrics")}, **result.metrics}
            metrics = {f"hparam/{k}": float(v) for k, v in numbers.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)}
            writer.add_hparams({**recipe, "trial": trial}, metrics, run_name=f"trial_{trial}")
            written.append(logdir / f"trial_{trial}")
    return written


def _hparam_value(value: Any) -> bool | int | float | str:
    """HParams take bools, numbers and strings: a pair or ``None`` is written as its text."""
    return value if isinstance(value, (bool, int, float, str)) else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ignite_seg.export", description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a run folder written by ignite_seg.train()")
    parser.add_argument("format", choices=["tensorboard"], help="what to export to")
    parser.add_argument("out", help="the folder to write (TensorBoard: its --logdir)")
    args = parser.parse_args(argv)
    from .runtime.logs import ensure_logging

    ensure_logging()
    try:
        written = export_tensorboard(args.folder, args.out)
    except (FolderError, MissingExtraError) as exc:
        logger.error("%s", exc)
        return 2
    logger.info("wrote %d TensorBoard runs under %s; view them with: tensorboard --logdir %s",
                len(written), args.out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

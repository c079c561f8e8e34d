"""Tuning, the public home: :func:`tune` chooses the recipe and writes ``hparams/``, no trials;
:func:`lr_range_test` runs the LR range test on a model, a dataset and a loss you hold; the tuner's
settings (:class:`HyperparameterSettings`) and its named presets (:data:`PRESETS`, :func:`get_preset`).

:func:`tune` is :func:`ignite_seg.train`'s pipeline (validate, probe, archive and lock, worker pool, tuner)
with ``trials=0, trials_strict=True``; the folder is a run folder like any other, in state
``complete``, which :func:`ignite_seg.analyze` draws (LR sweep, batch-size search, schedule) and
``train(..., is_continuation=True)`` later adds trials to with the tuned recipe.
"""
from __future__ import annotations

import os
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping

from .api import run_validated
from .config.analysis import AnalysisSettings, resolve_analysis
from .config.hyperparameters import FixedHyperparameters, HyperparameterSettings
from .config.presets import PRESETS, get_preset
from .exceptions import ConfigError
from .run_config import LoaderLike, validate
from .runtime.logs import ensure_logging
from .storage.names import MISC_JSON
from .storage.run_folder import RunFolder
from .storage.schemas import MiscFile
from .tuning.lr_finder import RangeTestResult, lr_range_test

__all__ = ["tune", "TuneResult", "tune_result", "lr_range_test", "RangeTestResult", "HyperparameterSettings",
           "PRESETS", "get_preset"]


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` returns: the chosen recipe and where its evidence is.

    ``lr_range`` is the range the LR range test chose at ``lr_range_batch_size``; the recipe's
    ``lr_start``/``lr_end`` are that range scaled to the chosen ``batch_size``. ``epochs_planned`` is the
    schedule's epochs when the length check cut them or took the compressed schedule (the recipe's ``epochs``
    are then fewer), else ``None``; ``length_compressed`` says which.
    """

    hyperparameters: FixedHyperparameters
    folder: Path
    lr_range: tuple[float, float]
    lr_range_batch_size: int
    batch_size: int
    batch_reason: str
    noise_scale: float
    paths: Mapping[str, Path] = field(default_factory=dict)
    epochs_planned: int | None = None
    length_compressed: bool = False

    def __str__(self) -> str:
        hp = self.hyperparameters
        cut = ("" if not self.epochs_planned else
               f" (the length check compressed {self.epochs_planned}: on its held-out slices the shorter schedule "
               "did better, or as well as the best before the perf fell)"
               if self.length_compressed else f" (the length check cut {self.epochs_planned}: the held-out perf fell)")
        return (f"tuned in {self.folder}: lr {hp.lr_start:.4g} -> {hp.lr_end:.4g} at batch size {hp.batch_size}, "
                f"{hp.epochs} epochs{cut} (LR range [{self.lr_range[0]:.4g}, {self.lr_range[1]:.4g}] at batch size "
                f"{self.lr_range_batch_size}; batch size: {self.batch_reason})")


def tune(
    model_loader: LoaderLike,
    dataset_loader: LoaderLike,
    loss_loader: LoaderLike,
    *,
    folder: str | os.PathLike[str],
    hyperparameters: str | HyperparameterSettings = "fast",
    accuracy_style: Literal["classification", "multiclass", "inv-loss"] = "classification",
    analysis: str | AnalysisSettings = "none",
    history_folder: str | os.PathLike[str] | None = None,
    cores: int | Literal["all"] = "all",
    executor: Executor | None = None,
    device: str = "auto",
    seed: int | None = None,
) -> TuneResult:
    """Tune the learning-rate range, the batch size and the schedule; write ``folder/hparams/``.

    The arguments mean what they mean for :func:`ignite_seg.train` (an existing run folder is
    archived to ``history_folder``). ``analysis`` draws the tuner's evidence at the end (``images``
    for the LR sweep, batch-size and schedule figures); the folder can be analysed up to
    ``images`` later with :func:`ignite_seg.analyze`.

    Raises:
        ConfigError: ``hyperparameters`` is a ``FixedHyperparameters`` (nothing to tune), or any
            argument :func:`ignite_seg.train` refuses.
        TuningError: the evidence admits no choice; the message says what to change.

    Example:
        >>> res = ignite_seg.tune(("mytask", "model", (), {}), ("mytask", "dataset", (), {}),
        ...                       ("torch.nn", "CrossEntropyLoss", (), {}), folder="out/tuned",
        ...                       hyperparameters="fast", cores=2, seed=0)  # doctest: +SKIP
        >>> res.hyperparameters.batch_size, res.lr_range  # doctest: +SKIP
    """
    if isinstance(hyperparameters, FixedHyperparameters):
        raise ConfigError(
            f"tune(hyperparameters={hyperparameters!r}): a fixed recipe leaves nothing to tune. Pass a "
            "tuner preset (fastest, fast, slow, slowest) or a HyperparameterSettings."
        )
    ensure_logging()
    wanted = resolve_analysis(analysis)
    later = max(wanted, resolve_analysis("images"), key=lambda a: a.level)
    cfg = validate(  # no trials: no metrics, best checkpoint, handlers or trial processes to check
        model_loader=model_loader, dataset_loader=dataset_loader, loss_loader=loss_loader, folder=folder,
        history_folder=history_folder, hyperparameters=hyperparameters, analysis=wanted,
        allow_later_analysis_up_to=later, accuracy_style=accuracy_style, trials=0, trials_strict=True,
        seed=seed, cores=cores, executor=executor, device=device,
    )
    res = run_validated(cfg, "tune")
    return tune_result(res.folder)


def tune_result(folder: str | os.PathLike[str]) -> TuneResult:
    """The :class:`TuneResult` of a folder whose tune completed (read from ``hparams/``)."""
    rf = RunFolder(folder)
    misc = MiscFile.read(rf.hparams / MISC_JSON, strict=False)
    steps = misc.steps if misc is not None else None
    if misc is None or misc.final is None or steps is None or steps.used_lr_range is None:
        raise ConfigError(f"{str(rf.path)!r} holds no completed tune (hparams/misc.json); run tune() first.")
    lr = steps.used_lr_range
    batch = steps.batch_size
    nan = float("nan")
    return TuneResult(
        hyperparameters=FixedHyperparameters.from_dict(misc.final),
        folder=rf.path,
        lr_range=(float(lr.lr_min if lr.lr_min is not None else nan), float(lr.lr_max if lr.lr_max is not None else nan)),
        lr_range_batch_size=int(lr.batch_size or 0),
        batch_size=int(misc.final["batch_size"]),
        batch_reason=str(getattr(batch, "reason", None) or ""),
        noise_scale=float(getattr(batch, "noise_scale", None) or nan),
        paths={p.name: p for p in sorted(rf.hparams.iterdir()) if p.is_file()},
        epochs_planned=steps.length.epochs_planned if steps.length is not None and steps.length.cut else None,
        length_compressed=bool(steps.length is not None and steps.length.short_won),
    )

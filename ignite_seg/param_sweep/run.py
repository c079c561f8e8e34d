"""``ignite_seg.sweep``: the whole of ``train()`` (tuning included) at each point of a list or grid
of loader arguments, every point on one worker pool, collated into ``sweep.npz`` with a report.

Layout of the sweep folder::

    folder/
      sweep.json          the points, the loaders, the seed, the state ("running", "complete")
      points/<k>/         point k's run folder, exactly what train() writes
      sweep.npz           one row per point (ignite_seg.storage.sweep_file)
      analysis/           sweep_perf.png, sweep_hparams.png, summary.md

The points run through :func:`ignite_seg.api.run_validated` on one
:class:`~ignite_seg.runtime.tasks.TaskRunner`: the worker processes are started once for the whole
sweep, and every point's tuning runs and trials are tasks of that one pool (or of the caller's
``executor``). Up to ``max_concurrent_points`` points overlap, each driven by a thread of its own
(:mod:`ignite_seg.param_sweep.drivers`), so that no core idles between points.
"""
from __future__ import annotations

import contextlib
import logging
import os
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal, Mapping, Sequence

import numpy as np

from ..config.analysis import AnalysisSettings, resolve_analysis
from ..config.hyperparameters import FixedHyperparameters, HyperparameterSettings
from ..config.specs import normalize_spec
from ..exceptions import ConfigError, ConfigTypeError, FolderError
from ..run_config import LoaderLike, RunConfig, validate
from ..run_plan import TrainResult, train_result
from ..runtime.logs import ensure_logging
from ..storage.atomic import atomic_write_bytes, read_json, write_json
from ..storage.folder_lock import FolderLock
from ..storage.run_folder import RunFolder, archive_folder, has_content, resolve_folder_arg
from ..storage.sweep_file import SWEEP_NPZ, SweepRecord
from .drivers import run_points
from .points import SweepPoint, Vary, check_points, check_vary, param_table, point_spec

__all__ = ["sweep", "SweepResult", "SWEEP_JSON"]

logger = logging.getLogger("ignite_seg")

SWEEP_JSON = "sweep.json"
_KIND = "ignite_seg.sweep"


@dataclass(frozen=True)
class SweepResult:
    """What :func:`sweep` returns: the points, each point's :class:`TrainResult`, the collated record."""

    folder: Path
    points: tuple[SweepPoint, ...]
    runs: tuple[TrainResult, ...]
    record: SweepRecord
    paths: Mapping[str, Path] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"ignite_seg sweep in {self.folder}: {len(self.points)} point(s)"]
        for p, run in zip(self.points, self.runs):
            perfs = [t.perf_val for t in run.completed]
            mean = f"{sum(perfs) / len(perfs):.4f}" if perfs else "n/a"
            hp = run.hyperparameters
            lines.append(f"  [{p.index}] {p.label}: val perf mean {mean} over {len(perfs)} trial(s); "
                         f"lr {hp.lr_start:.3g}->{hp.lr_end:.3g}, batch {hp.batch_size}")
        return "\n".join(lines)


def sweep(
    model_loader: LoaderLike,
    dataset_loader: LoaderLike,
    loss_loader: LoaderLike,
    *,
    folder: str | os.PathLike[str],
    points: Sequence[Mapping[str, Any] | Sequence[Any]] | None = None,
    grid: Mapping[str, Sequence[Any]] | None = None,
    vary: Vary = "model",
    hyperparameters: str | HyperparameterSettings | FixedHyperparameters = "fast",
    analysis: str | AnalysisSettings = "images",
    point_analysis: str | AnalysisSettings = "none",
    accuracy_style: Literal["classification", "multiclass", "inv-loss"] = "classification",
    trials: int = 1,
    trials_strict: bool = False,
    is_continuation: bool = False,
    history_folder: str | os.PathLike[str] | None = None,
    cores: int | Literal["all"] = "all",
    executor: Executor | None = None,
    device: str = "auto",
    seed: int | None = None,
    snapshots_per_epoch: int = 10,
    trial_timeout: float | None = None,
    max_concurrent_points: int = 2,
) -> SweepResult:
    """Run :func:`ignite_seg.train` (tuning included) at every point, on one pool; collate and report.

    Args:
        model_loader, dataset_loader, loss_loader: the recipe, as for :func:`ignite_seg.train`.
        folder: the sweep's folder (``points/<k>/`` holds point ``k``'s run folder).
        points: the points, each a dict of keyword arguments or a tuple of positional arguments
            added to the ``vary`` loader's own (keywords override the loader's).
        grid: instead of ``points``: ``{name: [values]}``, every combination a point.
        vary: the loader the points' arguments go to: ``"model"``, ``"dataset"`` or ``"loss"``.
        hyperparameters: a tuner preset (each point tuned on its own) or a fixed recipe (for all).
        analysis: ``"none"`` skips the sweep report; any other preset writes it.
        point_analysis: the analysis of each point's run folder (and what it collects for later).
        accuracy_style, trials, trials_strict, cores, executor, device, snapshots_per_epoch,
            trial_timeout: as for :func:`ignite_seg.train`, for every point.
        is_continuation: continue the sweep in ``folder``: finished points are kept as they are,
            the others continued as ``train(is_continuation=True)`` does (same points required).
        history_folder: where an existing sweep folder is archived (default ``folder/../history``).
        seed: the sweep's seed; point ``k`` runs with a seed drawn from it and ``k``.
        max_concurrent_points: points whose runs overlap on the pool (each driven by a thread of its
            own): the next point's tuning and trials fill the cores the others leave idle. ``1``
            runs the points one after the other. A point's results do not depend on it.

    Raises:
        ConfigError: bad points (none, both ``points`` and ``grid``, a repeat, a value the
            loader refuses), or any argument :func:`ignite_seg.train` refuses, before any run.
        FolderError: ``folder`` holds something that is not an ignite_seg sweep.

    Example:
        >>> res = ignite_seg.sweep(("mytask", "model", (), {}), ("mytask", "dataset", (), {}),  # doctest: +SKIP
        ...                        ("torch.nn", "CrossEntropyLoss", (), {}), folder="out/sweep",
        ...                        grid={"hidden": [8, 32, 128]}, trials=3, cores=2, seed=0)
    """
    ensure_logging()
    pts = check_points(points, grid)
    vary = check_vary(vary)
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ConfigError(f"trials must be an int >= 1 (trials per point), got {trials!r}; to tune only, call "
                          "ignite_seg.tune per point.")
    if isinstance(max_concurrent_points, bool) or not isinstance(max_concurrent_points, int) or \
            max_concurrent_points < 1:
        kind = ConfigError if isinstance(max_concurrent_points, int) and not isinstance(max_concurrent_points, bool) \
            else ConfigTypeError
        raise kind(f"max_concurrent_points must be an int >= 1 (how many points overlap on the pool; 1 runs them "
                   f"one after the other), got {max_concurrent_points!r}.")
    root = resolve_folder_arg(folder, "folder")
    history = root.parent / "history" if history_folder is None else resolve_folder_arg(history_folder,
                                                                                        "history_folder")
    previous = _check_sweep_folder(root, pts, vary, is_continuation)
    base_seed = _sweep_seed(previous, seed)
    report = resolve_analysis(analysis)
    base = {name: normalize_spec(value, f"{name}_loader")
            for name, value in zip(("model", "dataset", "loss"), (model_loader, dataset_loader, loss_loader))}
    cfgs = []
    for p in pts:  # every point checked before anything is written
        model, dataset, loss = (point_spec(spec, p) if name == vary else spec for name, spec in base.items())
        cfgs.append(validate(
            model_loader=model, dataset_loader=dataset, loss_loader=loss, folder=root / "points" / str(p.index),
            history_folder=root / "points_history", hyperparameters=hyperparameters, analysis=point_analysis,
            allow_later_analysis_up_to=point_analysis, accuracy_style=accuracy_style, trials=trials,
            trials_strict=trials_strict, is_continuation=True, seed=point_seed(base_seed, p.index),
            snapshots_per_epoch=snapshots_per_epoch, cores=cores, executor=executor, device=device,
            trial_timeout=trial_timeout,
        ))
    for p, cfg in zip(pts, cfgs):
        _probe_point(p, cfg)
    with _claimed(root, history, previous is None):
        info = {"kind": _KIND, "state": "running", "seed": base_seed, "vary": vary,
                "points": [p.to_json() for p in pts], "labels": [p.label for p in pts],
                "loaders": {name: spec.describe(300) for name, spec in base.items()}}
        write_json(root / SWEEP_JSON, info)
        runs = run_points(pts, cfgs, max_concurrent_points, lambda cfg: finished_point(cfg.folder))
        record = collate(pts, runs)
        record.write(root / SWEEP_NPZ)
        paths = {"folder": root, "sweep": root / SWEEP_NPZ, "points": root / "points"}
        if report.level > 0:
            paths.update(write_report(root, record))
        write_json(root / SWEEP_JSON, {**info, "state": "complete"})
    result = SweepResult(folder=root, points=pts, runs=tuple(runs), record=record, paths=paths)
    logger.info("%s", result)
    return result


def _probe_point(p: SweepPoint, cfg: RunConfig) -> None:
    """One batch of the point's recipe through model and loss, here, before any point runs."""
    from ..engine.probe import probe_recipe

    try:
        probe_recipe(cfg.setup.specs["model"], cfg.setup.specs["dataset"], cfg.setup.specs["loss"], cfg.setup.accuracy_style)
    except ConfigError as exc:
        raise type(exc)(f"points[{p.index}] ({p.label}): {exc}") from exc


def point_seed(base_seed: int, index: int) -> int:
    """The seed of point ``index``: depends on the sweep's seed and the index only."""
    return int(np.random.SeedSequence([base_seed, index, 29]).generate_state(1)[0])


def _sweep_seed(previous: Mapping[str, Any] | None, seed: int | None) -> int:
    if previous is not None:
        if seed is not None and seed != previous["seed"]:
            logger.warning("is_continuation=True: keeping the sweep's seed %d (seed=%d ignored)",
                           previous["seed"], seed)
        return int(previous["seed"])
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ConfigError(f"seed must be an int >= 0 or None, got {seed!r}.")
    return seed if seed is not None else int(np.random.SeedSequence().generate_state(1)[0])


def _check_sweep_folder(
    root: Path, pts: Sequence[SweepPoint], vary: str, is_continuation: bool
) -> dict[str, Any] | None:
    """The folder's sweep.json when continuing it, ``None`` for a new sweep; reads only."""
    if not has_content(root):
        return None
    marker = root / SWEEP_JSON
    if not marker.is_file():
        raise FolderError(f"folder={str(root)!r} is not empty and is not an ignite_seg sweep folder (no "
                          f"{SWEEP_JSON}); pass an empty or new folder, or a previous sweep's folder.")
    if not is_continuation:
        return None
    previous: dict[str, Any] = read_json(marker)
    if previous.get("points") != [p.to_json() for p in pts] or previous.get("vary") != vary:
        raise ConfigError(
            f"is_continuation=True: the points (vary={vary!r}, {[p.label for p in pts]}) differ from the "
            f"sweep's in {str(root)!r} (vary={previous.get('vary')!r}, {previous.get('labels')}). Continue with "
            "the same points, or start a new sweep with is_continuation=False."
        )
    return previous


@contextlib.contextmanager
def _claimed(root: Path, history: Path, fresh: bool) -> Iterator[None]:
    """The sweep folder, locked: an old sweep archived first when this one is new."""
    if fresh and has_content(root):
        FolderLock(root).acquire()  # raises FolderLockedError naming the pid when a sweep runs there
        FolderLock(root).release()
        logger.info("archived the existing sweep %s to %s", root, archive_folder(root, history))
    root.mkdir(parents=True, exist_ok=True)
    lock = FolderLock(root)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def finished_point(folder: Path) -> TrainResult | None:
    """A point's run read back from its folder when it is complete, else ``None``."""
    rf = RunFolder(folder)
    if not rf.is_run() or rf.read_run().state != "complete":
        return None
    final = rf.read_final()
    if final is None:  # a tune-only folder, never a sweep point's
        return None
    return train_result(rf, final, dict(rf.finished_trials()))


def collate(pts: Sequence[SweepPoint], runs: Sequence[TrainResult]) -> SweepRecord:
    """The sweep's record: one row per point, trials padded to the most any point has."""
    names, values = param_table(pts)
    width = max((len(r.completed) for r in runs), default=0)
    ids = np.full((len(pts), width), -1, dtype=np.int64)
    metrics = {key: np.full((len(pts), width), np.nan) for key in ("loss_train", "loss_val", "perf_train",
                                                                   "perf_val")}
    for row, run in enumerate(runs):
        for col, t in enumerate(run.completed):
            ids[row, col] = t.trial_id
            for key, table in metrics.items():
                table[row, col] = getattr(t, key)
    hps = [r.hyperparameters for r in runs]
    return SweepRecord(
        point_labels=np.array([p.label for p in pts], dtype=str),
        point_json=np.array([p.to_json() for p in pts], dtype=str),
        param_names=np.array(names, dtype=str).reshape(len(names)), param_values=values,
        lr_start=np.array([h.lr_start for h in hps], dtype=float), lr_end=np.array([h.lr_end for h in hps], dtype=float),
        batch_size=np.array([h.batch_size for h in hps], dtype=np.int64),
        epochs=np.array([h.epochs for h in hps], dtype=np.int64), trial_ids=ids,
        **{f"final_{key}": table for key, table in metrics.items()},
        n_completed=np.array([len(r.completed) for r in runs], dtype=np.int64),
    )


def write_report(root: Path, record: SweepRecord) -> dict[str, Path]:
    """Draw the sweep report into ``root/analysis``; the paths written."""
    from ..analysis.sweep_report import build_sweep_report

    out = {}
    for name, data in build_sweep_report(record).items():
        path = root / "analysis" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
        out[f"report_{Path(name).stem}"] = path
    return out

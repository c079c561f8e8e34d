"""The public entry points: :func:`train` and :func:`load_model`."""
from __future__ import annotations

import datetime as _dt
import logging
import os
import platform
import sys
import tempfile
import warnings
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

import numpy as np
from tqdm.auto import tqdm

from . import __version__
from .analysis.settings import AnalysisSettings, resolve_analysis
from .collate import Collator
from .exceptions import ConfigError, FolderError
from .execution import TaskLost, TaskRunner, prestart, resolve_cores
from .fileio import TMP_SUFFIX, read_json, remove_stale_temporaries, write_json, write_npz
from .folder import LOCK_NAME, FolderLock, RunFolder, archive_folder
from .hparams import FixedHyperparameters, HyperparameterSettings, resolve_hyperparameters
from .loaders import LoaderSpec, normalize_spec
from .logs import ensure_logging
from .scoring import ACCURACY_STYLES
from .validation import check_bool, check_choice, check_device, check_executor, check_int, probe_recipe

__all__ = ["train", "load_model", "TrainResult", "TrialSummary", "trial_seed"]

logger = logging.getLogger("ignite_seg")

LoaderLike = tuple[str, str, tuple[Any, ...], Mapping[str, Any]] | Callable[..., Any]


@dataclass(frozen=True)
class TrialSummary:
    """Final metrics of one trial (NaN where the trial did not complete)."""

    trial_id: int
    status: str
    loss_train: float
    loss_val: float
    perf_train: float
    perf_val: float
    seconds: float
    error: str | None = None


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train` returns: the recipe used, every trial of the folder and the paths written."""

    folder: Path
    hyperparameters: FixedHyperparameters
    trials: tuple[TrialSummary, ...]
    paths: Mapping[str, Path] = field(default_factory=dict)

    @property
    def completed(self) -> tuple[TrialSummary, ...]:
        return tuple(t for t in self.trials if t.status == "completed")

    @property
    def n_failed(self) -> int:
        return sum(t.status == "failed" for t in self.trials)

    @property
    def n_diverged(self) -> int:
        return sum(t.status == "diverged" for t in self.trials)

    @property
    def failures(self) -> tuple[TrialSummary, ...]:
        """The trials that failed or diverged, each with its ``error`` saying why."""
        return tuple(t for t in self.trials if t.status != "completed")

    def __str__(self) -> str:
        done = self.completed
        lines = [f"ignite_seg run in {self.folder}: {len(done)} of {len(self.trials)} trial(s) completed"]
        if done:
            perfs = [t.perf_val for t in done]
            lines.append(f"  val perf: mean {sum(perfs) / len(perfs):.4f}, best {max(perfs):.4f}")
        lines.extend(f"  trial {t.trial_id} {t.status}: {t.error}" for t in self.failures)
        return "\n".join(lines)


def trial_seed(base_seed: int, trial_id: int) -> int:
    """The seed of trial ``trial_id``: depends on the run's seed and the id only, not on workers."""
    return int(np.random.SeedSequence([base_seed, trial_id]).generate_state(1)[0])


def _versions() -> dict[str, str]:
    import ignite
    import torch

    return {
        "ignite_seg": __version__,
        "torch": torch.__version__,
        "pytorch-ignite": ignite.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def train(
    model_loader: LoaderLike,
    dataset_loader: LoaderLike,
    loss_loader: LoaderLike,
    *,
    folder: str | os.PathLike[str],
    hyperparameters: str | HyperparameterSettings | FixedHyperparameters = "fast",
    analysis: str | AnalysisSettings = "images",
    allow_later_analysis_up_to: str | AnalysisSettings = "video",
    accuracy_style: Literal["classification", "multiclass", "inv-loss"] = "classification",
    trials: int = 1,
    is_continuation: bool = False,
    history_folder: str | os.PathLike[str] | None = None,
    cores: int | Literal["all"] = "all",
    trials_strict: bool = False,
    executor: Executor | None = None,
    device: str = "auto",
    seed: int | None = None,
    snapshots_per_epoch: int = 10,
    metrics: Mapping[str, LoaderLike] | None = None,
) -> TrainResult:
    """Tune (unless the recipe is fixed), run ``trials`` trials in parallel, collate and analyse.

    Args:
        model_loader: recipe of the model, ``(module, attrname, args, kwargs)`` or a picklable callable.
        dataset_loader: recipe returning ``(train_set, val_set)``.
        loss_loader: recipe of the loss, e.g. ``("torch.nn", "CrossEntropyLoss", (), {})``.
        folder: output folder (see DESIGN.md for the layout).
        hyperparameters: a tuner preset name (``fastest``, ``fast``, ``slow``, ``slowest``), a
            ``HyperparameterSettings``, or a ``FixedHyperparameters`` recipe used as is.
        analysis: analysis preset run at the end (``none`` ... ``video``).
        allow_later_analysis_up_to: collect enough data to run this analysis later.
        accuracy_style: how perf is measured.
        trials: minimum number of trials (more when ``trials_strict=False`` fills idle workers).
            With ``is_continuation=True`` the trials are added to the folder's; a folder whose
            run was interrupted is first completed as planned, with the same seeds.
        is_continuation: reuse the folder's hyperparameters and add trials to it.
        history_folder: where an existing ``folder`` is archived (default: ``folder/../history``).
        cores: worker processes, or ``"all"`` physical cores.
        trials_strict: run exactly ``trials`` trials.
        executor: any ``concurrent.futures.Executor``; ``None`` creates a local process pool.
        device: ``auto`` (CUDA when available), ``cpu``, ``cuda`` or ``cuda:N``.
        seed: seed of the tuning and the trials; ``None`` draws one and records it in run.json.
        snapshots_per_epoch: through-time measurements per epoch.
        metrics: custom ignite ``Metric``s as loader specs by name, measured on the training set
            and every validation set (recorded as ``metric_<name>_<part>``).

    Example:
        >>> import ignite_seg  # doctest: +SKIP
        >>> res = ignite_seg.train(("mytask", "model", (), {}), ("mytask", "dataset", (), {}),
        ...                        ("torch.nn", "CrossEntropyLoss", (), {}), folder="out/current",
        ...                        hyperparameters="fast", trials=4, cores=2, seed=0)
        >>> model = ignite_seg.load_model("out/current", trial=0)
    """
    ensure_logging()
    # -- validate everything in this process, before any worker starts -------------------
    specs = {
        "model": normalize_spec(model_loader, "model_loader"),
        "dataset": normalize_spec(dataset_loader, "dataset_loader"),
        "loss": normalize_spec(loss_loader, "loss_loader"),
    }
    metric_specs = {name: normalize_spec(spec, f"metrics[{name!r}]") for name, spec in (metrics or {}).items()}
    hp_settings = resolve_hyperparameters(hyperparameters)
    analysis_settings = resolve_analysis(analysis)
    collect = resolve_analysis(allow_later_analysis_up_to, "allow_later_analysis_up_to")
    if collect.level < analysis_settings.level:
        collect = analysis_settings
    check_choice("accuracy_style", accuracy_style, ACCURACY_STYLES)
    trials = check_int("trials", trials, 1)  # type: ignore[assignment]
    check_bool("is_continuation", is_continuation)
    check_bool("trials_strict", trials_strict)
    n_cores = resolve_cores(cores)
    executor = check_executor(executor)
    check_device(device)
    seed = check_int("seed", seed, 0, optional=True)
    check_int("snapshots_per_epoch", snapshots_per_epoch, 1)
    rf = RunFolder(_check_folder_arg(folder, "folder"))
    history = Path(history_folder) if history_folder is not None else rf.path.parent / "history"
    if history_folder is not None:
        _check_folder_arg(history_folder, "history_folder")
    previous = _check_continuation(rf, is_continuation, specs, accuracy_style)
    if executor is None:
        prestart()  # the fork server imports torch while this process checks the recipe
    logger.info("checking the recipe (model, dataset, loss) in this process")
    facts = probe_recipe(specs["model"], specs["dataset"], specs["loss"], accuracy_style)
    logger.info("recipe ok: %d training and %d validation items", facts["n_train"], facts["n_val"])

    # -- folder: archive the old one, take the lock ---------------------------------------
    if previous is None and rf.path.exists() and _has_content(rf.path):
        holder = FolderLock.holder(rf.path)
        if holder is not None:
            FolderLock(rf.path).acquire()  # raises FolderLockedError naming the pid
        dest = archive_folder(rf.path, history)
        logger.info("archived the existing %s to %s", rf.path, dest)
    rf.path.mkdir(parents=True, exist_ok=True)
    lock = FolderLock(rf.path)
    lock.acquire()
    if n := remove_stale_temporaries(rf.path):
        logger.info("removed %d temporary file(s) left by an interrupted write", n)
    try:
        return _run(
            rf, specs, hp_settings, analysis_settings, collect, accuracy_style, trials, trials_strict,
            n_cores, executor, device, seed, snapshots_per_epoch, previous, facts, metric_specs,
        )
    finally:
        lock.release()


def _check_folder_arg(value: Any, name: str) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        from .exceptions import ConfigTypeError

        raise ConfigTypeError(f"{name} must be a path (str or os.PathLike), got {value!r} ({type(value).__name__}).")
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise FolderError(f"{name}={str(path)!r} exists and is not a folder; pass a folder path.")
    probe = path.absolute()
    while not probe.exists():
        probe = probe.parent
    try:  # a real write: os.access says yes to root even where writing fails
        fd, tmp = tempfile.mkstemp(prefix=".ignite_seg_probe_", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise FolderError(
            f"{name}={str(path)!r} cannot be written: creating a file in {str(probe)!r} failed "
            f"({exc.strerror or exc}). Pass a folder you can write to."
        ) from None
    return path


def _has_content(folder: Path) -> bool:
    """Whether ``folder`` holds anything but a lock file and temporaries left by a crash."""
    return any(p.name != LOCK_NAME and not p.name.endswith(TMP_SUFFIX) for p in folder.iterdir())


def _check_continuation(
    rf: RunFolder, is_continuation: bool, specs: Mapping[str, LoaderSpec], accuracy_style: str
) -> dict[str, Any] | None:
    """The folder's run.json when continuing it; ``None`` for a fresh run."""
    if not is_continuation:
        return None
    if not rf.path.exists() or not _has_content(rf.path):
        logger.info("is_continuation=True but %s is empty: starting a new run", rf.path)
        return None
    if not rf.is_run():
        raise FolderError(
            f"is_continuation=True but {str(rf.path)!r} is not an ignite_seg run folder (no "
            "run.json). Use is_continuation=False to archive it and start anew, or another folder."
        )
    previous = rf.read_run()
    if previous.get("accuracy_style") != accuracy_style:
        raise ConfigError(
            f"is_continuation=True: the folder's run used accuracy_style="
            f"{previous.get('accuracy_style')!r}, not {accuracy_style!r}. Pass the same value, or "
            "start a new run with is_continuation=False."
        )
    for name, spec in specs.items():
        old = previous["loaders"].get(name, {}).get("describe")
        if old != spec.describe():
            raise ConfigError(
                f"is_continuation=True: {name}_loader is {spec.describe()} but the folder's run used "
                f"{old}. Continue with the same loaders, or start a new run with is_continuation=False."
            )
    return previous


def _run(
    rf: RunFolder,
    specs: Mapping[str, LoaderSpec],
    hp_settings: HyperparameterSettings | FixedHyperparameters,
    analysis_settings: AnalysisSettings,
    collect: AnalysisSettings,
    accuracy_style: str,
    trials: int,
    trials_strict: bool,
    n_cores: int,
    executor: Executor | None,
    device: str,
    seed: int | None,
    snapshots_per_epoch: int,
    previous: dict[str, Any] | None,
    facts: Mapping[str, Any],
    metric_specs: Mapping[str, LoaderSpec] | None = None,
) -> TrainResult:
    base_seed = int(previous["seed"]) if previous else (
        seed if seed is not None else int(np.random.SeedSequence().generate_state(1)[0])
    )
    if previous and seed is not None and seed != base_seed:
        logger.warning("is_continuation=True: keeping the folder's seed %d (seed=%d ignored)", base_seed, seed)
    if previous:
        collect = resolve_analysis(previous.get("allow_later_analysis_up_to", collect.name))
        snapshots_per_epoch = int(previous.get("snapshots_per_epoch", snapshots_per_epoch))
    run_info: dict[str, Any] = dict(previous or {})
    run_info.update(
        {
            "format": 1,
            "versions": _versions(),
            "created": run_info.get("created") or _dt.datetime.now().isoformat(timespec="seconds"),
            "loaders": {k: s.to_json() for k, s in specs.items()},
            "accuracy_style": accuracy_style,
            "hyperparameters": {
                "kind": "fixed" if isinstance(hp_settings, FixedHyperparameters) else "tuned",
                **hp_settings.to_dict(),
            },
            "analysis": analysis_settings.name,
            "allow_later_analysis_up_to": collect.name,
            "seed": base_seed,
            "device": device,
            "snapshots_per_epoch": snapshots_per_epoch,
            "argv": sys.argv,
        }
    )
    interrupted = previous is not None and previous.get("state") != "complete"
    run_info["state"] = "running"
    rf.write_run(run_info)

    with TaskRunner(n_cores, executor) as runner:
        # -- hyperparameters ------------------------------------------------------------------
        hp = _hyperparameters(rf, runner, specs, hp_settings, accuracy_style, facts, base_seed, device)
        # -- plan the trials ---------------------------------------------------------------
        finished = dict(rf.finished_trials())
        if interrupted and run_info.get("planned_trials"):
            plan = [int(t) for t in run_info["planned_trials"]]
            logger.info("resuming an interrupted run: %d of %d planned trials left",
                        sum(t not in finished for t in plan), len(plan))
        else:
            n = trials if trials_strict else -(-trials // runner.capacity) * runner.capacity
            start = max(rf.trial_ids(), default=-1) + 1
            plan = list(range(start, start + n))
        run_info["planned_trials"] = plan
        rf.write_run(run_info)
        todo = [t for t in plan if t not in finished]

        collator = Collator(
            {"snapshots_per_epoch": snapshots_per_epoch, **hp.to_dict()}, smooth_window=snapshots_per_epoch | 1
        )
        for tid, res in finished.items():
            if res.get("status") == "completed":
                collator.add(tid, res, rf.read_throughtime(tid))
        first_completed = min((t for t, r in finished.items() if r.get("status") == "completed"), default=None)
        record_hidden_id = todo[0] if collect.collects_hidden and first_completed is None and todo else None
        from .trainer import TrialTask, run_trial

        tasks = [
            TrialTask(
                trial_id=t, model=specs["model"], dataset=specs["dataset"], loss=specs["loss"], hparams=hp,
                accuracy_style=accuracy_style, seed=trial_seed(base_seed, t), device=device,
                snapshots_per_epoch=snapshots_per_epoch, record_hidden=(t == record_hidden_id),
                threads=runner.task_threads, metrics=dict(metric_specs or {}),
            )
            for t in todo
        ]
        logger.info("running %d trial(s) on %d worker(s)", len(tasks), runner.capacity)
        with tqdm(total=len(tasks), desc="trials", unit="trial", mininterval=0.5) as bar:
            for item in runner.map_unordered(run_trial, tasks, key=lambda task: task.trial_id):
                outcome = _lost_outcome(item) if isinstance(item, TaskLost) else item
                res = rf.write_trial(outcome)
                finished[outcome.trial_id] = res
                if outcome.status == "completed":
                    collator.add(outcome.trial_id, res, outcome.throughtime)
                else:
                    logger.warning("trial %d %s: %s", outcome.trial_id, outcome.status, res.get("error"))
                bar.update(1)

    # -- collate -----------------------------------------------------------------------------
    results, tt = collator.arrays()
    write_npz(rf.results, **results)
    write_npz(rf.throughtimes, **tt)
    # "collated": trials and collation done, the analysis not yet (a crash there is resumed too)
    run_info["state"] = "collated" if analysis_settings.level > 0 else "complete"
    rf.write_run(run_info)
    n_ok = len(collator)
    logger.info("%d completed trial(s) collated into %s and %s", n_ok, rf.results, rf.throughtimes)
    if n_ok:
        logger.info("final val perf: mean %.4f, best %.4f", results["final_perf_val"].mean(),
                    results["final_perf_val"].max())

    # -- analyse -----------------------------------------------------------------------------
    if analysis_settings.level > 0:
        from .analysis import analyze_folder

        try:
            analyze_folder(rf, analysis_settings, cores=n_cores)
        except Exception as exc:  # the results are safe: report, and let the caller have them
            logger.error("analysis %r failed (%s: %s); the trials and collated results are saved. Redo it "
                         "with: python -m ignite_seg.reanalyze %s --analysis %s", analysis_settings.name,
                         type(exc).__name__, exc, rf.path, analysis_settings.name)
            warnings.warn(f"analysis failed: {type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=3)
        run_info["state"] = "complete"
        rf.write_run(run_info)
    return _result(rf, hp, finished)


def _hyperparameters(
    rf: RunFolder,
    runner: TaskRunner,
    specs: Mapping[str, LoaderSpec],
    settings: HyperparameterSettings | FixedHyperparameters,
    accuracy_style: str,
    facts: Mapping[str, Any],
    seed: int,
    device: str,
) -> FixedHyperparameters:
    final = rf.hparams / "final.json"
    existing = FixedHyperparameters.from_dict(read_json(final)) if final.is_file() else None
    if isinstance(settings, FixedHyperparameters):
        if existing is not None and existing != settings and rf.trial_ids():
            raise ConfigError(
                f"is_continuation=True with hyperparameters={settings!r}, but the folder's trials used "
                f"{existing!r}; trials of one run share one recipe. Start a new run instead."
            )
        write_json(final, settings.to_dict())
        return settings
    if existing is not None:
        logger.info("reusing the folder's tuned hyperparameters %s", existing)
        return existing
    from .tuner import tune

    return tune(runner, rf, settings, specs, accuracy_style=accuracy_style, facts=facts, seed=seed, device=device)


def _lost_outcome(lost: TaskLost[Any]) -> Any:
    from .trainer import TrialOutcome

    return TrialOutcome(
        trial_id=lost.task.trial_id, status="failed", seconds=float("nan"), started_at=float("nan"), pid=-1,
        error=f"lost after {lost.attempts} attempts: {lost.error}",
    )


def _result(rf: RunFolder, hp: FixedHyperparameters, finished: Mapping[int, Mapping[str, Any]]) -> TrainResult:
    nan = float("nan")
    summaries = tuple(
        TrialSummary(
            trial_id=tid, status=str(r.get("status")), loss_train=float(r.get("loss_train", nan)),
            loss_val=float(r.get("loss_val", nan)), perf_train=float(r.get("perf_train", nan)),
            perf_val=float(r.get("perf_val", nan)), seconds=float(r.get("seconds") or nan), error=r.get("error"),
        )
        for tid, r in sorted(finished.items())
    )
    paths = {
        "folder": rf.path, "run": rf.run_json, "results": rf.results, "throughtimes": rf.throughtimes,
        "hparams": rf.hparams, "trials": rf.trials, "analysis": rf.analysis,
    }
    return TrainResult(folder=rf.path, hyperparameters=hp, trials=summaries, paths=paths)


def load_model(folder: str | os.PathLike[str], *, trial: int = 0, initial: bool = False) -> Any:
    """Rebuild trial ``trial``'s model from the folder's recorded model loader and weights.

    Args:
        folder: a run folder written by :func:`train`.
        trial: the trial id.
        initial: load the weights before training (``model_init.pt``) instead of after.

    Example:
        >>> model = ignite_seg.load_model("out/current", trial=0)  # doctest: +SKIP
    """
    import torch

    rf = RunFolder(folder)
    info = rf.read_run()
    path = rf.trial(trial) / ("model_init.pt" if initial else "model.pt")
    if not path.is_file():
        raise FolderError(
            f"trial {trial} of {str(rf.path)!r} has no {path.name}; trials with weights: "
            f"{[t for t in rf.trial_ids() if (rf.trial(t) / path.name).is_file()]}."
        )
    model = LoaderSpec.from_json(info["loaders"]["model"]).build()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model

"""The public entry points: :func:`train` and :func:`load_model`."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import warnings
from concurrent.futures import Executor
from typing import Any, Iterator, Literal, Mapping, Sequence

import numpy as np
from tqdm.auto import tqdm

from .config.analysis import AnalysisSettings
from .config.hyperparameters import FixedHyperparameters, HyperparameterSettings
from .config.specs import refers_to_main
from .engine.best import best_parts
from .engine.probe import probe_recipe
from .loading import load_model
from .run_config import LoaderLike, RunConfig, validate
from .run_plan import (
    TrainResult,
    TrialSummary,
    check_continuation,
    check_same_metrics,
    checkpoint_plan,
    failure_recorded,
    log_trial,
    plan_trials,
    run_record,
    settle,
    train_result,
    trial_function,
)
from .runtime.logs import ensure_logging, tagged
from .runtime.main_module import check_main_guard, workers_skip_main
from .runtime.process_exit import freeze_at_exit
from .runtime.tasks import TaskLost, TaskRunner, prestart
from .runtime.workers import second_interrupt_exits, start_method
from .storage.atomic import write_npz
from .storage.claim import claimed
from .storage.collate import Collator
from .storage.records import RunRecord, TrialResult, state
from .storage.run_folder import RunFolder

__all__ = ["train", "load_model", "TrainResult", "TrialSummary", "trial_seed"]

logger = logging.getLogger("ignite_seg")

#: Modules every trial worker imports before its first task (the fork server, or this process
#: when the workers are its forks, imports them once).
#: ``torch._dynamo`` is imported by the first optimizer a process builds (~2.5 s here): preloaded,
#: no worker pays it again.
WORKER_PRELOAD = ("ignite_seg.engine.trainer", "torch._dynamo")


def trial_seed(base_seed: int, trial_id: int) -> int:
    """The seed of trial ``trial_id``: depends on the run's seed and the id only, not on workers."""
    return int(np.random.SeedSequence([base_seed, trial_id]).generate_state(1)[0])


def train(
    model_loader: LoaderLike,
    dataset_loader: LoaderLike,
    loss_loader: LoaderLike,
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
    *,
    executor: Executor | None = None,
    device: str = "auto",
    seed: int | None = None,
    snapshots_per_epoch: int = 10,
    trial_timeout: float | None = None,
    metrics: Mapping[str, LoaderLike] | None = None,
    metric_modes: Mapping[str, Literal["min", "max"]] | None = None,
    best_metric: str | None = None,
    best_mode: Literal["min", "max"] | None = None,
    best_over: Literal["primary", "mean"] | Sequence[str] = "primary",
    val_only_metrics: Sequence[str] | None = None,
    handlers: Sequence[LoaderLike] | None = None,
    checkpoint_every: int | None = None,
    trial_processes: int = 1,
) -> TrainResult:
    """Tune (unless the recipe is fixed), run ``trials`` trials in parallel, collate and analyse.

    The first 13 arguments may be positional, in ignite-simple's order (docs/migrating.md).

    Args:
        model_loader: recipe of the model, ``(module, attrname, args, kwargs)`` or a picklable callable.
        dataset_loader: recipe returning ``(train_set, val_set)`` or an :class:`ignite_seg.Data` record
            (named validation sets, ``collate_fn``, ``prepare_batch``, ``cache``, ``num_workers``).
        loss_loader: recipe of the loss, e.g. ``("torch.nn", "CrossEntropyLoss", (), {})``.
        folder: output folder of its own (see docs/usage.md for the layout and the folder rules).
            An existing run folder is archived (``is_continuation=False``) or continued; any
            other non-empty folder, the home or working directory, and ``/`` are refused.
        hyperparameters: a tuner preset name (``fastest``, ``fast``, ``slow``, ``slowest``), a
            ``HyperparameterSettings``, or a ``FixedHyperparameters`` recipe used as is.
        analysis: analysis preset run at the end (``none`` ... ``video``).
        allow_later_analysis_up_to: collect enough data to run this analysis later.
        accuracy_style: how perf is measured.
        trials: minimum number of trials (more when ``trials_strict=False`` fills idle workers).
            ``trials=0`` with ``trials_strict=True`` tunes only (see :func:`ignite_seg.tune`).
            With ``is_continuation=True`` the trials are added to the folder's; a folder whose
            run was interrupted is completed as planned, with the same seeds, and nothing is
            added. ``trials=0`` (continuation only) finishes an interrupted run and adds nothing
            in any case: the safe way to recover a killed call.
        is_continuation: reuse the folder's hyperparameters and add trials to it.
        history_folder: where an existing ``folder`` is archived (default: ``folder/../history``).
        cores: worker processes (at most the CPUs this process may use), or ``"all"`` physical cores.
        trials_strict: run exactly ``trials`` trials.
        executor: any ``concurrent.futures.Executor``; ``None`` creates a local process pool.
        device: ``auto`` (CUDA when available), ``cpu``, ``cuda`` or ``cuda:N``.
        seed: seed of the tuning and the trials; ``None`` draws one and records it in run.json.
        snapshots_per_epoch: through-time measurements per epoch.
        trial_timeout: seconds a trial may run; a trial past it is stopped (its worker process
            killed) and recorded as failed, "timed out after N s", and the run goes on. ``None``:
            no limit. With your own ``executor`` the trial cannot be stopped: it is recorded as
            failed and its result is ignored when it arrives. Tuning runs have no limit.
        metrics: custom ignite ``Metric``s by name, as loader specs built in the workers; each is
            fed ``(y_pred, y)`` and measured at every snapshot and at the end, on the training set
            and on every validation set (keys ``metric_<name>_train``, ``metric_<name>_val``,
            ``metric_<name>_val_<set>``; see docs/usage.md).
        val_only_metrics: custom metrics too slow for the training set: measured on the validation
            sets only (their ``metric_<name>_train`` values are NaN).
        metric_modes: the direction of each custom metric, ``"max"`` or ``"min"`` (required for
            every one: which trial is "best" is never guessed).
        best_metric: keep each trial's weights at the through-time snapshot where this metric
            (``"loss"``, ``"perf"`` or a custom metric's name) on the primary validation set's
            snapshot subset is best, in ``trials/<i>/model_best.pt`` (docs/usage.md "Best checkpoint").
        best_mode: ``"min"`` or ``"max"``: the direction of ``best_metric`` (both or neither).
        best_over: which validation sets' snapshot values choose the best: ``"primary"`` (default),
            ``"mean"`` (their mean over every validation set) or a list of set names (the mean over those).
        handlers: loader specs, each building a callable ``attach(trainer, context)`` called in the
            worker after ignite_seg's own handlers (docs/usage.md "User handlers").
        checkpoint_every: epochs between a trial's checkpoints (``trials/<i>/checkpoint.pt``), from
            which a continuation (``is_continuation=True``) of a killed run resumes the trial with
            the same final weights and metrics as an uninterrupted run. ``None`` (default):
            automatic, on for a trial whose first epoch x ``epochs`` exceeds about a minute; ``0``:
            off. Needs workers that see the run folder (docs/reliability.md, "Mid-trial resume").
        trial_processes: processes training each trial together (``ignite.distributed``: ``gloo`` on
            the CPU, ``nccl`` on CUDA); the batch size is then the global batch. With the default pool
            ``cores`` counts processes: ``cores=4, trial_processes=2`` runs two trials at a time. The
            tuner's runs stay in one process each (docs/usage.md "Several processes per trial").

    Example:
        >>> import ignite_seg  # doctest: +SKIP
        >>> res = ignite_seg.train(("mytask", "model", (), {}), ("mytask", "dataset", (), {}),
        ...                        ("torch.nn", "CrossEntropyLoss", (), {}), folder="out/current",
        ...                        hyperparameters="fast", trials=4, cores=2, seed=0)
        >>> model = ignite_seg.load_model("out/current", trial=0, trust_recipe=True)
    """
    ensure_logging()
    cfg = validate(
        model_loader=model_loader, dataset_loader=dataset_loader, loss_loader=loss_loader, folder=folder,
        history_folder=history_folder, hyperparameters=hyperparameters, analysis=analysis,
        allow_later_analysis_up_to=allow_later_analysis_up_to, accuracy_style=accuracy_style, trials=trials,
        trials_strict=trials_strict, is_continuation=is_continuation, seed=seed, snapshots_per_epoch=snapshots_per_epoch,
        cores=cores, executor=executor, device=device, trial_timeout=trial_timeout, metrics=metrics,
        metric_modes=metric_modes, best_metric=best_metric, best_mode=best_mode, best_over=best_over,
        val_only_metrics=val_only_metrics, handlers=handlers, checkpoint_every=checkpoint_every,
        trial_processes=trial_processes,
    )
    return run_validated(cfg, "train")


def run_validated(cfg: RunConfig, entry: str, runner: TaskRunner | None = None) -> TrainResult:
    """The pipeline of a validated call: continuation check, probe, archive + lock, tune, trials,
    collate, analyse. ``entry`` names the public function in the main-guard error; ``runner``: a
    pool shared with other runs (a sweep's points), left open, instead of one of the call's own."""
    freeze_at_exit()  # this process's interpreter then exits without walking torch's objects (~0.4 s)
    specs = [*cfg.setup.specs.values(), *cfg.setup.metrics.values(), *cfg.setup.handlers]  # all built in the workers
    uses_main = any(refers_to_main(spec) for spec in specs)
    method = _start_method(cfg, runner)
    check_main_guard(entry, uses_main and method != "fork")  # a forked worker imports no script
    previous = check_continuation(cfg)  # reads the folder; nothing is written before this passed
    check_same_metrics(cfg, previous)
    cfg = settle(cfg, previous)
    # an unguarded script is not run again in the workers; a second interrupt while the first is
    # handled (workers stopped, the lock released) exits now
    with workers_skip_main(not uses_main), second_interrupt_exits():
        facts = _probe(cfg, method)
        setup = dataclasses.replace(cfg.setup, best_parts=best_parts(cfg.best_over, facts["val_names"]))
        cfg = dataclasses.replace(cfg, setup=setup)
        # archive an old run and take the lock
        with claimed(cfg.folder, cfg.history, fresh=previous is None) as rf, _on_interrupt(rf):
            run_info = run_record(cfg, previous, facts["val_names"], facts["n_train"])
            rf.write_run(run_info)
            with contextlib.ExitStack() as stack:
                runner = runner or stack.enter_context(TaskRunner(cfg.cores, cfg.executor, preload=WORKER_PRELOAD,
                                                                       method=method))
                with failure_recorded(rf, run_info, "tuning"):
                    hp = _hyperparameters(rf, runner, cfg, facts)
                run_info = dataclasses.replace(run_info, planned_trials=tuple(plan_trials(rf, cfg, previous,
                                                                                          cfg.trials_at_once)))
                rf.write_run(run_info)  # the plan is on disk before any trial runs
                finished, collator = _run_trials(rf, runner, cfg, hp, list(run_info.planned_trials))
            run_info = _collate(rf, cfg, collator, run_info)
            _analyse(rf, cfg, run_info)
            return train_result(rf, hp, finished)


def _start_method(cfg: RunConfig, runner: TaskRunner | None) -> str | None:
    """How this call's default pool starts its workers (said in the log); ``None`` on the caller's executor."""
    if runner is not None:
        return runner.method
    return None if cfg.executor is not None else start_method(announce=True)


def _probe(cfg: RunConfig, method: str | None) -> Mapping[str, Any]:
    if method == "forkserver":  # the fork server imports torch while this process checks the recipe
        prestart(WORKER_PRELOAD, method)  # (forked workers get the imports of this process, after the check)
    logger.info("checking the recipe (model, dataset, loss) in this process")
    setup = cfg.setup
    facts = probe_recipe(setup.model, setup.dataset, setup.loss, setup.accuracy_style)
    logger.info("recipe ok: %d training and %d validation items", facts["n_train"], facts["n_val"])
    return facts


@contextlib.contextmanager
def _on_interrupt(rf: RunFolder) -> Iterator[None]:
    """Say what an interrupt kept (the workers are stopped by the task runner) and let it through."""
    try:
        yield
    except KeyboardInterrupt:
        logger.warning("interrupted: the workers were stopped; completed trials are kept in %s (finish the "
                       "run with is_continuation=True)", rf.path)
        raise


def _run_trials(
    rf: RunFolder, runner: TaskRunner, cfg: RunConfig, hp: FixedHyperparameters, plan: list[int]
) -> tuple[dict[int, TrialResult], Collator]:
    """Run the planned trials not finished yet; every finished trial, and the collator holding them."""
    from .engine.trainer import TrialTask

    finished = dict(rf.finished_trials())
    collator = Collator(
        {"snapshots_per_epoch": cfg.setup.snapshots_per_epoch, **hp.to_dict()}, smooth_window=cfg.setup.snapshots_per_epoch | 1
    )
    for tid, res in finished.items():
        if res.completed:
            collator.add(tid, res, rf.read_throughtime(tid))
    todo = [t for t in plan if t not in finished]
    first_completed = min((t for t, r in finished.items() if r.completed), default=None)
    record_hidden_id = todo[0] if cfg.collect.collects_hidden and first_completed is None and todo else None
    assert cfg.seed is not None  # settled
    checkpoints = checkpoint_plan(rf, runner, cfg) if todo else None
    tasks = [TrialTask(trial_id=t, setup=cfg.setup, hparams=hp, seed=trial_seed(cfg.seed, t),
                       record_hidden=(t == record_hidden_id), threads=runner.task_threads, checkpoints=checkpoints)
             for t in todo]
    if tasks:  # none: tuning only (tune(), trials=0), or every planned trial finished before
        logger.info("running %d trial(s), %d at a time", len(tasks), cfg.trials_at_once)
    with tqdm(total=len(tasks), desc=tagged("trials"), unit="trial", mininterval=0.5) as bar:
        for item in runner.map_unordered(trial_function(cfg.setup.processes), tasks, key=lambda task: task.trial_id,
                                         timeout=cfg.trial_timeout, at_once=cfg.trials_at_once):
            outcome = _lost_outcome(item) if isinstance(item, TaskLost) else item
            res = rf.write_trial(outcome)
            log_trial(outcome)
            finished[outcome.trial_id] = res
            if outcome.status == "completed":
                collator.add(outcome.trial_id, res, outcome.throughtime)
            else:
                logger.warning("trial %d %s: %s", outcome.trial_id, outcome.status, res.error)
            bar.update(1)
    return finished, collator


def _collate(rf: RunFolder, cfg: RunConfig, collator: Collator, run_info: RunRecord) -> RunRecord:
    results, tt = collator.arrays()
    write_npz(rf.results, **results)
    write_npz(rf.throughtimes, **tt)
    # "collated": trials and collation done, the analysis not yet (a crash there is resumed too)
    run_info = dataclasses.replace(run_info, state=state("collated" if cfg.analysis.level > 0 else "complete"))
    rf.write_run(run_info)
    if len(collator):
        logger.info("%d completed trial(s) collated into %s and %s", len(collator), rf.results, rf.throughtimes)
        logger.info("final val perf: mean %.4f, best %.4f", results["final_perf_val"].mean(),
                    results["final_perf_val"].max())
    return run_info


def _analyse(rf: RunFolder, cfg: RunConfig, run_info: RunRecord) -> None:
    if cfg.analysis.level == 0:
        return
    from .analysis import analyze_folder

    try:
        analyze_folder(rf, cfg.analysis, cores=cfg.cores)
    except Exception as exc:  # the results are safe: report, and let the caller have them
        logger.error("analysis %r failed (%s: %s); the trials and collated results are saved. Redo it "
                     "with: python -m ignite_seg.reanalyze %s --analysis %s", cfg.analysis.name,
                     type(exc).__name__, exc, rf.path, cfg.analysis.name)
        warnings.warn(f"analysis failed: {type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=4)
    rf.write_run(dataclasses.replace(run_info, state=state("complete")))


def _hyperparameters(
    rf: RunFolder, runner: TaskRunner, cfg: RunConfig, facts: Mapping[str, Any]
) -> FixedHyperparameters:
    """The recipe of the trials: the fixed one, the folder's tuned one, or a new tuning."""
    settings = cfg.hp_settings
    if isinstance(settings, FixedHyperparameters):  # a mismatch with the folder's was refused up front
        rf.write_final(settings)
        return settings
    existing = rf.read_final()
    if existing is not None:
        logger.info("reusing the folder's tuned hyperparameters %s", existing)
        return existing
    from .tuning.recipe import choose_recipe

    assert cfg.seed is not None  # settled
    return choose_recipe(runner, rf, settings, cfg.setup.specs, accuracy_style=cfg.setup.accuracy_style, facts=facts,
                         seed=cfg.seed, device=cfg.setup.device)


def _lost_outcome(lost: TaskLost[Any]) -> Any:
    from .engine.trainer import TrialOutcome

    outcome = TrialOutcome(TrialResult(trial_id=lost.task.trial_id, status="failed", seconds=float("nan"),
                                       started_at=float("nan"), pid=-1))
    outcome.end("failed", lost.message)
    return outcome

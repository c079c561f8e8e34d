"""What one :func:`ignite_seg.train` call will do, decided before anything is written.

:class:`~ignite_seg.run_config.RunConfig` carries the validated arguments (re-exported here);
:func:`check_continuation` reads (never
writes) the folder a continuation reuses and refuses a mismatch; :func:`run_record` builds
``run.json``; :func:`plan_trials` decides which trial ids this call runs.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import logging
import platform
import sys
import uuid
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from ._version import __version__
from .analysis.outcomes import Dead, dead_advice, ended_at_constant, loss_rise, val_peak
from .config.analysis import resolve_analysis
from .config.hyperparameters import FixedHyperparameters, HyperparameterSettings
from .config.specs import DESCRIBE_MAX, LoaderSpec
from .engine.checkpoints import CheckpointPlan, folder_visible, log_checkpoint_report
from .exceptions import ConfigError, FolderError, TuningError
from .run_config import (  # re-exported: where they were defined before run_config.py
    RunConfig,
    check_checkpoint_every,
    check_handlers,
    check_metrics,
    check_trial_processes,
)
from .run_result import TrainResult, TrialSummary, train_result  # re-exported: train()'s result
from .runtime.tasks import TaskRunner
from .storage.names import CHECKPOINT_NAME
from .storage.records import RUN_FORMAT, RUN_STATES, RunRecord, RunState, state
from .storage.result_keys import ResultKeys
from .storage.run_folder import RunFolder, check_replaceable, has_content

__all__ = [
    "RunConfig", "RunState", "RUN_STATES", "check_continuation", "failure_recorded", "settle", "run_record", "plan_trials", "TrainResult",
    "TrialSummary", "train_result", "check_metrics", "check_same_metrics", "check_handlers", "check_checkpoint_every",
    "check_trial_processes", "trial_function", "log_trial",
    "checkpoint_plan",
]

logger = logging.getLogger("ignite_seg")


def trial_function(processes: int) -> Callable[[Any], Any]:
    """What a worker runs for a trial: in its own process, or as a group of ``processes``."""
    if processes == 1:
        from .engine.trainer import run_trial

        return run_trial
    from .engine.distributed import run_trial_group

    return run_trial_group


def log_trial(outcome: Any) -> None:
    """Log in the caller (the workers' logs may go nowhere) where a finished trial ran, its processes
    and the device of each, and what its mid-trial checkpoints did."""
    result = outcome.result
    if result.devices:
        logger.info("trial %d ran on %d process(es): %s", result.trial_id, result.processes, ", ".join(result.devices))
    log_checkpoint_report(result.trial_id, result.checkpoints)
    tt = outcome.throughtime or {}
    rise = loss_rise(tt.get("losses_train", ()))
    if rise is not None:
        logger.warning("trial %d: its training loss ended above where it began (%.4g -> %.4g): the recipe did not "
                       "train it; check the learning rates (hparams/misc.json, the recipe check)", outcome.trial_id, *rise)
    dead = ended_at_constant(tt.get("epochs", ()), tt.get("losses_train", ()), result.constant_loss_train)
    if dead is not None:
        info = Dead(outcome.trial_id, float(result.constant_loss_train), *dead)
        logger.warning("trial %d: its training loss ended at %.4g, no better than the best constant output's %.4g (one "
                       "output for every item): it learned nothing from its inputs; %s", outcome.trial_id, info.last,
                       info.constant, dead_advice(info))
        return  # its validation perf moved only with the constant output: no word on overfitting
    peak = val_peak(tt.get("epochs", ()), tt.get("perfs_val", ()))
    if peak is not None:
        logger.warning("trial %d: its validation perf peaked at epoch %.0f (%.4g) and ended at %.4g (epoch %.0f): it "
                       "trained longer than this data supports (overfitting); fewer epochs would do better (a tuned "
                       "run: the length check, hparams/misc.json steps.length, did not see it on its held-out slices; "
                       "lower max_epochs or train_examples. Fixed hyperparameters: lower epochs)", outcome.trial_id,
                       peak[0], peak[1], peak[3], peak[2])


def checkpoint_plan(rf: RunFolder, runner: TaskRunner, cfg: RunConfig) -> CheckpointPlan | None:
    """The trials' mid-trial checkpoints, ``None`` when off (``checkpoint_every=0``).

    The default pool's workers share this machine's files. With the caller's ``executor``, one probe
    task asks a worker whether it sees the run folder; when it does not, a WARNING says that the
    trials run without checkpoints (each worker checks again and records why in ``result.json``).
    """
    if cfg.checkpoint_every == 0:
        return None
    plan = CheckpointPlan(cfg.checkpoint_every, str(rf.path), str(rf.read_run().run_id))
    if cfg.executor is not None:
        seen = next(iter(runner.map_unordered(folder_visible, [plan], key=lambda p: p.run_id)))
        if seen is False:
            logger.warning(
                "mid-trial resume is off for this executor: its workers do not see the run folder %s, so no "
                "trial writes checkpoint.pt and a killed run restarts its unfinished trials from epoch 0 "
                "(share the folder with the workers, or pass checkpoint_every=0 to silence this)", rf.path)
    return plan


def check_continuation(cfg: RunConfig) -> RunRecord | None:
    """The folder's ``run.json`` when ``cfg`` continues it, ``None`` for a fresh run.

    Reads only: every mismatch is refused here, before the call writes anything.
    """
    rf = RunFolder(cfg.folder)
    if not cfg.is_continuation:
        check_replaceable(rf.path)  # only an ignite_seg run is ever moved to the history
        return None
    if not has_content(rf.path):
        if cfg.trials == 0 and not cfg.trials_strict:
            raise ConfigError(
                f"trials=0 with is_continuation=True finishes a run, but {str(rf.path)!r} holds none. "
                "Pass trials >= 1 to start one."
            )
        logger.info("is_continuation=True but %s is empty: starting a new run", rf.path)
        return None
    if not rf.is_run():
        raise FolderError(
            f"is_continuation=True but {str(rf.path)!r} is not an ignite_seg run folder (no "
            "run.json). Use another folder, or an empty one."
        )
    previous = rf.read_run()
    if previous.accuracy_style != cfg.setup.accuracy_style:
        raise ConfigError(
            f"is_continuation=True: the folder's run used accuracy_style="
            f"{previous.accuracy_style!r}, not {cfg.setup.accuracy_style!r}. Pass the same value, or "
            "start a new run with is_continuation=False."
        )
    for name, spec in cfg.setup.specs.items():
        _check_same_loader(name, spec, previous.loaders.get(name, {}))
    _check_same_recipe(rf, cfg.hp_settings)
    return previous


def _check_same_loader(name: str, spec: LoaderSpec, old: Mapping[str, Any]) -> None:
    if "fingerprint" in old:  # folders of ignite_seg <= 0.1 recorded the describe() only
        same = old["fingerprint"] == spec.fingerprint()
    else:  # written as target(*args, **kwargs) then
        legacy = f"{spec.describe().split('(', 1)[0]}(*{spec.args!r}, **{dict(spec.kwargs)!r})"
        same = old.get("describe") in (spec.describe(), legacy)
    if not same:
        raise ConfigError(
            f"is_continuation=True: {name}_loader is {spec.describe(200)} but the folder's run used "
            f"{old.get('describe')} (another recipe or other data). Continue with the same loaders, "
            "or start a new run with is_continuation=False."
        )


def _check_same_recipe(rf: RunFolder, settings: HyperparameterSettings | FixedHyperparameters) -> None:
    if not (isinstance(settings, FixedHyperparameters) and rf.trial_ids()):
        return
    existing = rf.read_final()
    if existing is not None and existing != settings:
        raise ConfigError(
            f"is_continuation=True with hyperparameters={settings!r}, but the folder's trials used "
            f"{existing!r}; trials of one run share one recipe. Start a new run instead."
        )


def settle(cfg: RunConfig, previous: RunRecord | None) -> RunConfig:
    """``cfg`` with the values a continuation keeps from the folder (seed, data collected)."""
    if previous is None:
        seed = cfg.seed if cfg.seed is not None else int(np.random.SeedSequence().generate_state(1)[0])
        return dataclasses.replace(cfg, seed=seed)
    if previous.seed is None:
        raise FolderError("is_continuation=True, but the folder's run.json records no seed; start a new run "
                          "with is_continuation=False.")
    seed = int(previous.seed)
    if cfg.seed is not None and cfg.seed != seed:
        logger.warning("is_continuation=True: keeping the folder's seed %d (seed=%d ignored)", seed, cfg.seed)
    return dataclasses.replace(
        cfg,
        seed=seed,
        collect=resolve_analysis(previous.allow_later_analysis_up_to),
        setup=dataclasses.replace(cfg.setup, snapshots_per_epoch=previous.snapshots_per_epoch or cfg.setup.snapshots_per_epoch),
    )


def _versions() -> dict[str, str]:
    import ignite
    import torch

    return {
        "ignite_seg": __version__, "torch": torch.__version__, "pytorch-ignite": ignite.__version__,
        "numpy": np.__version__, "python": platform.python_version(),
    }


def run_record(cfg: RunConfig, previous: RunRecord | None, val_names: Sequence[str] = ("val",),
               n_train: int | None = None) -> RunRecord:
    """``run.json`` of this call, in state ``running`` (a continuation keeps the folder's plan).

    ``val_names`` are the recipe's validation sets (the probe's), recorded with the custom metrics'
    names and directions for the collation and the analysis (:class:`~ignite_seg.storage.result_keys.ResultKeys`);
    ``n_train`` the training set's size (the LR figure's steps).
    """
    prev = previous or RunRecord(loaders={})
    planned = () if prev.state == "complete" else prev.planned_trials  # a finished run's next call plans anew
    requested = prev.requested_trials
    if not planned and (cfg.trials or requested is None):
        # what a recovery (trials=0) of this call, killed before its plan, adds
        requested = {"trials": cfg.trials, "trials_strict": cfg.trials_strict}
    keys = ResultKeys.from_record({"val_names": val_names, "metric_names": list(cfg.setup.metrics),
                                   "metric_modes": dict(cfg.metric_modes)})
    kind = "fixed" if isinstance(cfg.hp_settings, FixedHyperparameters) else "tuned"
    return dataclasses.replace(
        prev, format=RUN_FORMAT, versions=_versions(),
        created=prev.created or _dt.datetime.now().isoformat(timespec="seconds"),
        run_id=prev.run_id or uuid.uuid4().hex,  # tells a worker that the folder it sees is this run's
        loaders={k: s.to_json() for k, s in cfg.setup.specs.items()}, accuracy_style=cfg.setup.accuracy_style,
        hyperparameters={"kind": kind, **cfg.hp_settings.to_dict()}, analysis=cfg.analysis.name,
        allow_later_analysis_up_to=cfg.collect.name, seed=cfg.seed, device=cfg.setup.device,
        snapshots_per_epoch=cfg.setup.snapshots_per_epoch, checkpoint_every=cfg.checkpoint_every,
        trial_processes=cfg.setup.processes, argv=tuple(sys.argv), val_names=keys.val_names,
        metric_names=keys.metric_names, metric_modes=dict(keys.metric_modes), best_metric=cfg.setup.best_metric,
        best_mode=cfg.setup.best_mode, best_over=_best_over(cfg), val_only_metrics=tuple(cfg.setup.val_only_metrics),
        handlers=tuple(spec.describe(DESCRIBE_MAX) for spec in cfg.setup.handlers),
        requested_trials=requested, state=state("running"), n_train=n_train if n_train is not None else prev.n_train,
        planned_trials=planned, error=None,  # a failure of an earlier call is not this call's
    )


def _best_over(cfg: RunConfig) -> str | tuple[str, ...]:
    return cfg.best_over if isinstance(cfg.best_over, str) else tuple(cfg.best_over)


@contextlib.contextmanager
def failure_recorded(rf: RunFolder, run_info: RunRecord, stage: str) -> Iterator[None]:
    """A :class:`TuningError` in ``stage`` recorded in ``run.json`` (state ``failed``, the error) before it
    reaches the caller: the folder says what failed, and ``reanalyze`` what to change, not "unfinished"."""
    try:
        yield
    except TuningError as exc:
        error = {"stage": stage, "type": type(exc).__name__, "message": str(exc)}
        rf.write_run(dataclasses.replace(run_info, state=state("failed"), error=error))
        raise


def plan_trials(rf: RunFolder, cfg: RunConfig, previous: RunRecord | None, capacity: int) -> list[int]:
    """The trial ids of this call, the finished ones included (they are skipped, not rerun).

    An interrupted run (state not ``complete``) finishes its recorded plan and adds nothing; a
    finished run gets ``trials`` more (rounded up to ``capacity`` unless ``trials_strict``).
    Trials whose ``result.json`` is garbage are set aside and planned again (same seeds).
    """
    redo = rf.set_aside_corrupt_results()
    if redo:
        logger.warning("trial(s) %s had an unreadable result.json (kept as result.json.corrupt): rerunning them", redo)
    unfinished = {t for t in rf.trial_ids() if rf.read_result(t) is None}
    interrupted = previous is not None and previous.state != "complete"
    if interrupted and previous and previous.planned_trials:
        plan = [int(t) for t in previous.planned_trials]
        logger.info("resuming an interrupted run: %d of %d planned trials left",
                    sum(t in unfinished or not rf.trial(t).is_dir() for t in plan), len(plan))
    else:
        trials, strict = cfg.trials, cfg.trials_strict
        if interrupted and previous and trials == 0:  # killed before its plan: the request it recorded
            asked = previous.requested_trials or {}
            trials, strict = int(asked.get("trials", 0)), bool(asked.get("trials_strict", True))
        n = trials if strict or trials == 0 else -(-trials // capacity) * capacity
        if n != trials:
            logger.info("trials=%d rounded up to %d, a multiple of the %d trials that run at once (trials_strict=False "
                        "fills idle workers; trials_strict=True runs exactly %d)", trials, n, capacity, trials)
        start = max(rf.trial_ids(), default=-1) + 1
        plan = list(range(start, start + n))
    resumable = sorted(t for t in unfinished if (rf.trial(t) / CHECKPOINT_NAME).is_file())
    if resumable:
        logger.info("trial(s) %s have a mid-trial checkpoint: each resumes from it if it is its own", resumable)
    return sorted(set(plan) | unfinished)


def check_same_metrics(cfg: RunConfig, previous: RunRecord | None) -> None:
    if previous is None:
        return
    old = list(previous.metric_names)
    if old != list(cfg.setup.metrics):
        raise ConfigError(
            f"is_continuation=True: metrics={sorted(cfg.setup.metrics)} but the folder's trials recorded {old}; "
            "trials of one run are collated together. Pass the same metrics, or start a new run."
        )
    old_best = (previous.best_metric, previous.best_mode, previous.best_over)  # older: primary
    over = _best_over(cfg)
    if old_best != (cfg.setup.best_metric, cfg.setup.best_mode, over):
        raise ConfigError(
            f"is_continuation=True: best_metric={cfg.setup.best_metric!r}, best_mode={cfg.setup.best_mode!r}, "
            f"best_over={_shown(over)!r} but the folder's trials kept the best by {old_best[0]!r}, {old_best[1]!r} over "
            f"{_shown(old_best[2])!r}; pass the same, or start a new run."
        )


def _shown(over: str | tuple[str, ...]) -> str | list[str]:
    return over if isinstance(over, str) else list(over)

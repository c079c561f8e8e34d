"""The validated call: :func:`validate` checks every argument of :func:`ignite_seg.train` in place
and returns a :class:`RunConfig`.

One keyword-only entry point, one check per argument, each error naming the argument, the value
and the fix; nothing is written and no worker is started. :func:`ignite_seg.train`,
:func:`ignite_seg.tune` and :func:`ignite_seg.sweep` (each point) call it with the arguments they
were given. Anchors: ignite's ``Checkpoint.__init__`` and Optuna's ``Study.optimize``, wide
keyword-only entry points validated in place.
"""
from __future__ import annotations

import os
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from .config.analysis import AnalysisSettings, resolve_analysis
from .config.checks import (
    check_best,
    check_best_over,
    check_bool,
    check_choice,
    check_device,
    check_int,
    check_trials,
    check_val_only_metrics,
)
from .config.hyperparameters import FixedHyperparameters, HyperparameterSettings
from .config.presets import resolve_hyperparameters
from .config.specs import LoaderSpec, normalize_spec
from .engine.scoring import ACCURACY_STYLES
from .engine.trial_records import TrialSetup
from .exceptions import ConfigError, ConfigTypeError
from .runtime.checks import check_cores, check_executor, check_reproducible_executor, check_timeout
from .storage.result_keys import ResultKeys
from .storage.run_folder import check_history_folder, resolve_folder_arg

__all__ = [
    "LoaderLike", "RunConfig", "validate", "check_metrics", "check_handlers", "check_checkpoint_every",
    "check_trial_processes",
]

LoaderLike = tuple[str, str, tuple[Any, ...], Mapping[str, Any]] | Callable[..., Any]


@dataclass(frozen=True)
class RunConfig:
    """The validated arguments of one :func:`ignite_seg.train` call.

    ``setup`` is what every trial shares (loaders, accuracy style, device, snapshots, custom metrics,
    best checkpoint, user handlers, processes per trial): each trial's task carries it unchanged.
    """

    folder: Path
    history: Path
    setup: TrialSetup
    hp_settings: HyperparameterSettings | FixedHyperparameters
    analysis: AnalysisSettings
    collect: AnalysisSettings
    trials: int
    trials_strict: bool
    is_continuation: bool
    cores: int
    executor: Executor | None
    seed: int | None
    trial_timeout: float | None = None
    metric_modes: Mapping[str, str] = field(default_factory=dict)
    #: ``best_over`` as given ("primary", "mean" or set names); ``setup.best_parts`` is what it means (after the probe)
    best_over: str | tuple[str, ...] = "primary"
    #: epochs between mid-trial checkpoints; ``None`` automatic, ``0`` off
    checkpoint_every: int | None = None

    @property
    def trials_at_once(self) -> int:
        """Trials the default pool runs at once: ``cores`` counts processes, ``setup.processes`` per trial."""
        return max(1, self.cores // self.setup.processes) if self.executor is None else self.cores


def validate(
    *,
    model_loader: LoaderLike | LoaderSpec,
    dataset_loader: LoaderLike | LoaderSpec,
    loss_loader: LoaderLike | LoaderSpec,
    folder: str | os.PathLike[str],
    history_folder: str | os.PathLike[str] | None = None,
    hyperparameters: str | HyperparameterSettings | FixedHyperparameters = "fast",
    analysis: str | AnalysisSettings = "images",
    allow_later_analysis_up_to: str | AnalysisSettings = "video",
    accuracy_style: Literal["classification", "multiclass", "inv-loss"] = "classification",
    trials: int = 1,
    trials_strict: bool = False,
    is_continuation: bool = False,
    seed: int | None = None,
    snapshots_per_epoch: int = 10,
    cores: int | Literal["all"] = "all",
    executor: Executor | None = None,
    device: str = "auto",
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
) -> RunConfig:
    """Check every argument of :func:`ignite_seg.train` (in this process, writing nothing) into a :class:`RunConfig`.

    The arguments mean what they mean for :func:`ignite_seg.train`; all are keyword-only.

    Raises:
        ConfigTypeError: an argument of the wrong type (the message names it, shows it, says the fix).
        ConfigError: an argument out of range, or arguments that contradict each other.

    Example:
        >>> cfg = validate(model_loader=("torch.nn", "Linear", (4, 2), {}),  # doctest: +SKIP
        ...                dataset_loader=("mytask", "dataset", (), {}), loss_loader=("torch.nn", "CrossEntropyLoss", (), {}),
        ...                folder="out/current", trials=2, cores=2, seed=0)
        >>> cfg.trials, cfg.setup.accuracy_style  # doctest: +SKIP
        (2, 'classification')
    """
    specs = {name: normalize_spec(value, f"{name}_loader")
             for name, value in (("model", model_loader), ("dataset", dataset_loader), ("loss", loss_loader))}
    metric_specs, modes = check_metrics(metrics, metric_modes)
    best_name, best_direction = check_best(best_metric, best_mode, tuple(metric_specs))
    handler_specs = check_handlers(handlers)
    analysis_settings = resolve_analysis(analysis)
    collect = resolve_analysis(allow_later_analysis_up_to, "allow_later_analysis_up_to")
    check_choice("accuracy_style", accuracy_style, ACCURACY_STYLES)
    check_bool("is_continuation", is_continuation)
    check_bool("trials_strict", trials_strict)
    n_trials = check_trials(trials, is_continuation, trials_strict)
    hp_settings = resolve_hyperparameters(hyperparameters)
    if n_trials == 0 and not is_continuation and isinstance(hp_settings, FixedHyperparameters):
        raise ConfigError("trials must be >= 1, got 0: trials=0 with trials_strict=True tunes only, and "
                          "fixed hyperparameters leave nothing to tune. Pass a tuner preset, or trials >= 1.")
    executor = check_executor(executor)
    check_reproducible_executor(executor)
    run_folder = resolve_folder_arg(folder, "folder")
    history = (run_folder.parent / "history" if history_folder is None
               else resolve_folder_arg(history_folder, "history_folder"))
    check_history_folder(run_folder, history)
    n_cores = check_cores(cores, executor)
    device = check_device(device)
    seed = check_int("seed", seed, 0, optional=True)
    snapshots = check_int("snapshots_per_epoch", snapshots_per_epoch, 1)
    timeout = check_timeout("trial_timeout", trial_timeout)
    every = check_checkpoint_every(checkpoint_every)
    over = check_best_over(best_over, best_name)
    val_only = check_val_only_metrics(val_only_metrics, tuple(metric_specs))
    processes = check_trial_processes(trial_processes, n_cores, executor)
    setup = TrialSetup(
        model=specs["model"], dataset=specs["dataset"], loss=specs["loss"], accuracy_style=accuracy_style,
        device=device, snapshots_per_epoch=snapshots, metrics=metric_specs,  # type: ignore[arg-type]
        best_metric=best_name, best_mode=best_direction, val_only_metrics=val_only,  # type: ignore[arg-type]
        handlers=handler_specs, processes=processes,
    )
    return RunConfig(
        folder=run_folder, history=history, setup=setup, hp_settings=hp_settings, analysis=analysis_settings,
        collect=max(collect, analysis_settings, key=lambda a: a.level), trials=n_trials, trials_strict=trials_strict,
        is_continuation=is_continuation, cores=n_cores, executor=executor, seed=seed, trial_timeout=timeout,
        metric_modes=modes, best_over=over, checkpoint_every=every,
    )


def check_metrics(metrics: Any, modes: Any) -> tuple[dict[str, LoaderSpec], dict[str, str]]:
    """The custom metrics' specs and directions, every name valid and every direction given."""
    if metrics is None:
        metrics = {}
    if not isinstance(metrics, Mapping):
        raise ConfigTypeError(f"metrics must be a dict of name -> metric loader spec, got {metrics!r}.")
    modes = dict(modes or {})
    specs = {name: normalize_spec(spec, f"metrics[{name!r}]") for name, spec in metrics.items()}
    for name in specs:
        if modes.get(name) not in ("min", "max"):
            raise ConfigError(
                f"metric_modes[{name!r}]={modes.get(name)!r}: say whether a higher or lower {name} is better "
                f"with metric_modes={{{name!r}: 'max'}} or 'min' (the direction is never guessed)."
            )
    extra = sorted(set(modes) - set(specs))
    if extra:
        raise ConfigError(f"metric_modes names {extra}, which are not in metrics={sorted(specs)}.")
    if set(specs) & {"loss", "perf"}:
        raise ConfigError(f"metrics: the names 'loss' and 'perf' are ignite_seg's own; rename {sorted(set(specs) & {'loss', 'perf'})}.")
    try:
        ResultKeys(("val",), tuple(specs))
    except ValueError as exc:
        raise ConfigError(f"metrics: {exc}") from None
    return specs, {name: modes[name] for name in specs}


def check_handlers(handlers: Any) -> tuple[LoaderSpec, ...]:
    """The user handlers' specs: a list of loader specs, each importable here and building a callable."""
    if handlers is None:
        return ()
    if not isinstance(handlers, (list, tuple)) or _is_one_spec(handlers):
        raise ConfigTypeError(f"handlers must be a list of loader specs, got {handlers!r}; wrap one spec in a "
                              "list: handlers=[('mymodule', 'my_handler', (), {})].")
    specs = tuple(normalize_spec(h, f"handlers[{k}]") for k, h in enumerate(handlers))
    for k, spec in enumerate(specs):
        try:
            spec.resolve()
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"handlers[{k}]={spec.describe(120)} cannot be imported here ({exc}); a handler "
                              "spec names a function that returns attach(trainer, context).") from None
    return specs


def _is_one_spec(value: Any) -> bool:
    """A single ``(module, attr, args, kwargs)`` tuple passed where a list of them is expected."""
    return len(value) == 4 and isinstance(value[0], str) and isinstance(value[1], str)


def check_checkpoint_every(value: Any) -> int | None:
    """``checkpoint_every``: ``None`` (automatic), ``0`` (off) or a number of epochs >= 1."""
    fix = ("Pass a number of epochs >= 1, 0 to turn mid-trial checkpoints off, or None to checkpoint "
           "trials expected to run longer than about a minute.")
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigTypeError(f"checkpoint_every={value!r} is not a number of epochs. {fix}")
    if not isinstance(value, (int, np.integer)):
        raise ConfigTypeError(f"checkpoint_every={value!r} ({type(value).__name__}) is not an int. {fix}")
    if value < 0:
        raise ConfigError(f"checkpoint_every={value!r} is negative. {fix}")
    return int(value)


def check_trial_processes(value: Any, cores: int, executor: Any) -> int:
    """``trial_processes``: an int >= 1, at most ``cores`` with the default pool (which counts processes)."""
    fix = "Pass an int >= 1 (1, the default: each trial in one process)."
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigTypeError(f"trial_processes={value!r} ({type(value).__name__}) is not an int. {fix}")
    if value < 1:
        raise ConfigError(f"trial_processes={value!r} is less than 1. {fix}")
    if executor is None and value > cores:
        raise ConfigError(
            f"trial_processes={value!r} is more than cores={cores}: with the default pool, cores counts the "
            f"processes of all trials running at once. Pass trial_processes <= {cores}, or raise cores."
        )
    return int(value)

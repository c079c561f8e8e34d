"""Argument checks shared by the settings records and the entry points: each names the argument,
shows the value and says the fix. Importing this module imports no torch."""
from __future__ import annotations

from typing import Any

from ..exceptions import ConfigError, ConfigTypeError

__all__ = ["check_int", "check_choice", "check_bool", "check_trials", "check_device", "check_best",
           "check_best_over", "check_val_only_metrics"]


def check_int(name: str, value: Any, minimum: int, optional: bool = False) -> int | None:
    """``value`` when it is an int (not a bool) of at least ``minimum``; ``None`` passes when ``optional``.

    Raises:
        ConfigTypeError: ``value`` is not an int; the message names ``name`` and shows the value.
        ConfigError: ``value`` is below ``minimum``.

    Example:
        >>> check_int("trials", 3, 1)
        3
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigTypeError(f"{name} must be an int, got {value!r} ({type(value).__name__}).")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value!r}.")
    return value


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise ConfigTypeError(f"{name} must be one of {list(choices)}, got {value!r} ({type(value).__name__}).")
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not valid; use one of {list(choices)}.")
    return value


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigTypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__}).")
    return value


def check_trials(value: Any, is_continuation: bool, strict: bool = False) -> int:
    """``trials`` >= 1; 0 with ``is_continuation=True`` (finish an interrupted run, add nothing) or
    with ``trials_strict=True`` (tune only: no trials)."""
    if value == 0 and (is_continuation or strict) and not isinstance(value, bool):
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value == 0:
        raise ConfigError(
            "trials must be >= 1, got 0 (trials=0 needs trials_strict=True, to tune only, or "
            "is_continuation=True, to finish an interrupted run and add nothing)."
        )
    return check_int("trials", value, 1)  # type: ignore[return-value]


def check_device(value: Any) -> str:
    import torch  # here, not at the top: ``import ignite_seg`` stays free of torch
    if not isinstance(value, str):
        raise ConfigTypeError(f'device must be "auto", "cpu", "cuda" or "cuda:N", got {value!r}.')
    if value == "auto":
        return value
    try:
        dev = torch.device(value)
    except RuntimeError:
        raise ConfigError(f'device={value!r} is not a device; use "auto", "cpu", "cuda" or "cuda:N".') from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f'device={value!r} but CUDA is not available here; use device="cpu" or "auto".')
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError(f'device={value!r}: only "cpu" and "cuda" devices are supported.')
    return value


def check_best(metric: Any, mode: Any, metric_names: tuple[str, ...]) -> tuple[str | None, str | None]:
    """``(best_metric, best_mode)``: both ``None``, or a known metric with ``"min"`` or ``"max"``.

    Raises:
        ConfigTypeError: ``best_metric`` is not a string.
        ConfigError: only one of the two is given, the metric is unknown, or the mode is not min/max.
    """
    if metric is None and mode is None:
        return None, None
    known = ["loss", "perf", *metric_names]
    if metric is None:
        raise ConfigError(f"best_mode={mode!r} without best_metric: pass best_metric= one of {known} too, "
                          "or neither (no best checkpoint).")
    if not isinstance(metric, str):
        raise ConfigTypeError(f"best_metric must be a metric name (str), one of {known}; got {metric!r}.")
    if metric not in known:
        raise ConfigError(f"best_metric={metric!r} is not a metric of this run; use one of {known} "
                          "(custom metrics are those in metrics=).")
    if mode not in ("min", "max"):
        raise ConfigError(f"best_mode={mode!r} with best_metric={metric!r}: pass best_mode='min' (lower is better) "
                          "or 'max' (higher is better); the direction is never guessed, not even for 'loss'.")
    return metric, mode


def check_best_over(value: Any, metric: str | None) -> str | tuple[str, ...]:
    """``best_over``: ``"primary"`` (the primary validation set), ``"mean"`` (the mean over every
    validation set) or a sequence of validation set names (the mean over those), checked against the
    datasets' names later (:func:`ignite_seg.run_plan.best_parts`).

    Raises:
        ConfigTypeError: not one of the two strings nor a sequence of strings.
        ConfigError: an empty or repeating sequence, or anything but ``"primary"`` without ``best_metric``.
    """
    fix = ('Pass "primary" (the primary validation set, the default), "mean" (the mean over all validation '
           'sets) or a list of validation set names (the mean over those).')
    if isinstance(value, str):
        if value not in ("primary", "mean"):
            raise ConfigError(f"best_over={value!r} is not a choice. {fix}")
        names: str | tuple[str, ...] = value
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        if not value or len(set(value)) != len(value):
            raise ConfigError(f"best_over={value!r} is empty or names a set twice. {fix}")
        names = tuple(value)
    else:
        raise ConfigTypeError(f"best_over={value!r} ({type(value).__name__}) is neither a string nor a list of "
                              f"set names. {fix}")
    if metric is None and names != "primary":
        raise ConfigError(f"best_over={value!r} without best_metric: pass best_metric= and best_mode= too, "
                          "or leave best_over out (no best checkpoint).")
    return names


def check_val_only_metrics(value: Any, metric_names: tuple[str, ...]) -> tuple[str, ...]:
    """``val_only_metrics``: names of custom metrics (``metrics=``) measured on the validation sets only.

    Raises:
        ConfigTypeError: not a list of strings.
        ConfigError: a name that is not a custom metric of this run.
    """
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)) or \
            not all(isinstance(v, str) for v in value):
        raise ConfigTypeError(f"val_only_metrics={value!r} is not a list of metric names; pass e.g. "
                              f"val_only_metrics=['iou'] (names in metrics=, which are {list(metric_names)}).")
    unknown = sorted(set(value) - set(metric_names))
    if unknown:
        raise ConfigError(f"val_only_metrics={sorted(value)!r} names {unknown}, not custom metrics of this run; "
                          f"use names from metrics= ({list(metric_names)}; loss and perf are always measured).")
    return tuple(name for name in metric_names if name in value)

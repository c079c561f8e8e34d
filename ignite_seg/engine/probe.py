"""Checks run in the calling process before any worker starts.

:func:`probe_recipe` calls each loader once, puts one batch through model and loss, and checks
the output against ``accuracy_style``, so a mistake surfaces as an :class:`ConfigError` naming
the argument, the value and the fix, not as a traceback from a worker minutes later.
"""
from __future__ import annotations

import traceback
from typing import Any

import torch
from torch.utils.data import TensorDataset

from ..config.checks import check_choice
from ..config.specs import LoaderSpec
from ..exceptions import ConfigError
from .data import as_tensor_data, gather
from .metrics import ACCURACY_STYLES

__all__ = ["probe_recipe"]


def _call(spec: LoaderSpec, argname: str) -> Any:
    try:
        return spec.build()
    except (ImportError, AttributeError) as exc:
        if spec.fn is None:
            raise ConfigError(
                f"{argname}: cannot find {spec.module}.{spec.attr} ({type(exc).__name__}: {exc}). "
                "Check the module and attribute names, and that the module is importable."
            ) from None
        raise _raised(spec, argname, exc) from None
    except Exception as exc:
        raise _raised(spec, argname, exc) from None


def _raised(spec: LoaderSpec, argname: str, exc: BaseException) -> ConfigError:
    where = traceback.format_exception(exc)[-2].strip() if len(traceback.format_exception(exc)) > 1 else ""
    return ConfigError(
        f"{argname}={spec.describe()} raised {type(exc).__name__}: {exc}\n  {where}\n"
        "Fix the loader so that it runs without error in this process."
    )


def _check_dataset(name: str, ds: Any, argname: str) -> int:
    if not (hasattr(ds, "__len__") and hasattr(ds, "__getitem__")):
        raise ConfigError(
            f"{argname}: the {name} set is {type(ds).__name__}, not a map-style "
            "torch.utils.data.Dataset (needs __len__ and __getitem__)."
        )
    n = len(ds)
    if n < 2:
        raise ConfigError(
            f"{argname}: the {name} set has {n} item(s); ignite_seg needs at least 2 in each set "
            "(one batch to train on and a held-out point to measure)."
        )
    item = ds[0]
    if not (isinstance(item, (tuple, list)) and len(item) == 2):
        raise ConfigError(
            f"{argname}: items of the {name} set must be (input, target) pairs, got "
            f"{type(item).__name__}{'' if not isinstance(item, (tuple, list)) else f' of {len(item)}'}."
        )
    return n


def _check_finite(name: str, ds: Any, argname: str) -> None:
    data = as_tensor_data(ds)
    if data is None:
        return
    for what, t in (("inputs", data.x), ("targets", data.y)):
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).reshape(t.shape[0], -1).any(dim=1).sum())
            raise ConfigError(
                f"{argname}: {bad} item(s) of the {name} set have non-finite {what} (NaN or inf). "
                "Clean or impute the data before training."
            )


def probe_recipe(
    model_spec: LoaderSpec, dataset_spec: LoaderSpec, loss_spec: LoaderSpec, accuracy_style: str
) -> dict[str, Any]:
    """Build each loader once and push one batch through model and loss; raise on any mismatch.

    Returns facts the tuner uses (set sizes, output shape). The caller's torch RNG is left as it was.
    """
    check_choice("accuracy_style", accuracy_style, ACCURACY_STYLES)
    with torch.random.fork_rng(devices=[]):
        model = _call(model_spec, "model_loader")
        if not isinstance(model, torch.nn.Module):
            raise ConfigError(
                f"model_loader={model_spec.describe()} returned {type(model).__name__}, not a "
                "torch.nn.Module."
            )
        pair = _call(dataset_spec, "dataset_loader")
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ConfigError(
                f"dataset_loader={dataset_spec.describe()} must return a pair (train_set, val_set), "
                f"got {type(pair).__name__}"
                f"{f' of {len(pair)} items' if isinstance(pair, (tuple, list)) else ''}."
            )
        n_train = _check_dataset("training", pair[0], "dataset_loader")
        n_val = _check_dataset("validation", pair[1], "dataset_loader")
        _check_finite("training", pair[0], "dataset_loader")
        _check_finite("validation", pair[1], "dataset_loader")
        loss_fn = _call(loss_spec, "loss_loader")
        if not callable(loss_fn):
            raise ConfigError(f"loss_loader={loss_spec.describe()} returned {loss_fn!r}, which is not callable.")
        try:
            x, y = gather(pair[0], [0, 1])
        except Exception as exc:
            raise ConfigError(
                f"dataset_loader: two training items cannot be batched together ({exc}); items "
                "must be tensors (or numbers/arrays) of equal shape."
            ) from None
        model.eval()
        with torch.no_grad():
            try:
                out = model(x)
            except Exception as exc:
                raise ConfigError(
                    f"model_loader: the model fails on a batch of inputs of shape {tuple(x.shape)} "
                    f"and dtype {x.dtype} from the training set ({type(exc).__name__}: {exc})."
                ) from None
            if not isinstance(out, torch.Tensor):
                raise ConfigError(f"model_loader: the model must return a tensor, got {type(out).__name__}.")
            _check_style(accuracy_style, out, y)
            _check_all_targets(accuracy_style, pair, out.shape[-1])
            try:
                loss = loss_fn(out, y)
            except Exception as exc:
                raise ConfigError(
                    f"loss_loader={loss_spec.describe()} fails on model output of shape "
                    f"{tuple(out.shape)} and targets of shape {tuple(y.shape)}, dtype {y.dtype} "
                    f"({type(exc).__name__}: {exc})."
                ) from None
        if not (isinstance(loss, torch.Tensor) and loss.numel() == 1):
            raise ConfigError(
                f"loss_loader={loss_spec.describe()} must return a scalar tensor, got "
                f"{type(loss).__name__}{f' of shape {tuple(loss.shape)}' if isinstance(loss, torch.Tensor) else ''}; "
                "use reduction='mean'."
            )
    return {"n_train": n_train, "n_val": n_val, "output_shape": tuple(out.shape[1:])}


def _check_style(style: str, out: torch.Tensor, y: torch.Tensor) -> None:
    shapes = f"model output shape {tuple(out.shape)}, target shape {tuple(y.shape)} ({y.dtype})"
    if style == "classification":
        if out.ndim != 2 or out.shape[1] < 2:
            raise ConfigError(
                f"accuracy_style='classification' needs a model output of shape (batch, n_classes) "
                f"with n_classes >= 2; got {shapes}. For regression use accuracy_style='inv-loss'."
            )
        if y.ndim == 1:
            if y.is_floating_point() or y.dtype == torch.bool:
                raise ConfigError(
                    f"accuracy_style='classification' needs integer class-index targets (int64) or "
                    f"one-hot targets of the output's shape; got {shapes}. Convert the targets with "
                    "torch.as_tensor(y, dtype=torch.long)."
                )
            if int(y.min()) < 0 or int(y.max()) >= out.shape[1]:
                raise ConfigError(
                    f"accuracy_style='classification': target class {int(y.max())} is outside the "
                    f"model's {out.shape[1]} outputs; got {shapes}."
                )
        elif tuple(y.shape) != tuple(out.shape):
            raise ConfigError(
                f"accuracy_style='classification' needs targets of shape (batch,) or one-hot "
                f"(batch, n_classes); got {shapes}."
            )
    elif style == "multiclass":
        if tuple(y.shape) != tuple(out.shape):
            raise ConfigError(
                f"accuracy_style='multiclass' needs multi-hot targets of the output's shape; got {shapes}."
            )


def _check_all_targets(style: str, pair: Any, n_out: int) -> None:
    """Class targets of every item in range, where that is one vectorised check (a TensorDataset).

    A lazy dataset is never iterated here: its first items are checked with the batch only.
    """
    if style != "classification":
        return
    for name, ds in zip(("training", "validation"), pair):
        if not (isinstance(ds, TensorDataset) and len(ds.tensors) == 2):
            continue
        y = ds.tensors[1]
        if y.ndim != 1 or y.is_floating_point() or y.dtype == torch.bool or y.numel() == 0:
            continue
        bad = (y < 0) | (y >= n_out)
        if bool(bad.any()):
            first = int(bad.nonzero()[0, 0])
            raise ConfigError(
                f"dataset_loader: {int(bad.sum())} item(s) of the {name} set have a target class outside the "
                f"model's {n_out} outputs (first: item {first}, class {int(y[first])}). Targets must be in "
                f"0..{n_out - 1}."
            )

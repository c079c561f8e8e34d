"""Checks run in the calling process before any worker starts.

:func:`probe_recipe` calls each loader once, puts one batch through model and loss, and checks
the output against ``accuracy_style``, so a mistake surfaces as an :class:`ConfigError` naming
the argument, the value and the fix, not as a traceback from a worker minutes later.
"""
from __future__ import annotations

import dataclasses
import logging
import traceback
import warnings
from typing import Any

import torch

from ..config.checks import check_choice
from ..config.specs import LoaderSpec
from ..exceptions import ConfigError
from .batching import BatchSource, Data, as_data, default_prepare_batch, tensor_pair
from .models import as_model
from .scoring import ACCURACY_STYLES

__all__ = ["probe_recipe", "INV_LOSS_LOUD"]

logger = logging.getLogger(__name__)

#: An ``inv-loss`` perf, ``1 / (1 + loss)``, reads below 0.01 while the loss is above this.
INV_LOSS_LOUD = 99.0


def _call(spec: LoaderSpec, argname: str) -> Any:
    try:
        fn = spec.resolve()
    except (ImportError, AttributeError) as exc:  # finding the loader, not running it
        raise ConfigError(
            f"{argname}: cannot find {spec.module}.{spec.attr} ({type(exc).__name__}: {exc}). "
            "Check the module and attribute names, and that the module is importable."
        ) from exc
    try:
        return fn(*spec.args, **dict(spec.kwargs))
    except Exception as exc:  # raised inside the loader: its traceback is kept (chained, and in the message)
        raise _raised(spec, argname, exc) from exc


#: The hint for a dataset cached with ``torch.save`` that ``torch.load`` refuses (torch >= 2.6).
_WEIGHTS_ONLY_HINT = (
    "The loader's torch.load refused a pickled object (torch >= 2.6 loads with weights_only=True). For a "
    "(Subset, Subset) of a TensorDataset, `import ignite_seg.utils` in the loader's module (it allows those "
    "classes); for other classes, pass weights_only=False to torch.load (only for a file you wrote yourself) "
    "or cache tensors instead (torch.save((x, y), path))."
)


def _raised(spec: LoaderSpec, argname: str, exc: BaseException) -> ConfigError:
    frames = traceback.format_exception(exc)[1:-1]  # the loader's frames, without the header and the last line
    where = "".join(frames[-6:]).rstrip()
    hint = _WEIGHTS_ONLY_HINT if "weights_only" in str(exc) or "Unsupported global" in str(exc) else (
        "Fix the loader so that it runs without error in this process.")
    return ConfigError(f"{argname}={spec.describe()} raised {type(exc).__name__}: {exc}\n{where}\n{hint}")


def _check_dataset(name: str, ds: Any, argname: str, pairs: bool = True) -> int:
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
    item = ds[0] if pairs else None  # with a collate_fn or prepare_batch, items may be anything
    if pairs and not (isinstance(item, (tuple, list)) and len(item) == 2):
        raise ConfigError(
            f"{argname}: items of the {name} set must be (input, target) pairs, got "
            f"{type(item).__name__}{'' if not isinstance(item, (tuple, list)) else f' of {len(item)}'}; "
            "for other items return ignite_seg.Data(train, val, collate_fn=..., prepare_batch=...)."
        )
    return n


def _check_finite(name: str, ds: Any, argname: str) -> None:
    """Non-finite values in a dataset held as tensors (no item of any other dataset is read)."""
    tensors = tensor_pair(ds)
    if tensors is None:
        return
    for what, t in zip(("inputs", "targets"), tensors):
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
        model = as_model(_call(model_spec, "model_loader"))
        if not isinstance(model, torch.nn.Module):
            raise ConfigError(
                f"model_loader={model_spec.describe()} returned {type(model).__name__}, not a "
                "torch.nn.Module."
            )
        data = as_data(_call(dataset_spec, "dataset_loader"), f"dataset_loader={dataset_spec.describe()}")
        pairs = data.collate_fn is None and data.prepare_batch is None
        n_train = _check_dataset("training", data.train, "dataset_loader", pairs)
        for name, ds in data.val_sets.items():
            _check_dataset("validation" if len(data.val_sets) == 1 else f"validation ({name!r})", ds,
                           "dataset_loader", pairs)
            _check_finite("validation", ds, "dataset_loader")
        n_val = len(data.primary)
        _check_finite("training", data.train, "dataset_loader")
        loss_fn = _call(loss_spec, "loss_loader")
        if not callable(loss_fn):
            raise ConfigError(f"loss_loader={loss_spec.describe()} returned {loss_fn!r}, which is not callable.")
        x, y = _one_batch(data)
        model.eval()
        with torch.no_grad():
            try:
                out = model(x)
            except Exception as exc:
                raise ConfigError(
                    f"model_loader: the model fails on a batch of inputs of shape {_shapes(x)} "
                    f"from the training set ({type(exc).__name__}: {exc})."
                ) from None
            if not isinstance(out, torch.Tensor):
                raise ConfigError(f"model_loader: the model must return a tensor, got {type(out).__name__}.")
            ignore_index = getattr(loss_fn, "ignore_index", None)
            scored = _classes_second(out, y, data.class_dim, accuracy_style)  # as perf reads it
            _check_style(accuracy_style, scored, y, ignore_index)
            _check_all_targets(accuracy_style, data, scored.shape[1] if scored.ndim > 1 else 0, ignore_index)
            try:
                loss = _loss_without_broadcast(loss_fn, out, y, loss_spec)
            except ConfigError:
                raise
            except Exception as exc:
                raise ConfigError(
                    f"loss_loader={loss_spec.describe()} fails on model output of shape "
                    f"{tuple(out.shape)} and targets of shape {_shapes(y)} "
                    f"({type(exc).__name__}: {exc})."
                ) from None
        if not (isinstance(loss, torch.Tensor) and loss.numel() == 1):
            raise ConfigError(
                f"loss_loader={loss_spec.describe()} must return a scalar tensor, got "
                f"{type(loss).__name__}{f' of shape {tuple(loss.shape)}' if isinstance(loss, torch.Tensor) else ''}; "
                "use reduction='mean'."
            )
        if accuracy_style == "inv-loss" and float(loss) > INV_LOSS_LOUD:
            _warn_loud_loss(float(loss), y)
    return {"n_train": n_train, "n_val": n_val, "output_shape": tuple(out.shape[1:]), "val_names": data.val_names}


def _warn_loud_loss(loss: float, y: Any) -> None:
    """Say that an ``inv-loss`` perf will read near 0 (the tuner decides on the loss, so its choices stand)."""
    scale = f" (targets up to {float(y.abs().max()):.3g} in size here)" if isinstance(y, torch.Tensor) and y.numel() else ""
    logger.warning(
        "the untrained model's loss on two training items is %.4g, so perf = 1 / (1 + loss) = %.2g: every perf this "
        "run reports will read near 0 until the loss falls below %g. Targets in their own units%s do that: "
        "standardise them (and un-standardise the model's predictions), or read the loss instead of the perf",
        loss, 1.0 / (1.0 + loss), INV_LOSS_LOUD, scale)


def _classes_second(out: torch.Tensor, y: Any, class_dim: int, style: str) -> torch.Tensor:
    """The output with its classes in dimension 1, as ``perf`` reads it (``Data(class_dim=...)``)."""
    if class_dim == 1 or style != "classification":
        return out
    if not -out.ndim <= class_dim < out.ndim or class_dim % out.ndim == 0:
        raise ConfigError(f"Data(class_dim={class_dim}) is not a dimension of the model's output of shape "
                          f"{tuple(out.shape)} besides the batch; pass 1 for (N, C, *) or -1 for (N, T, C).")
    return out.movedim(class_dim, 1)


def _one_batch(data: Data) -> tuple[Any, Any]:
    """Two training items batched (the recipe's collate_fn) and prepared on the CPU: ``(x, y)``."""
    try:  # never cache here: only these two items are read
        raw = BatchSource(data.train, dataclasses.replace(data, cache=False)).take([0, 1])
    except Exception as exc:
        raise ConfigError(
            f"dataset_loader: two training items cannot be batched together ({type(exc).__name__}: {exc}); "
            "items must be tensors (or numbers/arrays) of equal shape, or pass "
            "ignite_seg.Data(train, val, collate_fn=...) to batch them (e.g. padding sequences)."
        ) from None
    try:
        return (data.prepare_batch or default_prepare_batch)(raw, "cpu", False)
    except Exception as exc:
        raise ConfigError(
            f"dataset_loader: prepare_batch fails on a batch of two training items ({_shapes(raw)}; "
            f"{type(exc).__name__}: {exc}); it must return (input, target), e.g. pass "
            "ignite_seg.Data(train, val, prepare_batch=...)."
        ) from None


def _shapes(obj: Any) -> str:
    """Shapes and dtypes of the tensors in a (nested) batch, for error messages."""
    if isinstance(obj, torch.Tensor):
        return f"{tuple(obj.shape)} ({obj.dtype})"
    if isinstance(obj, (tuple, list)):
        return "(" + ", ".join(_shapes(v) for v in obj) + ")"
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{k!r}: {_shapes(v)}" for k, v in obj.items()) + "}"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return f"{type(obj).__name__}(" + ", ".join(
            f"{f.name}={_shapes(getattr(obj, f.name))}" for f in dataclasses.fields(obj)) + ")"
    return type(obj).__name__


def _loss_without_broadcast(loss_fn: Any, out: torch.Tensor, y: Any, loss_spec: LoaderSpec) -> Any:
    """``loss_fn(out, y)``, refused where output and target shapes broadcast to a larger one: an
    elementwise loss of ``(N, 1)`` outputs against ``(N,)`` targets is a mean over an N x N matrix,
    which trains (badly) without an error. torch's own warning about it is caught and made an error."""
    bigger = None
    if isinstance(y, torch.Tensor) and tuple(y.shape) != tuple(out.shape):
        try:
            shape = tuple(torch.broadcast_shapes(out.shape, y.shape))
            bigger = shape if shape not in (tuple(out.shape), tuple(y.shape)) else None
        except RuntimeError:
            pass  # shapes that do not broadcast: the loss itself fails or handles them
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = loss_fn(out, y)
    said = [str(w.message) for w in caught if "broadcast" in str(w.message)]
    if bigger is not None or said:
        fix = ("return (N,) outputs (e.g. model(x).squeeze(-1)) or give targets the output's shape (y.unsqueeze(-1))"
               if out.ndim == y.ndim + 1 and out.shape[-1] == 1 else "give outputs and targets the same shape")
        raise ConfigError(
            f"loss_loader={loss_spec.describe()}: model output of shape {tuple(out.shape)} and targets of shape "
            f"{_shapes(y)} broadcast {'to ' + str(bigger) if bigger else 'against each other'}, so the loss is "
            f"taken over every output-target pair, not per item{f' (torch: {said[0]})' if said else ''}. "
            f"Fix the shapes: {fix}."
        )
    return loss


def _check_style(style: str, out: torch.Tensor, y: Any, ignore_index: int | None = None) -> None:
    if style == "inv-loss":
        return
    if not isinstance(y, torch.Tensor):
        raise ConfigError(f"accuracy_style={style!r} needs tensor targets; got {_shapes(y)}.")
    shapes = f"model output shape {tuple(out.shape)}, target shape {tuple(y.shape)} ({y.dtype})"
    if style == "classification":
        if out.ndim < 2 or out.shape[1] < 2:
            raise ConfigError(
                f"accuracy_style='classification' needs a model output of shape (batch, n_classes, *) "
                f"with n_classes >= 2; got {shapes}. For regression use accuracy_style='inv-loss'."
            )
        if tuple(y.shape) == (out.shape[0], *out.shape[2:]):  # class indices, per item or per token
            if y.is_floating_point() or y.dtype == torch.bool:
                raise ConfigError(
                    f"accuracy_style='classification' needs integer class-index targets (int64) or "
                    f"one-hot targets of the output's shape; got {shapes}. Convert the targets with "
                    "torch.as_tensor(y, dtype=torch.long)."
                )
            counted = y[y != ignore_index] if ignore_index is not None else y
            if counted.numel() and (int(counted.min()) < 0 or int(counted.max()) >= out.shape[1]):
                raise ConfigError(
                    f"accuracy_style='classification': target class {int(counted.max())} is outside the "
                    f"model's {out.shape[1]} outputs; got {shapes}"
                    f"{'' if ignore_index is None else f' (padding is the loss ignore_index={ignore_index})'}."
                )
        elif tuple(y.shape) != tuple(out.shape):
            raise ConfigError(
                f"accuracy_style='classification' needs targets of shape (batch, *) (class indices) or "
                f"one-hot (batch, n_classes, *) for outputs (batch, n_classes, *); got {shapes}."
            )
    elif tuple(y.shape) != tuple(out.shape):
        raise ConfigError(
            f"accuracy_style='multiclass' needs multi-hot targets of the output's shape; got {shapes}."
        )


def _check_all_targets(style: str, data: Data, n_out: int, ignore_index: int | None) -> None:
    """Class targets of every item in range, where that is one vectorised check (tensor datasets).

    A lazy dataset is never iterated here: its first items are checked with the probe's batch only.
    """
    if style != "classification":
        return
    for name, ds in (("training", data.train), *((f"validation ({k!r})", v) for k, v in data.val_sets.items())):
        tensors = tensor_pair(ds)
        if tensors is None:
            continue
        y = tensors[1]
        if y.ndim == 0 or y.is_floating_point() or y.dtype == torch.bool or y.numel() == 0:
            continue
        bad = ((y < 0) | (y >= n_out)) & (y != ignore_index if ignore_index is not None else True)
        if bool(bad.any()):
            first = int(bad.nonzero()[0, 0])
            raise ConfigError(
                f"dataset_loader: {int(bad.sum())} item(s) of the {name} set have a target class outside the "
                f"model's {n_out} outputs (first: item {first}, class {int(y[first].reshape(-1)[0])}). Targets "
                f"must be in 0..{n_out - 1}."
            )

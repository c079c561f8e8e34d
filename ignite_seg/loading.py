"""Loading a trial's weights from a run folder: :func:`load_model` (re-exported by :mod:`ignite_seg.api`)."""
from __future__ import annotations

import os
from typing import Any

from .config.checks import check_bool
from .config.specs import LoaderSpec, normalize_spec
from .engine.models import as_model
from .exceptions import ConfigError, FolderError
from .storage.atomic import named_damage
from .storage.names import MODEL_BEST_PT, MODEL_INIT_PT, MODEL_PT
from .storage.run_folder import RunFolder

__all__ = ["load_model"]


def load_model(
    folder: str | os.PathLike[str],
    trial: int = 0,
    *,
    model: Any = None,
    trust_recipe: bool = False,
    initial: bool = False,
    best: bool = False,
) -> Any:
    """Load trial ``trial``'s weights (``weights_only``) into a model; never runs code from the folder by itself.

    Args:
        folder: a run folder written by :func:`train`.
        trial: the trial id.
        model: the model to load the weights into: a ``torch.nn.Module`` of the run's
            architecture, or a loader spec of it (built here, in this process).
        trust_recipe: without ``model``, rebuild the model from the loader recorded in the
            folder's run.json. This unpickles, imports and calls what the folder says, which can
            run any code: only for folders you trust (ones you wrote yourself).
        initial: load the weights before training (``model_init.pt``) instead of after.
        best: load the best checkpoint (``model_best.pt``, a run with ``best_metric``) instead of
            the final weights.

    Raises:
        ConfigError: neither ``model`` nor ``trust_recipe=True`` was given.
        FolderError: the folder is no run, or the trial has no weights.

    Example:
        >>> model = ignite_seg.load_model("out/current", 0, model=("mytask", "model", (), {}))  # doctest: +SKIP
        >>> model = ignite_seg.load_model("out/current", 0, trust_recipe=True)  # doctest: +SKIP
    """
    import torch

    check_bool("trust_recipe", trust_recipe)
    if check_bool("initial", initial) and check_bool("best", best):
        raise ConfigError("load_model: initial=True and best=True ask for two different weights; pass one of them.")
    rf = RunFolder(folder)
    info = rf.read_run()
    path = rf.trial(trial) / (MODEL_INIT_PT if initial else MODEL_BEST_PT if best else MODEL_PT)
    if not path.is_file():
        raise FolderError(
            f"trial {trial} of {str(rf.path)!r} has no {path.name}; trials with weights: "
            f"{[t for t in rf.trial_ids() if (rf.trial(t) / path.name).is_file()]}."
        )
    if model is None and not trust_recipe:
        raise ConfigError(
            f"load_model does not run code recorded in a folder by itself. Pass model= (a torch.nn.Module "
            f"of the run's architecture, or its loader spec), or trust_recipe=True to import and call the "
            f"recorded model loader {info.loaders['model'].get('describe')} (only for a folder you trust)."
        )
    if model is None:
        model = as_model(LoaderSpec.from_json(info.loaders["model"]).build())
    elif not isinstance(model, torch.nn.Module):
        model = as_model(normalize_spec(model, "model").build())
    with named_damage(path):  # a truncated file: a FolderError naming it, not miniz's RuntimeError
        weights = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(weights)
    return model

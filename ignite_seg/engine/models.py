"""What a model loader may return: a ``torch.nn.Module``, or ignite-simple's pair.

ignite-simple accepted ``(model_with_hidden_outputs, stripped_model)`` (torchluent's
``build(with_stripped=True)``): the two share their parameters, and the stripped one maps inputs
to outputs. ignite_seg trains and saves the stripped model; the hidden representations of the
analysis are recorded by hooks on its layers (engine/recorders.py), so the first model is not used.
"""
from __future__ import annotations

from typing import Any

import torch

__all__ = ["as_model"]


def as_model(built: Any) -> Any:
    """The model to train: ``built`` itself, or the stripped model of an ignite-simple pair."""
    if (isinstance(built, tuple) and len(built) == 2
            and all(isinstance(m, torch.nn.Module) for m in built)):
        return built[1]
    return built

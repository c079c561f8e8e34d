"""Training, the public home: :func:`train` runs trials of a recipe (a known one, a
:class:`FixedHyperparameters`, or one :mod:`ignite_seg.tuner` chooses first), :func:`load_model`
reads a trial's weights back, :class:`TrainResult` and :class:`TrialSummary` are what a run returns.

Thin over the layers: the pipeline is :mod:`ignite_seg.api`, one trial is :mod:`ignite_seg.engine.trainer`.

Example (a known recipe: no tuning, the trials alone)::

    from ignite_seg.trainer import FixedHyperparameters, load_model, train

    recipe = FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=64, cycle_size_epochs=5, epochs=5)
    res = train(("mytask", "model", (), {}), ("mytask", "dataset", (), {}),
                ("torch.nn", "CrossEntropyLoss", (), {}), folder="out/known", hyperparameters=recipe,
                trials=4, cores=2, seed=0)
    model = load_model("out/known", trial=0)
"""
from __future__ import annotations

from .api import TrainResult, TrialSummary, load_model, train
from .config.hyperparameters import FixedHyperparameters
from .engine.batching import Data

__all__ = ["train", "load_model", "TrainResult", "TrialSummary", "FixedHyperparameters", "Data"]

"""Constants shared by the tests (import as ``from helpers import ...``)."""
from __future__ import annotations

import ignite_seg

FAST_HP = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=3)
CE = ("torch.nn", "CrossEntropyLoss", (), {})


def trial_task(trial_id, model, dataset, loss, hparams, accuracy_style="classification", *, seed, **fields):
    """A :class:`~ignite_seg.engine.trial_records.TrialTask` from the flat fields a test names: the
    run's (device, metrics, best_metric, handlers, processes, ...) go to its ``TrialSetup``, the rest
    (record_hidden, threads, checkpoints) to the task itself."""
    import dataclasses

    from ignite_seg.engine.trial_records import TrialSetup, TrialTask

    own = {f.name for f in dataclasses.fields(TrialTask)}
    setup = TrialSetup(model, dataset, loss, accuracy_style, **{k: v for k, v in fields.items() if k not in own})
    return TrialTask(trial_id, setup, hparams, seed, **{k: v for k, v in fields.items() if k in own})

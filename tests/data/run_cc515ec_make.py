"""Writes tests/data/run_cc515ec with the code of commit cc515ec (see README.md here)."""
import dataclasses
import sys

from helpers import FAST_HP

import ignite_seg

ignite_seg.train(("tasks", "mlp", (), {}), ("real_tasks", "two_val_sets", (), {}), ("torch.nn", "CrossEntropyLoss", (), {}),
                 folder=sys.argv[1], hyperparameters=dataclasses.replace(FAST_HP, epochs=2), trials=2, trials_strict=True,
                 seed=0, analysis="none", cores=1, metrics={"iou": ("real_tasks", "class_iou", (), {})},
                 metric_modes={"iou": "max"}, best_metric="loss", best_mode="min", snapshots_per_epoch=2)

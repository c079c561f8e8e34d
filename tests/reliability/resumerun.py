"""Driver script of the mid-trial resume tests: one train() call on the default process pool.

    python resumerun.py '{"folder": ..., "case": "tensors" | "dataloader+ema", "continuation": false,
                       "trial_processes": 1}'
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.dirname(os.path.dirname(HERE))]

#: seconds each training step sleeps: the trials last long enough to be killed between epochs
STEP_SLEEP = 0.1


def main() -> None:
    import ignite_seg

    spec = json.loads(sys.argv[1])
    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=6)
    dataset = ("tasks", "blobs", (), {})
    if spec["case"] == "dataloader+ema":
        hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=6,
                                             ema_decay=0.9, warmup_epochs=1.0, schedule="cosine")
        dataset = ("resume_tasks", "augmented_blobs", (), {})
    res = ignite_seg.train(
        ("resume_tasks", "Interruptible", (), {"sleep": STEP_SLEEP}), dataset, ("torch.nn", "CrossEntropyLoss", (), {}),
        folder=spec["folder"], hyperparameters=hp, analysis="none", allow_later_analysis_up_to="none",
        trials=2, trials_strict=True, cores=2, seed=0, is_continuation=spec.get("continuation", False),
        checkpoint_every=1, trial_processes=spec.get("trial_processes", 1),
    )
    print("DONE", [t.status for t in res.trials], flush=True)


if __name__ == "__main__":
    main()

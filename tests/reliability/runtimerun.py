"""Driver script of the runtime tests: one train() call on the default process pool.

    python runtimerun.py '{"folder": ..., "model": [module, attr, args, kwargs], ...}'
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.dirname(os.path.dirname(HERE))]


def main() -> None:
    import ignite_seg

    spec = json.loads(sys.argv[1])
    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=3)
    res = ignite_seg.train(
        tuple(spec["model"]), ("tasks", "blobs", (), {}), ("torch.nn", "CrossEntropyLoss", (), {}),
        folder=spec["folder"], hyperparameters=hp, analysis=spec.get("analysis", "none"),
        trials=spec.get("trials", 2), trials_strict=True, cores=2, seed=0,
    )
    print("DONE", [t.status for t in res.trials], flush=True)


if __name__ == "__main__":
    main()

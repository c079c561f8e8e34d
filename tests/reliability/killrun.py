"""Driver script for the fault-injection tests: one train() call, described by a JSON argument.

    python killrun.py '{"folder": ..., "continuation": false, ...}'

With ``IGNITE_SEG_KILL_AT_WRITE=N`` in the environment the process SIGKILLs itself at its N-th
atomic write. At the end it prints ``WRITES <n>``: how many atomic writes the call made.
"""
from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.dirname(os.path.dirname(HERE))]


def main() -> None:
    import torch

    import ignite_seg
    from ignite_seg.storage import atomic as fileio

    torch.set_num_threads(1)  # bitwise-reproducible trials in the driver's threads
    if os.environ.get("IGNITE_SEG_TRACE_WRITES"):  # print each atomic write: "WRITE <n> <path>"
        fileio._before_replace_hooks.append(lambda path: print(f"WRITE {fileio.write_count} {path}", flush=True))
    spec = json.loads(sys.argv[1])
    for folder in spec.pop("folders", None) or [spec["folder"]]:
        _train(ignite_seg, {**spec, "folder": folder})
    print(f"WRITES {fileio.write_count}", flush=True)


def _train(ignite_seg, spec) -> None:
    hp = spec.get("hyperparameters", "fixed")
    if hp == "fixed":
        hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=2)
    kwargs = dict(
        folder=spec["folder"], history_folder=spec["folder"] + "_history", hyperparameters=hp,
        analysis=spec.get("analysis", "none"), allow_later_analysis_up_to=spec.get("analysis", "none"),
        trials=spec.get("trials", 3), trials_strict=True, cores=1, seed=0,
        is_continuation=spec.get("continuation", False),
    )
    if spec.get("pool", "threads") == "threads":
        # one thread: trials run in a fixed order, so the N-th write is the same event every run
        with ThreadPoolExecutor(1) as ex:
            ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}),
                             ("torch.nn", "CrossEntropyLoss", (), {}), executor=ex, **kwargs)
    else:
        ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}),
                         ("torch.nn", "CrossEntropyLoss", (), {}), **kwargs)


if __name__ == "__main__":
    main()

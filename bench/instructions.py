"""Instructions per epoch of the loops of ``bench/per_step.py``, counted by valgrind (callgrind).

Wall and CPU time on a shared machine move by ±25% between runs; instruction counts do not. The
script runs itself under ``valgrind --tool=callgrind`` with collection off (the imports are not
counted) and switches it on only around each loop, through callgrind's client requests (a tiny C
shim built with ``gcc`` against ``valgrind/callgrind.h``). Each loop runs at two epoch counts;
the per-epoch figure is the difference over the difference of epochs (fixed costs cancel).
Needs valgrind, its headers and gcc; takes about 10 minutes (the uninstrumented imports are slow
under valgrind). Under valgrind torch runs its AVX2 kernels whatever the CPU has.

    PYTHONPATH=. python bench/instructions.py [--epochs 3 7] [--tree /path/to/another/checkout] [--as-pool-task]
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import glob
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHIM = r"""
#include <valgrind/callgrind.h>
void start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; CALLGRIND_TOGGLE_COLLECT; }
void stop_dump(const char *label) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS_AT(label); CALLGRIND_STOP_INSTRUMENTATION; }
"""


class _NullQueue:
    """The announcement queue of a pool worker, minus the pipe: what a report costs the step is counted."""

    def put(self, item: object) -> None:
        pass


def _inside(shim: str, epochs: list[int], what: str, as_pool_task: bool = False) -> None:
    """Under valgrind: run every loop at both epoch (or unit) counts, one dump per run."""
    sys.path.insert(0, HERE)
    import torch

    if as_pool_task:  # the loops run as inside a task of the default pool: the progress reports are on
        from ignite_seg.runtime import workers

        workers._started_queue, workers._current_key = _NullQueue(), "instructions"  # type: ignore[assignment]

    torch.set_num_threads(1)
    lib = ctypes.CDLL(shim)
    if what == "components":
        import components

        runs = {e: components.loops(e) for e in epochs}
    else:
        import per_step

        runs = {e: {k: functools.partial(f, None) for k, f in per_step._loops(e).items()} for e in epochs}
    for name in runs[epochs[0]]:
        runs[epochs[0]][name]()  # warm up, not counted
        for e in epochs:
            lib.start()
            runs[e][name]()
            lib.stop_dump(f"{name}@{e}".encode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, nargs=2, default=None,
                    help="the two epoch counts (default 3 7: above the features pair's 2 warmup epochs), or unit "
                         "counts with --what components (default 4 12)")
    ap.add_argument("--what", choices=("loops", "components"), default="loops",
                    help="per_step.py's loops (per epoch) or components.py's parts of a step (per unit)")
    ap.add_argument("--tree", default=None, help="measure the package of another checkout")
    ap.add_argument("--as-pool-task", action="store_true",
                    help="run the loops as a task of the default pool runs them (its progress reports on); "
                         "default: as in the caller's own process")
    ap.add_argument("--inside", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.epochs = args.epochs or ([4, 12] if args.what == "components" else [3, 7])
    if args.inside:
        _inside(args.inside, args.epochs, args.what, args.as_pool_task)
        return
    work = tempfile.mkdtemp(prefix="instructions_")
    shim = os.path.join(work, "libcgctl.so")
    with open(os.path.join(work, "shim.c"), "w") as f:
        f.write(SHIM)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", shim, os.path.join(work, "shim.c")], check=True)
    env = dict(os.environ, **({"PER_STEP_TREE": os.path.abspath(args.tree)} if args.tree else {}))
    subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                    f"--callgrind-out-file={work}/cg.%p", sys.executable, os.path.abspath(__file__),
                    "--inside", shim, "--what", args.what, "--epochs", *map(str, args.epochs),
                    *(["--as-pool-task"] if args.as_pool_task else [])],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    print(f"callgrind files (one per loop and epoch count, for callgrind_annotate): {work}")
    counts = {}
    for path in sorted(glob.glob(f"{work}/cg.*.*"), key=lambda p: int(p.rsplit(".", 1)[1])):  # in run order
        text = open(path).read()
        label = re.search(r"Client Request: (\S+)", text)
        if label:
            counts[label.group(1)] = int(re.search(r"^summary: (\d+)", text, re.M).group(1))
    e1, e2 = args.epochs
    names = [k[: -len(f"@{e1}")] for k in counts if k.endswith(f"@{e1}")]
    per_unit = {name: (counts[f"{name}@{e2}"] - counts[f"{name}@{e1}"]) / (e2 - e1) for name in names}
    if args.what == "components":
        sys.path.insert(0, HERE)
        from components import scale

        per_unit = {name: n / scale(name) for name, n in per_unit.items()}
        print(f"package: {args.tree or os.path.dirname(HERE)}; instructions per unit (counts {e1} and {e2}), "
              "k: iteration or snapshot; each row's own cost is its difference to the row above")
        for name, n in per_unit.items():
            print(f"  {name:22s} {n / 1e3:9.1f} k")
        return
    sys.path.insert(0, HERE)
    from per_step import PATHS

    per_epoch = per_unit
    where = "as a task of the default pool" if args.as_pool_task else "in the caller's process"
    print(f"package: {args.tree or os.path.dirname(HERE)}; instructions per epoch (epochs {e1} and {e2}), {where}:")
    for name, n in per_epoch.items():
        print(f"  {name:14s} {n / 1e6:7.1f} M")
    for path in PATHS:
        print(f"  {path} path trial/plain: {per_epoch[f'trial-{path}'] / per_epoch[f'plain-{path}']:.3f}x")


if __name__ == "__main__":
    main()

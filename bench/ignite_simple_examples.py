"""ignite-simple's own example scripts, run unchanged but for the import alias, on ignite_seg (issue 29).

Reads each script from a checkout of ignite-simple (``--repo``; e.g. the search tool's ``fetch`` of
Tjstretchalot/ignite-simple: nothing of it is committed here), rewrites only its ``ignite_simple``
imports as docs/migrating.md says (``import ignite_simple`` -> ``import ignite_seg as ignite_simple``,
``import ignite_simple.X`` -> ``import ignite_seg.X``, ``from ignite_simple.X import`` ->
``from ignite_seg.X import``, ``import ignite_simple.X as Y`` -> ``import ignite_seg.X as Y``), and runs
it as its author did, ``python <script>.py`` in a fresh folder, answering its "press enter" prompt.

Synthetic data where they download: ``bench/is_shims/torchvision`` stands in for torchvision's MNIST,
FashionMNIST and CIFAR10 (same shapes and types; 3,000 + 500 items: ``IS_SYNTH_TRAIN``/``IS_SYNTH_VAL``),
because there are no downloads here and PyPI's torchvision cannot be imported beside the CPU build of
torch. torchluent (``pip install torchluent``, pure Python) is the real one; it must be importable.

For each script it prints: the exit status, the wall time, the outputs its author looked at (the run
folder's analysis, the sweep's ``result.pdf``/``results.pdf``, the returned tuples' perfs) and whether the
classifiers learned (val perf against chance).

    PYTHONPATH=. python bench/ignite_simple_examples.py --repo /path/to/ignite-simple [--only mnist,...] --out out/is_ex
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: script -> (path in the checkout, the argument list its author ran it with, chance level of its task)
EXAMPLES = {
    "delta_to_dir": ("examples/delta_to_dir.py", [], 0.25),
    "delta_to_dir_nonlins": ("examples/delta_to_dir_nonlins.py", [], 0.25),
    "mnist": ("examples/mnist.py", [], 0.1),
    "mnist_nonlins": ("examples/mnist_nonlins.py", [], 0.1),
    "fashion_mnist": ("examples/fashion_mnist.py", [], 0.1),
    "seqmatch_hidden": ("examples/seqmatch_hidden.py", [], None),
    "cifar10": ("examples/cifar10.py", [], 0.1),
    "gaussian_blobs_delayed_class": ("examples/advanced/gaussian_blobs_delayed_class.py", [], 0.5),
}


def alias(source: str) -> str:
    """The import alias of docs/migrating.md, applied to import statements only."""
    out = []
    for line in source.splitlines(keepends=True):
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if re.match(r"import ignite_simple\s*$", stripped):
            line = f"{indent}import ignite_seg as ignite_simple\n"
        elif re.match(r"(import|from) ignite_simple\.", stripped):
            line = indent + stripped.replace("ignite_simple.", "ignite_seg.", 1)
        out.append(line)
    return "".join(out)


def run_example(name: str, repo: Path, out: Path, timeout: float) -> dict:
    rel, args, chance = EXAMPLES[name]
    work = out / name
    work.mkdir(parents=True, exist_ok=False)
    script = work / Path(rel).name
    script.write_text(alias((repo / rel).read_text()))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE / "is_shims"), str(work)]),
               MPLBACKEND="Agg")
    t = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, script.name, *args], cwd=work, env=env, input="\n",
                              capture_output=True, text=True, timeout=timeout)
        rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired as exc:
        rc, tail = "timeout", str(exc)[-3000:]
    (work / "output.txt").write_text(tail)
    got = {"name": name, "rc": rc, "seconds": round(time.perf_counter() - t, 1), "chance": chance,
           "outputs": sorted(str(p.relative_to(work)) for p in work.rglob("*")
                             if p.suffix in (".pdf", ".png", ".mp4", ".md", ".npz") and "trials" not in p.parts),
           "runs": _runs(work)}
    if rc != 0:
        got["tail"] = tail
    return got


def _runs(work: Path) -> list[dict]:
    """Each run folder's state and its trials' final val perf / loss."""
    from ignite_seg.storage import RunFolder

    runs = []
    for run_json in sorted(work.rglob("run.json")):
        folder = run_json.parent
        perfs, losses = [], []
        for _, r in RunFolder(folder).finished_trials():
            if r.completed:
                perfs.append(r.metrics.get("perf_val"))
                losses.append(r.metrics.get("loss_val"))
        runs.append({"folder": str(folder.relative_to(work)), "state": json.loads(run_json.read_text()).get("state"),
                     "perf_val": perfs, "loss_val": losses})
    return runs


def verdict(got: dict) -> str:
    if got["rc"] != 0:
        return f"FAILED ({got['rc']})"
    runs = got["runs"]
    if not runs or any(r["state"] != "complete" or not r["perf_val"] for r in runs):
        return "ran, but a run folder is not complete"
    if got["chance"] is None:
        return "ok (regression: no chance level)"
    worst = min(min(r["perf_val"]) for r in runs)
    halfway = got["chance"] + 0.5 * (1 - got["chance"])  # learns: at least halfway from chance to perfect
    return f"ok, learns (worst trial val perf {worst:.3f} vs chance {got['chance']})" if worst > halfway \
        else f"ran, but a trial is near chance (worst {worst:.3f} vs {got['chance']})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True, help="a checkout of ignite-simple (its examples/ folder)")
    ap.add_argument("--only", default=",".join(EXAMPLES), help="comma-separated names of EXAMPLES")
    ap.add_argument("--out", default="out/ignite_simple_examples")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per script")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.only.split(","):
        got = run_example(name, Path(args.repo), out, args.timeout)
        results.append(got)
        runs = got["runs"]
        print(f"{name}: {verdict(got)}; {got['seconds']} s; {len(runs)} run folder(s); "
              f"val perf {[round(p, 3) for r in runs for p in r['perf_val']]}; outputs: "
              f"{', '.join(o for o in got['outputs'] if not o.endswith('.npz'))[:400]}", flush=True)
        (out / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

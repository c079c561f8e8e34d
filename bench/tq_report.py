"""Issue 18's table from ``bench/tune_quality.py``'s JSON: regret, compute and anchors per task.

    PYTHONPATH=. python bench/tq_report.py --out out/tq --cache bench/tune_quality_cache [--preset fast]

Regret is against the re-evaluated grid-best (the best of the grid's top 3 cells re-run with fresh
seeds); compute is worker CPU seconds of the tune over the grid's (both measured by
:func:`bench.tune_quality.worker_cpu_seconds`).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def row(task: str, out: Path, cache: Path, preset: str) -> str:
    grid, reeval = _load(cache / f"grid_{task}.json"), _load(cache / f"reeval_{task}.json")
    presets, anchors = _load(out / f"presets_{task}.json"), _load(out / f"anchors_{task}.json")
    if grid is None or presets is None or preset not in presets:
        return f"| {task} | (not run) |"
    p = presets[preset]
    fresh = reeval["best_fresh_perf"] if reeval else float("nan")
    best_cell = max(reeval["cells"], key=lambda r: r["fresh_perf_mean"]) if reeval else None
    cpu = sum(p["tuning_worker_cpu_seconds"]) / len(p["tuning_worker_cpu_seconds"])
    lr_end = "/".join(f"{r['lr_end']:.3g}" for r in p["recipes"])
    batches = "/".join(str(b) for b in p["batch_sizes"])
    cells = [f"{task}", f"{grid['best_perf']:.4f}",
             f"{fresh:.4f} (lr {best_cell['lr']:.3g}, b {best_cell['batch']})" if best_cell else "–",
             f"{p['val_perf_mean']:.4f} ± {p['val_perf_sem']:.4f}", f"{fresh - p['val_perf_mean']:+.4f}",
             f"{100 * cpu / grid['worker_cpu_seconds']:.1f}% ({cpu:.0f} / {grid['worker_cpu_seconds']:.0f} s)",
             f"b {batches}, lr_end {lr_end}"]
    for name in ("tpe", "prodigy"):
        a = (anchors or {}).get(name, {})
        if "val_perf_mean" in a:
            cells.append(f"{a['val_perf_mean']:.4f} ({fresh - a['val_perf_mean']:+.4f})")
        else:
            cells.append(f"missing: {a.get('missing', a.get('seeds', [{}])[0].get('missing', 'not run'))}")
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--cache", default="bench/tune_quality_cache")
    parser.add_argument("--tasks", default="cnn,noisy_regression,tiny,binary,sequence")
    parser.add_argument("--preset", default="fast")
    args = parser.parse_args()
    print("| task | grid-best (2 seeds) | re-evaluated best | `" + args.preset + "` val (± sem) | regret | "
          "compute (worker CPU) | choice | TPE, same CPU (regret) | Prodigy b32 (regret) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for task in args.tasks.split(","):
        print(row(task, Path(args.out), Path(args.cache), args.preset))


if __name__ == "__main__":
    main()

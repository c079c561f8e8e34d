"""The table of issue 25's goals from the JSON of :mod:`bench.tq_goals` (one file per task x recipe).

    PYTHONPATH=. python bench/tq_goals_report.py --out out/goals

Goal tests (each with the standard errors of the means it compares, combined in quadrature):

1. no collapse: tuned ≥ untuned − 2 SE(tuned − untuned);
2. regret = re-evaluated grid best − tuned ≤ max(0.005, 2 SE of the tuned 2-trial mean);
3. tuned ≥ TPE − 2 SE(tuned − TPE) ("as good", within the noise; "better" when tuned ≥ TPE), and
   (tuning + trials) worker CPU ≤ 10% of a 100-cell grid's on tasks of ≥ 1,000 training items.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np


def _se(*s: float) -> float:
    return math.sqrt(sum((x if math.isfinite(x) else 0.0) ** 2 for x in s))


def row(d: dict[str, Any]) -> tuple[str, list[str]]:
    t, u, g, p = d.get("tuned"), d.get("untuned"), d.get("grid"), d.get("tpe")
    misses = []
    if t is None:
        return f"| {d['task']} | {d['recipe']} | not run |", ["not run"]
    rec = t["recipe"]
    tuned = f"{t['mean']:.4f} ± {t['sem']:.4f} ({rec['lr_start']:.3g}→{rec['lr_end']:.3g}, b{rec['batch_size']})"
    if t.get("failed"):
        tuned += f", {t['failed']} failed"
    cells = [d["task"] + f" ({d['n_train']}, {rec['epochs']} ep)", d["recipe"], tuned]
    if u:
        ok1 = t["mean"] >= u["mean"] - 2 * _se(t["sem"], u["sem"])
        cells.append(f"{u['mean']:.4f} ± {u['sem']:.4f}")
        if not ok1:
            misses.append("1 (below the untuned default)")
    else:
        cells.append("—")
    if g:
        regret = g["reeval_best"] - t["mean"]
        tol = max(0.005, 2 * t["sem"]) if math.isfinite(t["sem"]) else 0.005
        cells += [f"{g['reeval_best']:.4f} ({g['cells']} cells: {g['peaks']} peaks x b{'/'.join(map(str, g['batches']))}"
                  f" x 2 seeds; top {len(g['reeval_cells'])} x {g['reeval_seeds']} seeds)",
                  f"{regret:+.4f}", f"{tol:.4f}"]
        if regret > tol:
            misses.append(f"2 (regret {regret:+.4f} > {tol:.4f})")
    else:
        cells += ["—", "—", "—"]
    if p and "mean" in p:
        ok3 = t["mean"] >= p["mean"] - 2 * _se(t["sem"], p["sem"])
        cells.append(f"{p['mean']:.4f} ± {p['sem']:.4f} ({len(p['history'])} cand.)")
        if not ok3:
            misses.append(f"3 (TPE {p['mean']:.4f})")
    else:
        cells.append("not run" if p is None else "optuna missing")
    c = d.get("calib")
    if g or c:
        base = c["cpu_100_cells"] if c else g["cpu_100_cells"]
        share = (t["tune_cpu"] + t["trials_cpu"]) / base
        cells.append(f"{100 * share:.1f}% ({t['tune_cpu']:.0f}+{t['trials_cpu']:.0f} of {base:.0f} CPU-s"
                     + (", calibrated)" if c else ", grid as cached)"))
        if d["n_train"] >= 1000 and share > 0.10:
            misses.append(f"3 (compute {100 * share:.0f}%)")
    else:
        cells.append("—")
    cells.append("met" if not misses else "missed: " + "; ".join(misses))
    return "| " + " | ".join(cells) + " |", misses


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out/goals")
    args = ap.parse_args()
    print("| task (n, epochs) | recipe | tuned `fast` (mean ± SE, 2 trials; recipe) | untuned Adam 1e-3 b64 | "
          "grid best re-evaluated (grid) | regret | max(0.005, 2 SE) | Optuna TPE, same CPU | "
          "tune + trials CPU / 100-cell grid | goals |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    runs = [json.loads(path.read_text()) for path in sorted(Path(args.out).glob("goals_*.json"))]
    for d in runs:
        if "untuned" in d:  # the seeds run with the anchors
            print(row(d)[0])
    print()
    print(stability(runs))


def stability(runs: list[dict[str, Any]]) -> str:
    """Over the tune seeds of each task x recipe: lr_end's coefficient of variation, the batch sizes
    (spread in steps of the candidate grid), the worst seed against the untuned default, and the regret
    of the mean over every seed's trials (its SE from all of them)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in runs:
        if "tuned" in d:
            groups.setdefault((d["task"], d["recipe"]), []).append(d)
    lines = ["| task | recipe | seeds | lr_end per seed | lr_end CV | batch sizes (spread, grid steps) | worst seed vs "
             "untuned − 2 SE | mean over seeds' trials | regret (≤ max(0.005, 2 SE)) |", "|---|---|---|---|---|---|---|---|---|"]
    for (task, recipe), ds in sorted(groups.items()):
        ds.sort(key=lambda d: d["seed"])
        ends = np.array([d["tuned"]["recipe"]["lr_end"] for d in ds])
        cv = float(ends.std(ddof=1) / ends.mean()) if len(ends) > 1 else float("nan")
        batches = [d["tuned"]["recipe"]["batch_size"] for d in ds]
        steps = [math.log2(b) for b in batches]  # the candidates are powers of two apart
        anchor = next((d for d in ds if "untuned" in d), None)
        worst = min(ds, key=lambda d: d["tuned"]["mean"])
        collapse = "—"
        if anchor:
            u, w = anchor["untuned"], worst["tuned"]
            ok = w["mean"] >= u["mean"] - 2 * _se(w["sem"], u["sem"])
            collapse = f"{w['mean']:.4f} (seed {worst['seed']}) vs {u['mean']:.4f}: {'met' if ok else 'MISSED'}"
        perfs = np.array([p for d in ds for p in d["tuned"]["perfs"]], dtype=float)
        mean, sem = float(np.nanmean(perfs)), float(np.nanstd(perfs, ddof=1) / math.sqrt(np.isfinite(perfs).sum()))
        g = next((d["grid"] for d in ds if "grid" in d), None)
        regret = "—"
        if g:
            r, tol = g["reeval_best"] - mean, max(0.005, 2 * sem)
            regret = f"{r:+.4f} ({'met' if r <= tol else 'missed'}, tol {tol:.4f})"
        lines.append(f"| {task} | {recipe} | {len(ds)} | {', '.join(f'{e:.3g}' for e in ends)} | "
                     f"{100 * cv:.0f}% ({'met' if cv <= 0.25 else 'missed'}) | {', '.join(map(str, batches))} "
                     f"({max(steps) - min(steps):.0f}: {'met' if max(steps) - min(steps) <= 1 else 'missed'}) | "
                     f"{collapse} | {mean:.4f} ± {sem:.4f} ({perfs.size} trials) | {regret} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

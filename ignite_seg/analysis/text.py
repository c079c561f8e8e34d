"""The text summary: chosen hyperparameters with their evidence, trial statistics, failures."""
from __future__ import annotations

import math
import re
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from ..engine.schedule_text import PEAK_ONLY, describe_schedule
from ..exceptions import IgniteSegError
from ..storage.records import RunRecord, TrialResult
from ..storage.result_keys import ResultKeys
from ..storage.schemas import (
    MISC_JSON,
    BatchSampledFile,
    BatchSweepFile,
    LRSweepFile,
    MiscFile,
    ScheduleStep,
)
from ._mpl import fmt, perf_label
from .evidence import batch_evidence, epochs_evidence, lr_evidence
from .lr_words import lr_how, peak_in_range
from .outcomes import (
    Dead,
    Outcomes,
    Peak,
    Rise,
    best_label,
    dead_lines,
    dead_trials,
    outcome_lines,
    outcome_table,
    outcomes_info,
    outcomes_json,
    peak_lines,
    peaked_trials,
    rise_lines,
    rising_trials,
)
from .stats import Mode, Space, Stats, describe, space_of

__all__ = ["SummaryInfo", "Problem", "TunerFiles", "summary_info", "render_markdown", "summary_json", "METRICS", "final_metrics"]

#: Final metrics of a plain run: results.npz key, label, direction of "best".
METRICS: tuple[tuple[str, str, Mode], ...] = (
    ("final_loss_train", "train loss", "min"),
    ("final_loss_val", "val loss", "min"),
    ("final_perf_train", "train perf", "max"),
    ("final_perf_val", "val perf", "max"),
)


def final_metrics(keys: ResultKeys) -> tuple[tuple[str, str, Mode], ...]:
    """Loss and perf on train and every validation set (a plain run: :data:`METRICS`), then every custom
    metric on train and every validation set; labelled as :meth:`.ResultKeys.label` names the splits."""
    out = [(key, label.replace("val", keys.label("val"), 1) if key.endswith("_val") else label, mode)
           for key, label, mode in METRICS]
    for split in keys.val_splits[1:]:
        name = keys.label(split)
        out += [(f"final_loss_{split}", f"{name} loss", "min"), (f"final_perf_{split}", f"{name} perf", "max")]
    for m in keys.metric_names:
        out += [(f"final_metric_{m}_{split}", f"{m} on {keys.label(split)}", keys.mode(m)) for split in keys.splits]
    return tuple(out)

HP_ORDER = ("lr_start", "lr_end", "batch_size", "cycle_size_epochs", "epochs", "optimizer", "momentum",
            "weight_decay", "grad_clip_norm")


class Problem(NamedTuple):
    trial_id: int
    status: str
    reason: str


class SummaryInfo(NamedTuple):
    title: str
    created: str | None
    state: str
    versions: dict[str, str]
    accuracy_style: str
    hp_kind: str
    final_hp: dict[str, Any]
    evidence: dict[str, tuple[str, ...]]
    stats: dict[str, Stats]
    seconds: Stats
    counts: dict[str, int]
    problems: tuple[Problem, ...]
    misc: Any
    #: The run's validation sets (primary first) and the final metrics in ``stats``, in order.
    keys: ResultKeys = ResultKeys()
    metrics: tuple[tuple[str, str, Mode], ...] = METRICS
    #: The completed trials' best checkpoints and early stops (:mod:`.outcomes`).
    outcomes: Outcomes = Outcomes()
    #: How the tuned LR range was reached (``misc.json``'s schedule step: swept, rescanned, scaled)
    lr_how: str | None = None
    #: ``misc.json``'s schedule step: the tuned range a peak-first schedule was mapped from and where its peak sits
    #: in it (:func:`~.lr_words.peak_in_range`); None in a folder without one
    schedule_step: ScheduleStep | None = None
    #: The completed trials whose training loss ended above where it began.
    rising: tuple[Rise, ...] = ()
    #: The completed trials whose training loss ended no better than the best constant output's.
    dead: tuple[Dead, ...] = ()
    #: The completed trials whose validation perf peaked early and ended clearly below its best.
    peaked: tuple[Peak, ...] = ()
    #: Where each final metric's interval was computed (:func:`.stats.space_of`; None: each key's own space).
    spaces: Mapping[str, Space] | None = None


def _reason(rec: TrialResult) -> str:
    if rec.status == "diverged":
        it = rec.diverged_iteration
        base = rec.error or "loss became non-finite"
        return base if it is None or str(it) in str(base) else f"{base} (iteration {it})"
    return rec.error or "no error recorded"


class TunerFiles(NamedTuple):
    """The tuner's evidence in ``hparams/`` (each ``None`` when absent)."""

    misc: Any = None
    lr: LRSweepFile | Mapping[str, Any] | None = None
    bs: BatchSweepFile | Mapping[str, Any] | None = None
    bs_sampled: BatchSampledFile | Mapping[str, Any] | None = None


def summary_info(
    run: RunRecord | Mapping[str, Any],
    final_hp: Mapping[str, Any] | None,
    results: Mapping[str, np.ndarray] | None,
    records: Sequence[TrialResult | Mapping[str, Any]],
    tuner: TunerFiles = TunerFiles(),
    title: str = "run",
    throughtimes: Mapping[str, np.ndarray] | None = None,
) -> SummaryInfo:
    """Everything the summary says, from the folder's records (pure; ``run`` and ``records`` may come
    as mappings of the files' keys).

    ``tuner.misc`` is ``misc.json`` as read (shown as it is); the tuner files come as records or their arrays;
    ``throughtimes`` (``throughtimes.npz``) shows which trials' training loss rose.
    """
    run = RunRecord.coerce(run)
    trials = [TrialResult.coerce(r) for r in records]
    hp_kind = run.hp_kind
    hp = dict(final_hp or {})
    misc, lr, bs, bs_sampled = tuner
    misc_file = MiscFile.from_json(misc) if isinstance(misc, Mapping) else MiscFile()
    steps = misc_file.steps
    lr_ev = lr_evidence(LRSweepFile.coerce(lr), hp_kind, steps)
    bs_ev = batch_evidence(BatchSweepFile.coerce(bs), BatchSampledFile.coerce(bs_sampled), hp_kind, steps)
    evidence = {"lr_start": lr_ev, "lr_end": lr_ev, "batch_size": bs_ev}
    sched = epochs_evidence(hp_kind, steps.schedule, misc_file.settings or {}, steps.length)
    evidence["cycle_size_epochs"] = sched
    evidence["epochs"] = sched
    ids = np.asarray((results or {}).get("trial_ids", np.zeros(0)), dtype=np.int64)
    keys = run.keys
    metrics = final_metrics(keys)
    finals = {key: np.asarray((results or {}).get(key, np.zeros(0)), dtype=np.float64) for key, _, _ in metrics}
    spaces = {key: space_of(key, finals[key]) for key in finals}
    stats = {key: describe(finals[key], ids, mode, spaces[key]) for key, _label, mode in metrics}
    seconds = describe(np.asarray((results or {}).get("seconds", np.zeros(0)), dtype=np.float64), ids, "min")
    counts = {"completed": 0, "diverged": 0, "failed": 0}
    problems = []
    for rec in sorted(trials, key=lambda r: r.trial_id):
        counts[rec.status] = counts.get(rec.status, 0) + 1
        if not rec.completed:
            problems.append(Problem(rec.trial_id, rec.status, _reason(rec)))
    planned = run.planned_trials
    counts["planned"] = len(planned)
    counts["unfinished"] = len(set(planned) - {r.trial_id for r in trials})
    dead = dead_trials(throughtimes, trials)
    return SummaryInfo(
        title=title, created=run.created, state=_state_after_analysis(run.state),
        versions=dict(run.versions), accuracy_style=run.accuracy_style,
        hp_kind=hp_kind, final_hp=hp, evidence=evidence, stats=stats, seconds=seconds, counts=counts,
        problems=tuple(problems), misc=misc, keys=keys, metrics=metrics, outcomes=outcomes_info(run, trials),
        lr_how=lr_how(steps),
        schedule_step=steps.schedule,
        rising=rising_trials(throughtimes),
        dead=dead,
        peaked=peaked_trials(throughtimes, dead),
        spaces=spaces,
    )


def _state_after_analysis(state: str) -> str:
    """The run's state once this analysis is written: ``collated`` means train() is analysing it
    now and marks it ``complete`` next (whatever the analysis does), so the report says so."""
    return "complete" if state == "collated" else state


def interval_note(spaces: Mapping[str, Space]) -> str:
    """How the final metrics' intervals were computed (:func:`.stats.space_of` of each key)."""
    losses = {v for k, v in spaces.items() if k.startswith("final_loss_")}
    perfs = {v for k, v in spaces.items() if k.startswith("final_perf_")}
    loss = ("the losses' are computed on log values (never <= 0)" if losses <= {"log"} else
            "the losses' are computed on the values themselves (a loss at or below zero has no log)")
    perf = "the perf's clipped to [0, 1]" if perfs <= {"unit"} else "the perf's not clipped (it passes 1)"
    return f"Intervals: {loss}, {perf}."


def _perf_name(info: SummaryInfo) -> str:
    """The perf's name, with its form below zero where a final loss went there (``info.spaces``)."""
    below_zero = any(v != "log" for k, v in (info.spaces or {}).items() if k.startswith("final_loss_"))
    return perf_label(info.accuracy_style, below_zero)


def _metric_label(key: str, label: str, info: SummaryInfo) -> str:
    if key.startswith("final_perf_"):
        return f"{label} ({_perf_name(info)})"
    return label


def _misc_lines(obj: Any, depth: int = 0) -> list[str]:
    pad = "  " * depth
    if isinstance(obj, Mapping):
        lines = []
        for k, v in obj.items():
            if isinstance(v, (Mapping, list)) and v and not _is_flat_list(v):
                lines.append(f"{pad}- **{k}**:")
                lines.extend(_misc_lines(v, depth + 1))
            else:
                lines.append(f"{pad}- **{k}**: {_short(v)}")
        return lines
    if isinstance(obj, list):
        lines = []
        for i, v in enumerate(obj):
            if isinstance(v, (Mapping, list)) and v and not _is_flat_list(v):
                lines.append(f"{pad}- [{i}]:")
                lines.extend(_misc_lines(v, depth + 1))
            else:
                lines.append(f"{pad}- {_short(v)}")
        return lines
    return [f"{pad}- {_short(obj)}"]


def _is_flat_list(v: Any) -> bool:
    return isinstance(v, list) and all(not isinstance(x, (Mapping, list)) for x in v)


def _short(v: Any) -> str:
    if isinstance(v, float):
        return fmt(v, 4)
    if isinstance(v, list):
        items = [_short(x) for x in v[:12]]
        more = f", … ({len(v)} values)" if len(v) > 12 else ""
        return "[" + ", ".join(items) + more + "]"
    if v is None:
        return "null"
    return str(v)


def schedule_line(hp: Mapping[str, Any]) -> str:
    """The schedule the trials used, in words (:func:`~ignite_seg.engine.schedule_text.describe_schedule`);
    a record too incomplete to rebuild the recipe says its epochs and cycle length."""
    try:
        return describe_schedule(hp)
    except (IgniteSegError, TypeError, ValueError):
        cyc = hp.get("cycle_size_epochs")
        return f"{hp['epochs']} epochs" + (f", cycles of {_short(cyc)} epochs" if cyc else "")


def decision_lines(info: SummaryInfo) -> list[str]:
    """The run's outcome in a few bullets: LR range, batch size, schedule, final perf, failures."""
    hp, c = info.final_hp, info.counts
    out = []
    if "lr_start" in hp and "lr_end" in hp:
        lo, hi = _short(hp["lr_start"]), _short(hp["lr_end"])
        schedule = hp.get("schedule", "triangular")
        start = "" if schedule in PEAK_ONLY else f", lr_start {lo}"  # those schedules do not read it
        span = f"cycles between {lo} and {hi}" if schedule == "triangular" else \
            f"peak (lr_end) {hi}{start} on the {schedule} schedule" + peak_in_range(info.schedule_step)
        how = info.lr_how if info.hp_kind != "fixed" and info.lr_how else None
        out.append(f"- **learning rate**: {span} ({info.hp_kind}{f': {how}' if how else ''})")
    if "batch_size" in hp:
        given = [e for e in info.evidence.get("batch_size", ()) if e.startswith(("chosen", "given"))]
        given = [re.sub(rf"^chosen: {hp['batch_size']} \((.*)\)$", r"\1", w) for w in given]
        out.append(f"- **batch size**: {hp['batch_size']}" + (f" — {given[0]}" if given else ""))
    if "epochs" in hp:
        epochs_why = info.evidence.get("epochs", ("",))[0]  # "21 epochs: about ..." when it says how
        why = re.sub(r"^\d+ epochs: ", "", epochs_why) if re.match(r"^\d+ epochs: ", epochs_why) else ""
        out.append(f"- **schedule**: {schedule_line(hp)}" + (f" — {why}" if why else ""))
    out += _guard_lines(info.misc)
    out += _length_lines(info.misc)
    s = info.stats["final_perf_val"]
    label = f"final {info.keys.label('val')} {_perf_name(info)}"
    if s.n > 1:
        out.append(f"- **{label}**: mean {fmt(s.mean, 4)}, 95% CI [{fmt(s.ci_low, 4)}, {fmt(s.ci_high, 4)}] "
                   f"over {s.n} trials (best {fmt(s.best, 4)})")
    elif s.n == 1:
        out.append(f"- **{label}**: {fmt(s.mean, 4)} (one trial: no interval)")
    out += outcome_lines(info.outcomes, _best_label(info))
    out += rise_lines(info.rising)
    out += dead_lines(info.dead)
    out += peak_lines(info.peaked)
    bad = c.get("diverged", 0) + c.get("failed", 0) + c.get("unfinished", 0)
    out.append(f"- **failures**: {c.get('diverged', 0)} diverged, {c.get('failed', 0)} failed"
               + (f", {c['unfinished']} unfinished" if c.get("unfinished") else "")
               + (" (see below)" if bad else ""))
    return out


def _guard_lines(misc: Any) -> list[str]:
    """The recipe check's line (``misc.json`` ``steps.guard``): its verdict and which rule decided."""
    g = MiscFile.from_json(misc).steps.guard if isinstance(misc, Mapping) else None
    if g is None or not g.attempts:
        return []
    last = g.attempts[-1]
    return [f"- **recipe check**: {len(g.attempts)} short run(s) of {g.steps} steps x {g.repeats}; {g.decided_by}"
            f"{' — a fallback' if g.fallback else ''}; last: lr {_short(last.lr_start)} -> {_short(last.lr_end)}, "
            f"{last.verdict}"]


def _length_lines(misc: Any) -> list[str]:
    """The length check's line (``misc.json`` ``steps.length``): the epochs it left and why."""
    g = MiscFile.from_json(misc).steps.length if isinstance(misc, Mapping) else None
    if g is None or not g.decided_by:
        return []
    runs = f"{g.runs} full-length run(s) scoring a held-out slice after every epoch; " if g.runs else ""
    if g.cool_perfs:
        runs += f"{len(g.cool_perfs)} of the recipe at its learning rates / {_short(g.cool_factor)}; "
    if g.short_perfs:
        runs += f"{len(g.short_perfs)} of the recipe compressed to {g.short_epochs} epochs; "
    change = (f"{g.epochs} epochs kept, learning rates / {_short(g.cool_factor)}" if g.cool_won
              else f"{g.epochs_planned} -> {g.epochs} epochs (compressed)" if g.short_won
              else f"{g.epochs_planned} -> {g.epochs} epochs" if g.cut else f"{g.epochs} epochs kept")
    return [f"- **length check**: {runs}{change} — {g.decided_by}"]


def _best_label(info: SummaryInfo) -> str:
    return best_label(info.outcomes.metric, info.keys, info.accuracy_style, info.outcomes.parts)


def render_markdown(info: SummaryInfo) -> str:
    """``summary.md``: a page a person reads first."""
    c = info.counts
    lines = [f"# ignite_seg run: {info.title}", ""]
    lines.append(f"- state: **{info.state}**" + (f", created {info.created}" if info.created else ""))
    lines.append(f"- perf: {_perf_name(info)} (`accuracy_style={info.accuracy_style}`),"
                 " higher is better")
    lines.append(f"- hyperparameters: **{info.hp_kind}**")
    lines.append(f"- trials: {c.get('completed', 0)} completed, {c.get('diverged', 0)} diverged, "
                 f"{c.get('failed', 0)} failed" + (f", {c['unfinished']} unfinished" if c.get("unfinished") else ""))
    if info.keys != ResultKeys():
        sets = ", ".join([f"{info.keys.val_names[0]} (primary: `val` in the keys)",
                          *(f"{n} (`val_{n}`)" for n in info.keys.val_names[1:])])
        lines.append(f"- validation sets: {sets}")
        if info.keys.metric_names:
            lines.append("- custom metrics: " + ", ".join(f"{m} ({'higher' if info.keys.mode(m) == 'max' else 'lower'}"
                                                         " is better)" for m in info.keys.metric_names))
    if info.versions:
        lines.append("- versions: " + ", ".join(f"{k} {v}" for k, v in info.versions.items()))
    lines += ["", "## Decisions", "", *decision_lines(info)]
    table = outcome_table(info.outcomes, _best_label(info))
    lines += ["", *table] if table else []
    lines += ["", "## Chosen hyperparameters", "", "| hyperparameter | value | evidence |", "|---|---|---|"]
    keys = [k for k in HP_ORDER if k in info.final_hp] + [k for k in info.final_hp if k not in HP_ORDER]
    for k in keys:
        v = info.final_hp[k]
        ev = "<br>".join(info.evidence.get(k, ("",)))
        lines.append(f"| `{k}` | {_short(v)} | {ev} |")
    lines += ["", "## Final metrics across completed trials", ""]
    n = info.stats["final_perf_val"].n
    if n == 0:
        lines.append("No trial completed, so there are no final metrics.")
    else:
        lines += ["| metric | N | mean | std | 95% CI of the mean | best (trial) | worst (trial) |",
                  "|---|---|---|---|---|---|---|"]
        for key, label, _mode in info.metrics:
            s = info.stats[key]
            ci = f"[{fmt(s.ci_low, 4)}, {fmt(s.ci_high, 4)}]" if s.n > 1 else "n/a (one trial)"
            lines.append(f"| {_metric_label(key, label, info)} | {s.n} | {fmt(s.mean, 4)} | "
                         f"{fmt(s.std, 3)} | {ci} | {fmt(s.best, 4)} ({s.best_trial}) | "
                         f"{fmt(s.worst, 4)} ({s.worst_trial}) |")
        lines += ["", interval_note(info.spaces or {})]
        s = info.seconds
        if s.n:
            lines += ["", f"Training time per trial: mean {fmt(s.mean)} s, fastest {fmt(s.best)} s, "
                      f"slowest {fmt(s.worst)} s."]
    lines += ["", "## Failed and diverged trials", ""]
    if info.problems:
        lines += ["| trial | status | why |", "|---|---|---|"]
        for p in info.problems:
            reason = p.reason.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {p.trial_id} | {p.status} | {reason} |")
        lines += ["", "Full tracebacks: `trials/<i>/error.txt`."]
    else:
        lines.append("None.")
    if info.misc:
        lines += ["", f"## Tuner decisions (hparams/{MISC_JSON})", ""] + _misc_lines(info.misc)
    return "\n".join(lines) + "\n"


def summary_json(info: SummaryInfo) -> dict[str, Any]:
    """``summary.json``: the same facts for programs (NaN become null when written)."""

    def stat(s: Stats) -> dict[str, Any]:
        d = s.to_dict()
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    return {
        "title": info.title,
        "created": info.created,
        "state": info.state,
        "versions": info.versions,
        "accuracy_style": info.accuracy_style,
        "hyperparameters": {"kind": info.hp_kind, "final": info.final_hp,
                            "evidence": {k: list(v) for k, v in info.evidence.items()}},
        "trials": {
            "counts": info.counts,
            "val_names": list(info.keys.val_names),
            "metric_names": list(info.keys.metric_names),
            "final": {key: stat(info.stats[key]) for key, _l, _m in info.metrics},
            "seconds": stat(info.seconds),
            "problems": [p._asdict() for p in info.problems],
            "train_loss_rose": [r._asdict() for r in info.rising],
            "train_loss_at_constant": [d._asdict() for d in info.dead],
            "val_perf_peaked_early": [p._asdict() for p in info.peaked],
            **outcomes_json(info.outcomes),
        },
        "tuner": info.misc,
    }

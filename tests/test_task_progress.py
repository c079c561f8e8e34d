"""Progress inside a running task: reported by the worker, shown by the runner, and a task that
reports progress is not taken for a hung one (issue 25: a sweep repeat of 20 minutes drew
"no task has finished for ... trial_timeout" every minute)."""
from __future__ import annotations

import logging

from progress_tasks import slow

from ignite_seg.runtime import tasks as execution
from ignite_seg.runtime.tasks import TaskRunner
from ignite_seg.runtime.workers import report_progress


def _run(monkeypatch, caplog, todo):
    monkeypatch.setattr(execution, "STALL_WARNING_S", 0.6)
    monkeypatch.setattr(execution, "POLL_S", 0.1)
    seen: list[dict] = []
    with TaskRunner(2) as runner:
        # the workers' start-up (importing torch: seconds on a busy machine) is not what is tested
        assert list(runner.map_unordered(slow, [("silent", 0.0, 1)] * 2)) == ["silent"] * 2
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ignite_seg"):
            out = list(runner.map_unordered(slow, todo, key=lambda t: t[0],
                                            on_progress=lambda p: seen.append(dict(p))))
    return out, seen


def test_a_slow_task_that_reports_progress_draws_no_hang_warning_and_shows_its_steps(monkeypatch, caplog):
    out, seen = _run(monkeypatch, caplog, [("progress", 2.5, 50)])
    assert out == ["progress"]
    assert "no task has finished" not in caplog.text
    steps = [p["progress"] for p in seen if "progress" in p]
    assert len(steps) >= 3 and all(total == 50 for _, total in steps)
    done = [d for d, _ in steps]
    assert done == sorted(done) and 0 < done[0] < done[-1] <= 50


def test_a_silent_task_still_draws_the_warning_naming_only_it(monkeypatch, caplog):
    out, seen = _run(monkeypatch, caplog, [("silent", 2.5, 50), ("progress", 2.5, 50)])
    assert sorted(out) == ["progress", "silent"]
    warnings = [r.getMessage() for r in caplog.records if "no task has finished" in r.getMessage()]
    assert warnings and all("(silent)" in w and "1 other(s) are making progress" in w for w in warnings)
    assert all(set(p) <= {"progress"} for p in seen)  # the silent task never shows steps


def test_report_progress_outside_a_pool_task_is_a_no_op():
    report_progress(3, 10)  # the caller's own process: nothing to report to, nothing raised


def test_an_engine_in_a_pool_task_reports_its_steps_and_one_outside_attaches_nothing(monkeypatch, caplog):
    from progress_tasks import engine_steps

    from ignite_seg.engine.handlers import REPORT_EVERY_STEPS

    monkeypatch.setattr(execution, "STALL_WARNING_S", 0.6)
    monkeypatch.setattr(execution, "POLL_S", 0.1)
    seen: list[dict] = []
    with TaskRunner(1) as runner:
        out = list(runner.map_unordered(engine_steps, [(2.0, 100)], key=lambda t: "engine", on_progress=lambda p: seen.append(dict(p))))
    assert out == [1]  # one handler, though report_steps was called twice
    steps = [p["engine"] for p in seen if "engine" in p]
    assert len(steps) >= 3 and all(total == 100 for _, total in steps)
    assert all(d % REPORT_EVERY_STEPS == 0 or d == 100 for d, _ in steps)
    assert "no task has finished" not in caplog.text
    assert engine_steps((0.0, 5)) == 0  # the caller's own process: no handler paid on every step

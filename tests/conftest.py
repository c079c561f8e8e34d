from __future__ import annotations

import pytest
from helpers import FAST_HP

import ignite_seg

#: The slow part of the suite, run by CI and by ``pytest --all`` (or ``pytest -m slow`` alone): fault
#: injection (kills at every point, timeouts, crash recovery) and trials on several processes. Each
#: starts and kills many real processes; together they were about 60% of the suite's time. The
#: ignite-simple example shapes (whole scripts, sweeps of several points) too.
SLOW = ("tests/reliability/", "tests/test_distributed.py", "tests/test_distributed_resume.py",
        "tests/test_checkpoints.py", "tests/test_real_data.py", "tests/test_compat_examples.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all", action="store_true", help="run the slow tests too (fault injection, multi-process "
                     "trials), as CI does; `-m slow` runs them alone")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tests; leave them out unless ``--all`` or a ``-m`` expression asks for them."""
    for item in items:
        if any(part in item.nodeid for part in SLOW):
            item.add_marker(pytest.mark.slow)
    if config.getoption("--all") or config.option.markexpr:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("--all") or config.option.markexpr:
        return None
    return "the slow tests (fault injection, multi-process trials) are left out: `pytest --all` runs everything"


@pytest.fixture
def fast_hp() -> ignite_seg.FixedHyperparameters:
    return FAST_HP


@pytest.fixture
def run_kwargs(tmp_path):
    """Keyword arguments of a small, fast, seeded train() into tmp_path."""
    return dict(
        folder=tmp_path / "current",
        history_folder=tmp_path / "history",
        hyperparameters=FAST_HP,
        analysis="none",
        allow_later_analysis_up_to="none",
        trials=2,
        cores=2,
        seed=0,
    )

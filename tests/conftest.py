from __future__ import annotations

import pytest
from helpers import FAST_HP

import ignite_seg


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

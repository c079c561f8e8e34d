from __future__ import annotations

import pytest

import ignite_seg

FAST_HP = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=3)
CE = ("torch.nn", "CrossEntropyLoss", (), {})


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

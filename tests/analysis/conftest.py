"""A tiny real run (trained once per session) that the analysis tests copy and analyse."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_run_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import ignite_seg

    folder = tmp_path_factory.mktemp("analysis") / "tiny" / "current"
    ignite_seg.train(
        ("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), ("torch.nn", "CrossEntropyLoss", (), {}),
        folder=folder,
        hyperparameters=ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16,
                                                        cycle_size_epochs=2, epochs=3),
        analysis="none", allow_later_analysis_up_to="video", trials=3, trials_strict=True, cores=2, seed=0,
        snapshots_per_epoch=4,
    )
    return folder


@pytest.fixture()
def tiny_run(tiny_run_master: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny run (tests may add files to it or analyse it)."""
    dest = tmp_path / "tiny" / "current"
    shutil.copytree(tiny_run_master, dest)
    return dest

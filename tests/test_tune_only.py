"""ignite_seg.tune(): the tuner on its own, through train()'s pipeline, on a task with a known range."""
from __future__ import annotations

import json
import logging

import pytest
import torch
from helpers import FAST_HP

import ignite_seg
from ignite_seg import ConfigError

LINEAR = ("tasks", "linear", (), {})
MSE = ("torch.nn", "MSELoss", (), {})
N_TRAIN = 512
REGRESSION = ("tasks", "regression", (), {"n_train": N_TRAIN, "n_val": 64})


def _divergence_bound() -> float:
    """2 / lambda_max of the MSE's Hessian (2/n [X 1]^T [X 1]) on the training set: SGD's stable bound."""
    import tasks

    train, _ = tasks.regression(n_train=N_TRAIN, n_val=64)
    x = torch.cat([train.tensors[0], torch.ones(N_TRAIN, 1)], dim=1)
    return 2.0 / float(torch.linalg.eigvalsh(2.0 / N_TRAIN * x.T @ x).max())


def test_tune_returns_the_recipe_and_its_evidence_with_a_range_below_the_divergence_bound(tmp_path, caplog):
    folder = tmp_path / "tuned"
    with caplog.at_level(logging.INFO, logger="ignite_seg"):
        res = ignite_seg.tune(LINEAR, REGRESSION, MSE, folder=folder, hyperparameters="fastest",
                              accuracy_style="inv-loss", cores=2, seed=0)
    assert "trial(s)" not in caplog.text  # no "running 0 trial(s)", no "0 completed trial(s) collated"
    bound = _divergence_bound()
    lo, hi = res.lr_range
    assert bound / 10 < hi < bound and lo < hi
    assert res.lr_range_batch_size == ignite_seg.get_preset("fastest").initial_batch_size
    assert res.batch_size == res.hyperparameters.batch_size and res.batch_reason
    final = json.loads((folder / "hparams" / "final.json").read_text())
    assert ignite_seg.FixedHyperparameters.from_dict(final) == res.hyperparameters
    assert {"final.json", "misc.json", "lr_vs_perf.npz"} <= set(res.paths)
    assert all(p.is_file() for p in res.paths.values())
    run = json.loads((folder / "run.json").read_text())
    assert run["state"] == "complete" and not (folder / "trials").exists()
    assert "lr" in str(res) and "FixedHyperparameters" not in str(res)
    ignite_seg.analyze(folder, analysis="images")
    assert (folder / "analysis" / "lr_sweep.png").is_file()
    # trials can be added later with the tuned recipe
    later = ignite_seg.train(LINEAR, REGRESSION, MSE, folder=folder, hyperparameters="fastest",
                             accuracy_style="inv-loss", analysis="none", trials=1, trials_strict=True,
                             is_continuation=True, cores=1)
    assert later.hyperparameters == res.hyperparameters and len(later.completed) == 1


def test_tune_refuses_a_fixed_recipe(tmp_path):
    with pytest.raises(ConfigError, match="nothing to tune"):
        ignite_seg.tune(LINEAR, REGRESSION, MSE, folder=tmp_path / "t", hyperparameters=FAST_HP)
    assert not (tmp_path / "t").exists()

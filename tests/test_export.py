"""``python -m ignite_seg.export FOLDER tensorboard OUT``: the events read back equal the run's files."""
from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pytest
import torch
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg import export
from ignite_seg.storage.run_folder import RunFolder
from ignite_seg.storage.schemas import LR_NPZ, LRSweepFile

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData  # noqa: E402

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})


def _events(path):
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    return acc


def _scalars(acc, tag):
    events = acc.Scalars(tag)
    return [e.step for e in events], np.array([e.value for e in events])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A 2-trial run with EMA (model_raw.pt) and a hand-written LR sweep file with a stopped repeat."""
    tmp = tmp_path_factory.mktemp("export")
    hp = dataclasses.replace(FAST_HP, ema_decay=0.9, schedule="one-cycle", warmup_epochs=0.5)
    ignite_seg.train(MLP, BLOBS, CE, folder=tmp / "run", history_folder=tmp / "history", hyperparameters=hp,
                     analysis="none", allow_later_analysis_up_to="none", trials=2, cores=2, seed=0)
    sweep = LRSweepFile(lrs=np.geomspace(1e-3, 1.0, 5),
                        losses=np.array([[2.0, 1.5, 1.0, 0.8, 3.0], [2.1, 1.4, 0.9, np.nan, np.nan]]))
    sweep.write(RunFolder(tmp / "run").hparams / LR_NPZ)
    return tmp / "run"


def test_a_run_with_ema_keeps_the_raw_weights_and_its_recipe(run):
    final = json.loads((run / "hparams" / "final.json").read_text())
    assert (final["schedule"], final["warmup_epochs"], final["ema_decay"], final["betas"]) == ("one-cycle", 0.5, 0.9,
                                                                                             [0.9, 0.999])
    for i in (0, 1):
        raw = torch.load(run / "trials" / str(i) / "model_raw.pt", weights_only=True)
        ema = torch.load(run / "trials" / str(i) / "model.pt", weights_only=True)
        assert raw.keys() == ema.keys() and any(not torch.equal(raw[k], ema[k]) for k in raw)


def test_export_writes_curves_sweep_and_hparams_equal_to_the_files(run, tmp_path):
    out = tmp_path / "tb"
    assert export.main([str(run), "tensorboard", str(out)]) == 0
    rf = RunFolder(run)
    for i in (0, 1):
        acc = _events(out / f"trial_{i}")
        curves = rf.read_throughtime(i)
        assert set(acc.Tags()["scalars"]) == {f"throughtime/{k}" for k in curves}
        for key, values in curves.items():
            steps, got = _scalars(acc, f"throughtime/{key}")
            assert steps == list(range(values.size))
            np.testing.assert_allclose(got, values.astype(np.float32), rtol=1e-6)
    acc = _events(out / "lr_sweep")
    steps, lrs = _scalars(acc, "lr_sweep/lr")
    np.testing.assert_allclose(lrs, np.geomspace(1e-3, 1.0, 5).astype(np.float32), rtol=1e-6)
    assert _scalars(acc, "lr_sweep/loss/repeat_0")[1].tolist() == [2.0, 1.5, 1.0, 0.800000011920929, 3.0]
    steps, values = _scalars(acc, "lr_sweep/loss/repeat_1")
    assert steps == [0, 1, 2] and np.allclose(values, [2.1, 1.4, 0.9])  # stopped: the NaN steps are left out
    final = json.loads((run / "hparams" / "final.json").read_text())
    for i in (0, 1):
        result = rf.read_result(i)
        assert result is not None
        acc = _events(out / "hparams" / f"trial_{i}")
        start = HParamsPluginData.FromString(acc.PluginTagToContent("hparams")["_hparams_/session_start_info"])
        recorded = start.session_start_info.hparams
        assert recorded["lr_start"].number_value == pytest.approx(final["lr_start"])
        assert recorded["schedule"].string_value == "one-cycle" and recorded["trial"].number_value == i
        assert recorded["betas"].string_value == "[0.9, 0.999]"
        np.testing.assert_allclose(_scalars(acc, "hparam/loss_val")[1], [result.metrics["loss_val"]], rtol=1e-6)
        np.testing.assert_allclose(_scalars(acc, "hparam/perf_val")[1], [result.metrics["perf_val"]], rtol=1e-6)


def test_without_tensorboard_the_error_names_the_extra(run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    with pytest.raises(export.MissingExtraError, match=r"pip install ignite_seg\[tensorboard\]"):
        export.export_tensorboard(run, tmp_path / "tb")
    assert export.main([str(run), "tensorboard", str(tmp_path / "tb")]) == 2


def test_a_folder_that_is_no_run_is_refused(tmp_path):
    assert export.main([str(tmp_path), "tensorboard", str(tmp_path / "tb")]) == 2

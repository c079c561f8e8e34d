"""ignite-simple's example shapes run with the import alias (own copies in tests/compat/, synthetic data)."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import ignite_seg
import ignite_seg as ignite_simple
from ignite_seg.storage.sweep_file import SweepRecord

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _script(name: str, *args: str, env: dict | None = None, cwd: Path) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {}),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(HERE / "compat" / name), *args], env=full, cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


HELPER_FLAGS = ("--hparams", "fastest", "--trials", "2", "--strict_trials", "--cores", "2", "--analysis", "text",
                "--analysis_up_to", "text")


def test_mnist_shape_pair_model_and_helper_handle(tmp_path):
    _script("mnist_like.py", "--folder", str(tmp_path / "out"), *HELPER_FLAGS, cwd=tmp_path)
    run = tmp_path / "out" / "current"
    assert json.loads((run / "run.json").read_text())["state"] == "complete"
    assert (run / "hparams" / "lr_vs_perf.npz").is_file()  # --hparams fastest: tuned
    results = [json.loads((run / "trials" / str(i) / "result.json").read_text()) for i in range(2)]
    assert all(r["status"] == "completed" and r["metrics"]["perf_val"] > 0.8 for r in results)  # the classifier learns
    sd = torch.load(run / "trials" / "0" / "model.pt", weights_only=True)
    assert set(sd) == {"0.weight", "0.bias", "2.weight", "2.bias"}  # the stripped model was trained
    assert (run / "analysis" / "summary.md").is_file()
    # --reanalyze on the same folder, and the default folder out/<script name>
    _script("mnist_like.py", "--folder", str(tmp_path / "out"), "--reanalyze", "--analysis", "images-min",
            cwd=tmp_path)
    assert any((run / "analysis").glob("*.png"))


def test_delta_to_dir_shape_cached_subsets_load_in_the_workers(tmp_path):
    env = {"COMPAT_CACHE": str(tmp_path / "delta_to_dir.pt")}
    flags = (*HELPER_FLAGS[:2], "--trials", "1", "--strict_trials", "--cores", "2", "--analysis", "none")
    _script("delta_to_dir_like.py", "--folder", str(tmp_path / "a"), *flags, env=env, cwd=tmp_path)
    assert (tmp_path / "delta_to_dir.pt").is_file()
    # second run: the dataset comes from torch.load of the cached (Subset, Subset), here and in the workers
    _script("delta_to_dir_like.py", "--folder", str(tmp_path / "b"), *flags, env=env, cwd=tmp_path)
    res = json.loads((tmp_path / "b" / "current" / "trials" / "0" / "result.json").read_text())
    assert res["status"] == "completed" and res["metrics"]["perf_val"] > 0.7


def test_nonlins_shape_sweeper_result_tuples(tmp_path, monkeypatch):
    proc = _script("nonlins_like.py", str(tmp_path / "sweep"), "fastest", cwd=tmp_path)
    out = json.loads(proc.stdout.split("RESULT ", 1)[1].splitlines()[0])
    assert out["labels"] == ["Tanh", "ReLU"]
    assert all(v > 0.8 for v in out["val"]) and all(len(v) == 2 for v in out["loss_val"])
    rec = SweepRecord.read(tmp_path / "sweep" / "sweep.npz")
    assert rec.lr_start.tolist() == out["lr"] and rec.batch_size.tolist() == out["bs"]
    assert (tmp_path / "sweep" / "analysis" / "sweep_perf.png").is_file()
    # ignite-simple's scripts replot from the pickled list (examples/seqmatch_hidden.py's replot())
    with open(tmp_path / "sweep" / "points" / "funcres.pt", "rb") as f:
        res = pickle.load(f)  # noqa: S301 (our own file, as the example reads it)
    assert [pt[0][0] for pt in res] == out["labels"] and [pt[7].tolist() for pt in res] == out["loss_val"]
    # calling the sweeper again on the folder continues it (funcres.pt beside the points is ours): same rows
    monkeypatch.syspath_prepend(str(HERE / "compat"))
    from ignite_seg.gen_sweep import sweeper
    from ignite_seg.gen_sweep.param_selectors import FixedSweep

    again = sweeper.sweep("nonlins_like", FixedSweep.with_fixed_trials([("Tanh",), ("ReLU",)], 2), 2, "fastest",
                          tmp_path / "sweep")
    assert [pt[7].tolist() for pt in again] == out["loss_val"] and [pt[1] for pt in again] == out["lr"]


def test_hyperparams_factories_return_settings_a_script_changes():
    hparams = ignite_simple.hyperparams.slow()
    hparams.lr_sweep_len = 20.
    hparams.batch_pts = 3
    frozen = hparams.to_settings()
    assert frozen.lr_sweep_len == 20.0 and frozen.batch_pts == 3
    assert frozen == ignite_seg.get_preset("slow").__class__(**{**ignite_seg.get_preset("slow").__dict__,
                                                                "lr_sweep_len": 20.0, "batch_pts": 3})
    assert ignite_simple.hyperparams.fastest().to_settings() == ignite_seg.get_preset("fastest")
    with pytest.warns(UserWarning, match="lr_width_only_gradients is an ignite-simple setting"):
        hparams.lr_width_only_gradients = True
    with pytest.raises(AttributeError, match="no field 'lr_sweep_length'"):
        hparams.lr_sweep_length = 3
    from ignite_seg.config.presets import resolve_hyperparameters

    assert resolve_hyperparameters(hparams) == hparams.to_settings()  # what train() uses


def test_utils_split_sizes_disjoint_and_reused(tmp_path):
    ds = torch.utils.data.TensorDataset(torch.arange(50).float(), torch.arange(50))
    tr, va = ignite_simple.utils.split(ds, 0.1, str(tmp_path / "idx"))
    assert len(tr) == 45 and len(va) == 5
    assert sorted(list(tr.indices) + list(va.indices)) == list(range(50))
    tr2, va2 = ignite_simple.utils.split(ds, 0.1, str(tmp_path / "idx"))
    assert va2.indices.tolist() == va.indices.tolist()  # the saved indices are reused
    torch.save((tr, va), tmp_path / "cache.pt")
    tr3, _ = torch.load(tmp_path / "cache.pt")  # weights_only default: allowed by ignite_seg.utils
    assert tr3.indices.tolist() == tr.indices.tolist()
    with pytest.raises(ValueError, match="ending in .npz"):
        ignite_simple.utils.split(ds, 0.1, str(tmp_path / "idx.txt"))


def failing_dataset():
    return ignite_seg.not_a_module_attribute.split  # an AttributeError raised inside the loader


def test_an_error_inside_a_loader_is_reported_as_raised_with_its_traceback(tmp_path):
    with pytest.raises(ignite_seg.ConfigError) as info:
        ignite_seg.train(("tasks", "mlp", (), {}), ("test_compat_examples", "failing_dataset", (), {}),
                         ("torch.nn", "CrossEntropyLoss", (), {}), folder=tmp_path / "r", analysis="none",
                         hyperparameters="fastest", cores=1)
    msg = str(info.value)
    assert "raised AttributeError" in msg and "cannot find" not in msg
    assert "failing_dataset" in msg and "test_compat_examples.py" in msg  # the loader's frame
    assert isinstance(info.value.__cause__, AttributeError)  # the traceback is kept


def pair_mlp():
    """ignite-simple's pair: (model with hidden outputs, stripped model), sharing parameters."""
    stripped = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    return torch.nn.ModuleList([stripped]), stripped


def test_pair_model_trains_the_stripped_one_and_load_model_accepts_it(tmp_path):
    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=1, epochs=2)
    res = ignite_seg.train(("test_compat_examples", "pair_mlp", (), {}), ("tasks", "blobs", (), {}),
                           ("torch.nn", "CrossEntropyLoss", (), {}), folder=tmp_path / "r", analysis="none",
                           allow_later_analysis_up_to="none", cores=1, hyperparameters=hp, seed=0)
    assert res.trials[0].status == "completed" and res.trials[0].perf_val > 0.8
    model = ignite_seg.load_model(tmp_path / "r", 0, model=("test_compat_examples", "pair_mlp", (), {}))
    assert isinstance(model, torch.nn.Sequential)


class _Waiting(ignite_simple.gen_sweep.param_selectors.ParamSelector):
    def has_more_trials(self):
        return True

    def get_next_trials(self):
        return None


def test_sweeper_refuses_selectors_it_cannot_run():
    from ignite_seg.gen_sweep.param_selectors import FixedSweep
    from ignite_seg.gen_sweep.sweeper import _selected

    assert _selected(FixedSweep.with_fixed_trials([("Tanh",), ("ReLU",)], 3)) == ([("Tanh",), ("ReLU",)], 3)
    with pytest.raises(ignite_seg.ConfigError, match="waits for results"):
        _selected(_Waiting())
    with pytest.raises(ignite_seg.ConfigError, match=r"different trial counts per point \(\[2, 3\]\)"):
        _selected(FixedSweep(((("a",), 2), (("b",), 3))))
    with pytest.raises(ignite_seg.ConfigError, match="names no point"):
        _selected(FixedSweep(()))

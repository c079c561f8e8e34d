"""Loader specs: tuples, callables, partials and the resolution of ``__main__``."""
from __future__ import annotations

import functools
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ignite_seg
from ignite_seg.config.specs import LoaderSpec, normalize_spec
from ignite_seg.runtime.checks import resolve_cores

ROOT = Path(__file__).resolve().parents[1]


def test_tuple_and_callable_specs_build_the_same_object():
    import tasks

    a = normalize_spec(("tasks", "mlp", (), {"n_hidden": 5}), "model_loader")
    b = normalize_spec(functools.partial(tasks.mlp, n_hidden=5), "model_loader")
    assert a.module == b.module == "tasks" and a.attr == b.attr == "mlp"
    assert b.kwargs == {"n_hidden": 5}
    assert a.build()[0].out_features == b.build()[0].out_features == 5
    c = normalize_spec(tasks.blobs, "dataset_loader")
    assert (c.module, c.attr, c.fn) == ("tasks", "blobs", None)


def test_spec_survives_pickle_and_json():
    spec = normalize_spec(("tasks", "mlp", (3,), {"n_out": 2}), "model_loader")
    again = LoaderSpec.from_json(spec.to_json())
    assert again == pickle.loads(pickle.dumps(spec)) == spec
    assert again.build()[0].in_features == 3


def test_resolve_cores():
    assert resolve_cores(3) == 3
    assert 1 <= resolve_cores("all") <= (os.cpu_count() or 1)


SCRIPT = '''
import sys
import torch
from torch import nn

def model():
    return nn.Linear(4, 3)

def dataset():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 4, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    d = torch.utils.data.TensorDataset(x, y)
    return d, d

if __name__ == "__main__":
    import ignite_seg
    hp = ignite_seg.FixedHyperparameters(lr_start=0.1, lr_end=0.2, batch_size=8, cycle_size_epochs=1, epochs=1)
    loaders = {"tuple": (("__main__", "model", (), {}), ("__main__", "dataset", (), {})),
               "callable": (model, dataset)}[sys.argv[1]]
    res = ignite_seg.train(*loaders, ("torch.nn", "CrossEntropyLoss", (), {}), folder=sys.argv[2],
                           hyperparameters=hp, analysis="none", trials=2, cores=2, seed=0)
    print("STATUSES", [t.status for t in res.trials])
    print("MODEL", type(ignite_seg.load_model(sys.argv[2], trial=1, trust_recipe=True)).__name__)
'''


@pytest.mark.parametrize("form", ["tuple", "callable"])
def test_main_module_loaders_run_in_workers_and_logs_show_without_config(tmp_path, form):
    script = tmp_path / "my_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(script), form, str(tmp_path / "run")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "STATUSES ['completed', 'completed']" in out.stdout
    assert "MODEL Linear" in out.stdout
    assert "[ignite_seg] running 2 trial(s)" in out.stderr  # INFO visible with no logging config
    run = (tmp_path / "run" / "run.json").read_text()
    assert '"module": "my_script"' in run


def test_main_without_a_script_file_is_a_clear_error(tmp_path):
    code = textwrap.dedent('''
        import ignite_seg
        try:
            ignite_seg.train(("__main__", "model", (), {}), ("tasks", "blobs", (), {}),
                             ("torch.nn", "CrossEntropyLoss", (), {}), folder="x", analysis="none")
        except ignite_seg.ConfigError as exc:
            print("ERROR", exc)
    ''')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert "ERROR model_loader refers to '__main__', but the main program is interactive" in out.stdout, out.stderr
    assert not (tmp_path / "x").exists()


def test_hyphenated_script_name_is_a_clear_error(tmp_path):
    script = tmp_path / "my-script.py"
    script.write_text(textwrap.dedent('''
        import ignite_seg
        def model(): pass
        try:
            ignite_seg.train(model, ("tasks", "blobs", (), {}), ("torch.nn", "CrossEntropyLoss", (), {}),
                             folder="x", analysis="none")
        except ignite_seg.ConfigError as exc:
            print("ERROR", exc)
    '''))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert "is not importable under a module name" in out.stdout, out.stderr
    assert "my_script" in out.stdout


def test_public_api_is_exported():
    for name in ("train", "analyze", "load_model", "FixedHyperparameters", "HyperparameterSettings",
                 "AnalysisSettings", "ConfigError", "IgniteSegError", "TrainResult"):
        assert name in ignite_seg.__all__ and hasattr(ignite_seg, name)


FINGERPRINT = '''
import json, sys
sys.path[:0] = sys.argv[1:3]
import numpy as np
import tasks
from ignite_seg.config.specs import normalize_spec
specs = [normalize_spec(("tasks", "mlp", (), {"tags": {"alpha", "beta", "gamma", "delta", "epsilon"}}), "m"),
         normalize_spec(tasks.TaggedBlobs({"alpha", "beta", "gamma", "delta", "epsilon"}), "d")]
print(json.dumps([s.fingerprint() for s in specs] + [specs[1].describe()]))
'''


def test_fingerprints_agree_across_processes_whatever_the_hash_seed():
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", FINGERPRINT, str(ROOT), str(ROOT / "tests")], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        outs.append(json.loads(out.stdout))
    assert outs[0] == outs[1]
    assert "0x" not in outs[0][2] and "TaggedBlobs instance" in outs[0][2]  # no address in the summary


def test_fingerprint_sees_every_element_and_run_json_stays_small():
    from ignite_seg.run_plan import _check_same_loader

    a = np.zeros((5000, 10))
    b = a.copy()
    b[2500, 5] = 1.0
    spec_a, spec_b = (LoaderSpec(module="tasks", attr="blobs", args=(x,)) for x in (a, b))
    assert spec_a.describe() == spec_b.describe()  # repr elides the middle of the arrays
    _check_same_loader("dataset", spec_a, spec_a.to_json())
    with pytest.raises(ignite_seg.ConfigError, match="(?s)dataset_loader is .* other data"):
        _check_same_loader("dataset", spec_b, spec_a.to_json())
    big = LoaderSpec(module="tasks", attr="blobs", args=(np.zeros(2_600_000),))  # 20 MB
    assert len(json.dumps(big.to_json())) < 2000
    assert big.to_json()["fingerprint"] != spec_a.to_json()["fingerprint"]


def test_a_recipe_is_described_as_its_call_is_written():
    from ignite_seg.config.specs import normalize_spec

    assert normalize_spec(("tasks", "mlp", (), {}), "model_loader").describe() == "tasks.mlp()"
    assert normalize_spec(("tasks", "mlp", (8,), {"n_out": 3}), "model_loader").describe() == "tasks.mlp(8, n_out=3)"
    assert normalize_spec(("torch.nn", "MSELoss", (), {"reduction": "sum"}), "loss_loader").describe() == \
        "torch.nn.MSELoss(reduction='sum')"


def test_a_folder_of_ignite_seg_0_1_recorded_its_recipes_in_the_old_form_and_still_continues():
    from ignite_seg import ConfigError
    from ignite_seg.config.specs import normalize_spec
    from ignite_seg.run_plan import _check_same_loader

    spec = normalize_spec(("tasks", "mlp", (8,), {"n_out": 3}), "model_loader")
    _check_same_loader("model", spec, {"describe": "tasks.mlp(*(8,), **{'n_out': 3})"})  # no fingerprint then
    with pytest.raises(ConfigError, match="another recipe"):
        _check_same_loader("model", spec, {"describe": "tasks.mlp(*(8,), **{'n_out': 4})"})

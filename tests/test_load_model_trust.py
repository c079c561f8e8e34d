"""Loading a folder never runs code recorded in it unless the caller says it trusts the folder."""
from __future__ import annotations

import base64
import json
import os
import pickle
import shutil

import pytest
import torch
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg import ConfigError

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})


class _RunsOnUnpickle:
    """A pickle payload that runs a shell command the moment it is unpickled."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trust") / "current"
    ignite_seg.train(MLP, BLOBS, CE, folder=folder, hyperparameters=FAST_HP, analysis="none",
                     allow_later_analysis_up_to="text", trials=1, cores=1, seed=0)
    return folder


def _tampered(run_folder, tmp_path, payload_for):
    """A copy of the run whose recorded loaders are replaced by ``payload_for(name)`` pickles."""
    folder = tmp_path / "tampered"
    shutil.copytree(run_folder, folder)
    run = json.loads((folder / "run.json").read_text())
    for name, rec in run["loaders"].items():
        rec["pickle"] = base64.b64encode(pickle.dumps(payload_for(name))).decode("ascii")
    (folder / "run.json").write_text(json.dumps(run))
    return folder


def test_a_recorded_loader_is_never_called_without_trust(run_folder, tmp_path):
    pwned = tmp_path / "pwned"
    folder = _tampered(run_folder, tmp_path, lambda name: ("os", "system", (f"touch {pwned}",), {}, None))
    with pytest.raises(ConfigError, match=r"Pass model=.*trust_recipe=True"):
        ignite_seg.load_model(folder)
    assert not pwned.exists()


def test_a_recorded_pickle_is_never_loaded_by_load_model_or_the_analysis(run_folder, tmp_path):
    pwned = tmp_path / "pwned"
    folder = _tampered(run_folder, tmp_path, lambda name: _RunsOnUnpickle(f"touch {pwned}-{name}"))
    model = ignite_seg.load_model(folder, 0, model=MLP)  # the caller's own recipe: no recorded code
    assert isinstance(model, torch.nn.Module)
    with pytest.raises(ConfigError, match="trust_recipe"):
        ignite_seg.load_model(folder, 0)
    ignite_seg.analyze(folder, analysis="text", cores=1)
    assert (folder / "analysis" / "summary.md").is_file()
    assert list(tmp_path.glob("pwned*")) == []


def test_model_argument_and_trusted_recipe_load_the_same_weights(run_folder):
    trusted = ignite_seg.load_model(run_folder, 0, trust_recipe=True)
    from_spec = ignite_seg.load_model(run_folder, 0, model=MLP)
    instance = ignite_seg.load_model(run_folder, trial=0, model=__import__("tasks").mlp())
    for other in (from_spec, instance):
        for a, b in zip(trusted.state_dict().values(), other.state_dict().values()):
            assert torch.equal(a, b)
    weights = torch.load(run_folder / "trials" / "0" / "model.pt", weights_only=True)
    assert torch.equal(instance.state_dict()["0.weight"], weights["0.weight"])

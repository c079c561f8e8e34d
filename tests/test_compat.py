"""ignite-simple's call shape, tune-only runs, and scripts without a main guard."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg import ConfigError
from ignite_seg.config.specs import LoaderSpec, refers_to_main
from ignite_seg.runtime.main_module import _guarded_lines

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})
ROOT = Path(__file__).resolve().parents[1]


def test_the_reference_positional_call_runs_unchanged(tmp_path):
    folder, history = str(tmp_path / "current"), str(tmp_path / "history")
    # ignite_simple.model_manager.train's order: model, dataset, loss, folder, hyperparameters, analysis,
    # allow_later_analysis_up_to, accuracy_style, trials, is_continuation, history_folder, cores, trials_strict
    res = ignite_seg.train(MLP, BLOBS, CE, folder, "fastest", "none", "none", "classification", 1, False,
                           history, 1, True)
    assert [t.status for t in res.trials] == ["completed"]
    run = json.loads((tmp_path / "current" / "run.json").read_text())
    assert run["state"] == "complete" and run["hyperparameters"]["kind"] == "tuned"
    # is_continuation=False archives the first run into history_folder, as ignite-simple did
    ignite_seg.train(MLP, BLOBS, CE, folder, FAST_HP, "none", "none", "classification", 1, False, history, 1, True)
    assert len(os.listdir(history)) == 1


def test_the_fourteenth_argument_stays_keyword_only(tmp_path):
    with pytest.raises(TypeError, match="positional"):
        ignite_seg.train(MLP, BLOBS, CE, str(tmp_path), "fastest", "none", "none", "classification", 1, False,
                         str(tmp_path / "h"), 1, True, None)


def test_ignite_simple_analysis_preset_names_are_accepted(tmp_path):
    res = ignite_seg.train(MLP, BLOBS, CE, tmp_path / "c", FAST_HP, "none", "videos", "classification", 1, False,
                           tmp_path / "h", 1, True, seed=0)
    assert json.loads((tmp_path / "c" / "run.json").read_text())["allow_later_analysis_up_to"] == "video"
    assert len(res.completed) == 1


def test_trials_0_strict_tunes_only_and_the_folder_is_analysable(tmp_path):
    folder = tmp_path / "current"
    res = ignite_seg.train(MLP, BLOBS, CE, folder, "fastest", "none", "images", "classification", 0, False,
                           tmp_path / "history", 1, True, seed=0)
    assert res.trials == ()
    assert json.loads((folder / "run.json").read_text())["state"] == "complete"
    assert not (folder / "trials").exists() or not os.listdir(folder / "trials")
    final = json.loads((folder / "hparams" / "final.json").read_text())
    assert ignite_seg.FixedHyperparameters.from_dict(final) == res.hyperparameters
    ignite_seg.analyze(folder, analysis="images")
    assert (folder / "analysis" / "lr_sweep.png").is_file()


def test_trials_0_strict_with_fixed_hyperparameters_has_nothing_to_do(tmp_path):
    with pytest.raises(ConfigError, match="nothing to tune"):
        ignite_seg.train(MLP, BLOBS, CE, tmp_path / "c", FAST_HP, "none", "none", "classification", 0, False,
                         tmp_path / "h", 1, True)
    assert not (tmp_path / "c").exists()


def test_guarded_lines_find_the_main_blocks():
    src = "import x\nx.f()\nif __name__ == '__main__':\n    x.g()\n    x.h()\nif '__main__' == __name__:\n    pass\n"
    assert _guarded_lines(src) == [(3, 5), (6, 7)]
    assert _guarded_lines("if __name__ != '__main__':\n    pass\n") == []


def test_refers_to_main_sees_names_and_pickled_main_objects(monkeypatch):
    import types

    fake = types.ModuleType("__main__")
    fake.__file__ = "/somewhere/myscript.py"
    monkeypatch.setitem(sys.modules, "__main__", fake)
    assert refers_to_main(LoaderSpec(module="myscript", attr="model"))
    assert not refers_to_main(LoaderSpec(module="tasks", attr="model", args=(1, "__main__x"), kwargs={"a": 2}))

    class Local:  # pickled by reference to its module, here faked as __main__
        pass

    Local.__module__, Local.__qualname__ = "__main__", "Local"
    fake.Local = Local
    assert refers_to_main(LoaderSpec(module="tasks", attr="model", args=(Local,)))


SCRIPT_IMPORTED = """
    import sys
    from helpers import CE, FAST_HP
    import ignite_seg
    print("top level ran", flush=True)
    res = ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), CE, sys.argv[1],
                           hyperparameters=FAST_HP, analysis="none", trials=2, cores=2, seed=0)
    print("completed", len(res.completed), flush=True)
"""

SCRIPT_OWN_LOADERS = """
    import sys
    import torch
    from helpers import CE, FAST_HP
    import ignite_seg

    def model():
        return torch.nn.Linear(8, 3)

    print("top level ran", flush=True)
    ignite_seg.train(("__main__", "model", (), {}), ("tasks", "blobs", (), {}), CE, sys.argv[1],
                     hyperparameters=FAST_HP, analysis="none", trials=2, cores=2, seed=0)
"""


def _run_script(tmp_path: Path, body: str, start_method: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``body`` as a user's script; ``start_method``: ``IGNITE_SEG_START_METHOD`` (``None``: unset)."""
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    env.pop("IGNITE_SEG_START_METHOD", None)
    if start_method is not None:
        env["IGNITE_SEG_START_METHOD"] = start_method
    return subprocess.run([sys.executable, str(script), str(tmp_path / "out")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)


def test_a_script_without_main_guard_runs_when_its_loaders_are_importable(tmp_path):
    proc = _run_script(tmp_path, SCRIPT_IMPORTED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("top level ran") == 1  # no worker ran the script again
    assert "completed 2" in proc.stdout
    assert "RuntimeError" not in proc.stderr
    assert json.loads((tmp_path / "out" / "run.json").read_text())["state"] == "complete"


def test_a_script_without_main_guard_and_its_own_loaders_gets_one_config_error(tmp_path):
    """Workers started by the fork server import the script again: refused before anything starts."""
    proc = _run_script(tmp_path, SCRIPT_OWN_LOADERS, start_method="forkserver")
    assert proc.returncode == 1
    assert proc.stdout.count("top level ran") == 1
    assert proc.stderr.count("Traceback") == 1 and proc.stderr.count("exceptions.ConfigError: train()") == 1
    assert 'if __name__ == "__main__":' in proc.stderr and "line 11" in proc.stderr
    assert "RuntimeError" not in proc.stderr and "checking the recipe" not in proc.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written or started


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked from the caller on Linux only")
def test_a_script_without_main_guard_and_its_own_loaders_runs_when_workers_are_forked(tmp_path):
    """By default on Linux (no CUDA, no other thread) the workers are forked from the script: nothing
    imports it again, so its own loaders work without a main guard."""
    proc = _run_script(tmp_path, SCRIPT_OWN_LOADERS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("top level ran") == 1
    assert json.loads((tmp_path / "out" / "run.json").read_text())["state"] == "complete"


def test_workers_skip_main_hides_the_script_from_multiprocessing_and_restores_it(monkeypatch):
    import types
    from multiprocessing import spawn

    from ignite_seg.runtime.main_module import workers_skip_main

    fake = types.ModuleType("__main__")
    fake.__file__ = "/somewhere/myscript.py"
    fake.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", fake)
    assert spawn.get_preparation_data("x")["init_main_from_path"] == "/somewhere/myscript.py"
    with workers_skip_main(True):
        data = spawn.get_preparation_data("x")
        assert "init_main_from_path" not in data and "init_main_from_name" not in data
    assert fake.__file__ == "/somewhere/myscript.py" and fake.__spec__ is None
    with workers_skip_main(False):
        assert spawn.get_preparation_data("x")["init_main_from_path"] == "/somewhere/myscript.py"

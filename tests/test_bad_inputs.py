"""The bad-input catalogue: every entry must raise the documented ignite_seg error, in this
process, before any worker starts, and leave no partly written folder.

``docs/bad_inputs.md`` is generated from :data:`CATALOGUE` by ``python tests/test_bad_inputs.py``.
"""
from __future__ import annotations

import dataclasses
import threading

import pytest
from helpers import CE, FAST_HP
from tasks import blobs, mlp

import ignite_seg
from ignite_seg import ConfigError, ConfigTypeError, FolderError

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})


def _local_function():
    def model():
        return None

    return model


@dataclasses.dataclass
class Case:
    id: str
    what: str
    override: dict
    error: type
    match: str


def T(name, *args, **kwargs):
    return ("tasks", name, args, kwargs)


CATALOGUE = [
    # loader specs
    Case("loader-int", "model_loader is a number", {"model_loader": 42}, ConfigTypeError, "model_loader must be a loader: a 4-tuple"),
    Case("loader-built-model", "a built model instead of its loader", {"model_loader": mlp()}, ConfigTypeError, "model_loader is a built Sequential.*not the result of calling it"),
    Case("loader-datasets", "the datasets instead of their loader", {"dataset_loader": blobs()}, ConfigTypeError, r"tuple of 2 item\(s\) \(TensorDataset, TensorDataset\).*pass a function that returns them"),
    Case("loader-3-tuple", "loader tuple of 3 items", {"model_loader": ("tasks", "mlp", ())}, ConfigTypeError, "4-tuple"),
    Case("loader-module-type", "module is not a string", {"dataset_loader": (3, "blobs", (), {})}, ConfigTypeError, r"dataset_loader\[0\]"),
    Case("loader-attr-type", "attrname is not a string", {"loss_loader": ("torch.nn", None, (), {})}, ConfigTypeError, r"loss_loader\[1\]"),
    Case("loader-args-type", "args is a dict", {"model_loader": ("tasks", "mlp", {}, {})}, ConfigTypeError, r"model_loader\[2\].*tuple"),
    Case("loader-kwargs-type", "kwargs is a list", {"model_loader": ("tasks", "mlp", (), [])}, ConfigTypeError, r"model_loader\[3\].*dict"),
    Case("loader-missing-module", "module does not exist", {"model_loader": ("no_such_module_xyz", "m", (), {})}, ConfigError, "cannot find no_such_module_xyz.m"),
    Case("loader-missing-attr", "attribute does not exist", {"model_loader": T("no_such_model")}, ConfigError, "cannot find tasks.no_such_model"),
    Case("loader-raises", "the loader raises", {"model_loader": T("raises")}, ConfigError, "raised ValueError: cannot build this"),
    Case("loader-bad-kwargs", "loader called with unknown kwargs", {"model_loader": T("mlp", wings=2)}, ConfigError, "raised TypeError"),
    Case("loader-lambda", "a lambda as loader", {"model_loader": lambda: None}, ConfigError, "cannot be pickled"),
    Case("loader-local-function", "a local function as loader", {"model_loader": _local_function()}, ConfigError, "cannot be pickled"),
    Case("loader-unpicklable-kwargs", "kwargs hold a lock", {"model_loader": T("mlp", lock=threading.Lock())}, ConfigError, "cannot be pickled"),
    Case("model-not-module", "model loader returns a string", {"model_loader": T("not_a_module")}, ConfigError, "not a torch.nn.Module"),
    Case("model-wrong-input", "model expects other input features", {"model_loader": T("mlp", n_in=5)}, ConfigError, "model fails on a batch of inputs of shape"),
    # datasets
    Case("dataset-not-pair", "dataset loader returns one dataset", {"dataset_loader": T("one_dataset")}, ConfigError, "must return a pair"),
    Case("dataset-triple", "dataset loader returns three datasets", {"dataset_loader": T("three_datasets")}, ConfigError, "must return a pair.*3 items"),
    Case("dataset-not-dataset", "dataset loader returns numbers", {"dataset_loader": ("builtins", "divmod", (7, 2), {})}, ConfigError, "not a map-style"),
    Case("dataset-train-empty", "training set of length 0", {"dataset_loader": T("sized", 0, 10)}, ConfigError, "training set has 0 item"),
    Case("dataset-train-one", "training set of length 1", {"dataset_loader": T("sized", 1, 10)}, ConfigError, "training set has 1 item"),
    Case("dataset-val-empty", "validation set of length 0", {"dataset_loader": T("sized", 10, 0)}, ConfigError, "validation set has 0 item"),
    Case("dataset-val-one", "validation set of length 1", {"dataset_loader": T("sized", 10, 1)}, ConfigError, "validation set has 1 item"),
    Case("dataset-items-not-pairs", "items are inputs only", {"dataset_loader": T("inputs_only")}, ConfigError, r"\(input, target\) pairs"),
    Case("targets-float-for-classes", "float class targets", {"dataset_loader": T("float_targets")}, ConfigError, "integer class-index targets"),
    Case("targets-class-out-of-range", "class index >= outputs", {"dataset_loader": T("class_out_of_range")}, ConfigError, "outside the model's 3 outputs"),
    Case("targets-class-out-of-range-late", "class index >= outputs at item 100 only", {"dataset_loader": T("class_out_of_range_late")}, ConfigError, "1 item.* training set .*item 100, class 7"),
    Case("inputs-nan", "a NaN in the training inputs", {"dataset_loader": T("nan_inputs")}, ConfigError, "1 item.*non-finite inputs"),
    Case("targets-inf", "an inf regression target", {"dataset_loader": T("inf_targets"), "model_loader": T("linear"), "loss_loader": ("torch.nn", "MSELoss", (), {}), "accuracy_style": "inv-loss"}, ConfigError, "non-finite targets"),
    Case("output-one-column", "classifier with 1 output", {"model_loader": T("mlp", n_out=1)}, ConfigError, "n_classes >= 2"),
    Case("multiclass-shape", "multi-hot targets of another shape", {"accuracy_style": "multiclass"}, ConfigError, "multi-hot targets of the output's shape"),
    # loss
    Case("loss-not-callable", "loss loader returns 3", {"loss_loader": T("three")}, ConfigError, "not callable"),
    Case("loss-not-scalar", "loss with reduction='none'", {"loss_loader": ("torch.nn", "CrossEntropyLoss", (), {"reduction": "none"})}, ConfigError, "scalar tensor"),
    Case("loss-fails", "loss that fails on the output", {"loss_loader": ("torch.nn", "MSELoss", (), {})}, ConfigError, "fails on model output of shape"),
    Case("loss-broadcasts", "(N, 1) outputs, (N,) targets, MSELoss", {"dataset_loader": T("regression_flat"), "model_loader": T("linear"), "loss_loader": ("torch.nn", "MSELoss", (), {}), "accuracy_style": "inv-loss"}, ConfigError, r"broadcast to \(2, 2\).*model\(x\).squeeze\(-1\)"),
    # settings
    Case("preset-unknown", "unknown tuner preset", {"hyperparameters": "fastt"}, ConfigError, "not a preset \\(did you mean 'fast'\\?\\).*fastest"),
    Case("preset-type", "hyperparameters is a number", {"hyperparameters": 3}, ConfigTypeError, "hyperparameters must be"),
    Case("fixed-dict-missing", "fixed recipe dict missing keys", {"hyperparameters": {"lr_start": 0.1}}, ConfigTypeError, "not a valid fixed recipe"),
    Case("fixed-dict-negative", "fixed recipe with a negative lr", {"hyperparameters": {**FAST_HP.to_dict(), "lr_start": -1.0}}, ConfigError, "positive learning rates"),
    Case("fixed-dict-batch-zero", "fixed recipe with batch_size=0", {"hyperparameters": {**FAST_HP.to_dict(), "batch_size": 0}}, ConfigError, "batch_size must be >= 1"),
    Case("fixed-dict-epochs-float", "fixed recipe with epochs=2.5", {"hyperparameters": {**FAST_HP.to_dict(), "epochs": 2.5}}, ConfigTypeError, "epochs must be an int"),
    Case("analysis-unknown", "unknown analysis preset", {"analysis": "imagez"}, ConfigError, "not an analysis preset \\(did you mean 'images'\\?\\)"),
    Case("analysis-type", "analysis is True", {"analysis": True}, ConfigTypeError, "analysis must be a preset name"),
    Case("later-analysis-unknown", "unknown allow_later_analysis_up_to", {"allow_later_analysis_up_to": "movies"}, ConfigError, "allow_later_analysis_up_to='movies'"),
    Case("style-unknown", "unknown accuracy_style", {"accuracy_style": "accuracy"}, ConfigError, "accuracy_style='accuracy' is not valid"),
    Case("style-type", "accuracy_style is None", {"accuracy_style": None}, ConfigTypeError, "accuracy_style must be one of"),
    Case("trials-zero", "trials=0", {"trials": 0}, ConfigError, "trials must be >= 1"),
    Case("trials-str", "trials='3'", {"trials": "3"}, ConfigTypeError, "trials must be an int"),
    Case("trials-bool", "trials=True", {"trials": True}, ConfigTypeError, "trials must be an int"),
    Case("cores-zero", "cores=0", {"cores": 0}, ConfigError, "cores must be >= 1"),
    Case("cores-too-many", "cores above the CPUs this process may use", {"cores": 10_000}, ConfigError, "cores=10000 is more than the"),
    Case("cores-str", "cores='many'", {"cores": "many"}, ConfigTypeError, "cores must be a positive int"),
    Case("cores-float", "cores=1.5", {"cores": 1.5}, ConfigTypeError, "cores must be a positive int"),
    Case("trials-zero-fresh", "trials=0 continuing an empty folder", {"trials": 0, "is_continuation": True}, ConfigError, "trials=0 with is_continuation=True finishes a run"),
    Case("continuation-str", "is_continuation='yes'", {"is_continuation": "yes"}, ConfigTypeError, "is_continuation must be True or False"),
    Case("strict-int", "trials_strict=1", {"trials_strict": 1}, ConfigTypeError, "trials_strict must be True or False"),
    Case("executor-type", "executor is not an Executor", {"executor": object()}, ConfigTypeError, "executor must be a concurrent.futures.Executor"),
    Case("device-unknown", "device='tpu'", {"device": "tpu"}, ConfigError, "device='tpu'"),
    Case("device-type", "device=0", {"device": 0}, ConfigTypeError, "device must be"),
    Case("seed-negative", "seed=-1", {"seed": -1}, ConfigError, "seed must be >= 0"),
    Case("seed-str", "seed='0'", {"seed": "0"}, ConfigTypeError, "seed must be an int"),
    Case("snapshots-zero", "snapshots_per_epoch=0", {"snapshots_per_epoch": 0}, ConfigError, "snapshots_per_epoch must be >= 1"),
    Case("checkpoint-negative", "checkpoint_every=-1", {"checkpoint_every": -1}, ConfigError, "checkpoint_every=-1 is negative"),
    Case("checkpoint-bool", "checkpoint_every=False", {"checkpoint_every": False}, ConfigTypeError, "checkpoint_every=False is not a number of epochs"),
    Case("best-no-mode", "best_metric='loss' without best_mode", {"best_metric": "loss"}, ConfigError, "the direction is never guessed"),
    Case("best-bad-mode", "best_mode='lowest'", {"best_metric": "loss", "best_mode": "lowest"}, ConfigError, "best_mode='lowest'"),
    Case("best-unknown-metric", "best_metric='iou' with no such custom metric", {"best_metric": "iou", "best_mode": "max"}, ConfigError, "best_metric='iou' is not a metric of this run"),
    Case("best-over-without-best", "best_over='mean' without best_metric", {"best_over": "mean"}, ConfigError, "best_over='mean' without best_metric"),
    Case("best-over-unknown-set", "best_over names a set the dataset lacks", {"best_metric": "loss", "best_mode": "min", "best_over": ["noisy"]}, ConfigError, r"best_over=\['noisy'\] names \['noisy'\], not validation sets"),
    Case("val-only-unknown", "val_only_metrics names no custom metric", {"val_only_metrics": ["iou"]}, ConfigError, r"val_only_metrics=\['iou'\] names \['iou'\], not custom metrics"),
    Case("handlers-one-spec", "handlers=one spec, not a list", {"handlers": MLP}, ConfigTypeError, "wrap one spec in a list"),
    Case("handlers-unimportable", "handlers=[a spec whose module is missing]", {"handlers": [("nomodule_x", "f", (), {})]}, ConfigError, "cannot be imported here"),
    Case("trial-processes-zero", "trial_processes=0", {"trial_processes": 0}, ConfigError, "trial_processes=0 is less than 1"),
    Case("trial-processes-cores", "trial_processes above cores", {"trial_processes": 10000}, ConfigError, "trial_processes=10000 is more than cores="),
    Case("metric-no-mode", "a custom metric without its direction", {"metrics": {"iou": ("real_tasks", "class_iou", (), {})}}, ConfigError, r"metric_modes\['iou'\]=None: say whether a higher or lower iou is better"),
    Case("metric-reserved", "a custom metric named 'loss'", {"metrics": {"loss": ("real_tasks", "class_iou", (), {})}, "metric_modes": {"loss": "min"}}, ConfigError, "the names 'loss' and 'perf' are ignite_seg's own"),
    Case("metric-bad-name", "a custom metric named 'my iou'", {"metrics": {"my iou": ("real_tasks", "class_iou", (), {})}, "metric_modes": {"my iou": "max"}}, ConfigError, "letters, digits"),
    Case("metric-mode-extra", "metric_modes names an unknown metric", {"metric_modes": {"iou": "max"}}, ConfigError, "metric_modes names"),
    # folders
    Case("folder-type", "folder=123", {"folder": 123}, ConfigTypeError, "folder must be a path"),
    Case("folder-root", "folder='/'", {"folder": "/"}, FolderError, "filesystem root"),
    Case("folder-cwd", "folder='.' (the working directory)", {"folder": "."}, FolderError, "is the current working directory"),
    Case("folder-unwritable", "folder under /proc", {"folder": "/proc/ignite_seg_test/current"}, FolderError, "cannot be written"),
]
if not __import__("torch").cuda.is_available():
    CATALOGUE.append(Case("device-cuda-missing", "device='cuda' without CUDA", {"device": "cuda"}, ConfigError, "CUDA is not available"))


def _kwargs(tmp_path, override):
    kw = dict(model_loader=MLP, dataset_loader=BLOBS, loss_loader=CE, folder=tmp_path / "current",
              history_folder=tmp_path / "history", hyperparameters=FAST_HP, analysis="none",
              trials=1, cores=1, seed=0)
    kw.update(override)
    if kw.get("accuracy_style") == "multiclass":
        kw["loss_loader"] = ("torch.nn", "BCEWithLogitsLoss", (), {})
    return kw


@pytest.mark.parametrize("case", CATALOGUE, ids=[c.id for c in CATALOGUE])
def test_bad_input_raises_documented_error_and_writes_nothing(case, tmp_path, monkeypatch):
    import ignite_seg.runtime.tasks as execution

    def no_workers(*a, **k):
        raise AssertionError("a worker pool was started before validation failed")

    monkeypatch.setattr(execution.TaskRunner, "__init__", no_workers)
    kw = _kwargs(tmp_path, case.override)
    loaders = [kw.pop(k) for k in ("model_loader", "dataset_loader", "loss_loader")]
    with pytest.raises(case.error, match=case.match) as info:
        ignite_seg.train(*loaders, **kw)
    assert isinstance(info.value, ignite_seg.IgniteSegError)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_folder_that_is_a_file(tmp_path):
    f = tmp_path / "current"
    f.write_text("not a folder")
    with pytest.raises(FolderError, match="exists and is not a folder"):
        ignite_seg.train(MLP, BLOBS, CE, folder=f, hyperparameters=FAST_HP, analysis="none")
    assert f.read_text() == "not a folder"


def test_continuation_on_a_foreign_folder(tmp_path):
    f = tmp_path / "current"
    f.mkdir()
    (f / "notes.txt").write_text("mine")
    with pytest.raises(FolderError, match="not an ignite_seg run folder"):
        ignite_seg.train(MLP, BLOBS, CE, folder=f, hyperparameters=FAST_HP, analysis="none", is_continuation=True)
    assert [p.name for p in f.iterdir()] == ["notes.txt"]


def test_continuation_with_a_corrupted_run_json(tmp_path):
    f = tmp_path / "current"
    f.mkdir()
    (f / "run.json").write_text("{ not json")
    with pytest.raises(FolderError, match="not valid JSON"):
        ignite_seg.train(MLP, BLOBS, CE, folder=f, hyperparameters=FAST_HP, analysis="none", is_continuation=True)


def test_history_folder_that_is_a_file(tmp_path):
    h = tmp_path / "history"
    h.write_text("x")
    with pytest.raises(FolderError, match="history_folder"):
        ignite_seg.train(MLP, BLOBS, CE, folder=tmp_path / "c", history_folder=h, hyperparameters=FAST_HP)


def test_fixed_hyperparameters_validate_on_construction():
    with pytest.raises(ConfigError, match="positive learning rates"):
        ignite_seg.FixedHyperparameters(lr_start=0, lr_end=0.1, batch_size=8, cycle_size_epochs=1, epochs=1)
    with pytest.raises(ConfigError, match="optimizer must be"):
        ignite_seg.FixedHyperparameters(lr_start=0.1, lr_end=0.1, batch_size=8, cycle_size_epochs=1, epochs=1,
                                        optimizer="adam")


def _markdown() -> str:
    lines = ["# Bad inputs and the errors they give", "",
             "Generated from `tests/test_bad_inputs.py` (each row is a test). Every error is raised in the "
             "calling process before any worker starts, and nothing is written.", "",
             "| id | bad input | exception | message contains |", "| --- | --- | --- | --- |"]
    for c in CATALOGUE:
        lines.append(f"| `{c.id}` | {c.what} | `{c.error.__name__}` | `{c.match.replace('|', '/')}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import pathlib

    pathlib.Path(__file__).resolve().parents[1].joinpath("docs", "bad_inputs.md").write_text(_markdown())


def test_a_regression_in_its_own_units_is_told_its_perf_will_read_near_zero(caplog):
    # not an error (the tuner decides on the loss): a WARNING with the fix, before any worker starts
    import logging

    from ignite_seg.config.specs import normalize_spec
    from ignite_seg.engine.probe import probe_recipe

    def specs(dataset):
        return (normalize_spec(("tasks", "linear", (), {}), "model_loader"),
                normalize_spec(("tasks", dataset, (), {}), "dataset_loader"),
                normalize_spec(("torch.nn", "MSELoss", (), {}), "loss_loader"))

    with caplog.at_level(logging.WARNING, logger="ignite_seg"):
        probe_recipe(*specs("regression_in_units"), "inv-loss")
    said = [r.getMessage() for r in caplog.records if "read near 0" in r.getMessage()]
    assert len(said) == 1 and "standardise them" in said[0] and "targets up to" in said[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ignite_seg"):
        probe_recipe(*specs("regression"), "inv-loss")  # standardised targets: nothing to say
    assert not [r for r in caplog.records if "read near 0" in r.getMessage()]

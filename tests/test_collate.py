"""Collation of the key scheme: a plain run as before, named validation sets and custom metrics added."""
from __future__ import annotations

import numpy as np
import pytest

from ignite_seg.smoothing import moving_average
from ignite_seg.storage.collate import Collator
from ignite_seg.storage.records import TrialResult
from ignite_seg.storage.result_keys import ResultKeys, curve_keys, final_keys

S = 7
KEYS = ResultKeys(("clean", "noisy"), ("iou",))


def _trial(tid: int, keys: ResultKeys) -> tuple[TrialResult, dict]:
    """A trial whose every value encodes (trial, key) so a mix-up shows."""
    rng = np.random.default_rng(tid)
    result = TrialResult(trial_id=tid, status="completed", seconds=1.5 + tid,
                         metrics={k: tid + i / 100 for i, k in enumerate(keys.final_keys())})
    tt = {"epochs": np.linspace(0, 2, S), "settings": np.asarray(["{}"]),
          **{k: rng.random(S) + 10 * i for i, k in enumerate(keys.curve_keys())}}
    return result, tt


def _collate(keys: ResultKeys, ids=(2, 0, 1)) -> tuple[dict, dict]:
    c = Collator({"snapshots_per_epoch": 3}, smooth_window=3)
    for tid in ids:
        c.add(tid, *_trial(tid, keys))
    return c.arrays()


def test_plain_run_collates_exactly_the_four_keys_as_before():
    results, tt = _collate(ResultKeys())
    assert list(results) == ["trial_ids", "final_loss_train", "final_loss_val", "final_perf_train", "final_perf_val",
                             "seconds"]
    assert list(tt) == ["settings", "trial_ids", "epochs"] + [
        k for c in ("losses_train", "losses_val", "perfs_train", "perfs_val") for k in (c, f"{c}_smoothed")]
    trials = {t: _trial(t, ResultKeys()) for t in (0, 1, 2)}
    for k in ("losses_train", "losses_val", "perfs_train", "perfs_val"):
        stacked = np.stack([trials[t][1][k] for t in (0, 1, 2)])
        assert tt[k].tobytes() == stacked.tobytes() and tt[k].shape == (3, S)
        assert tt[f"{k}_smoothed"].tobytes() == moving_average(stacked, 3, axis=1).tobytes()
    assert results["final_perf_val"].tolist() == [trials[t][0].metrics["perf_val"] for t in (0, 1, 2)]
    assert results["seconds"].tolist() == [1.5, 2.5, 3.5]


def test_named_val_sets_and_a_custom_metric_are_collated_with_shapes():
    results, tt = _collate(KEYS)
    for k in KEYS.curve_keys():
        assert tt[k].shape == (3, S) and tt[f"{k}_smoothed"].shape == (3, S), k
    assert {"losses_val_noisy", "perfs_val_noisy", "metric_iou_train", "metric_iou_val",
            "metric_iou_val_noisy"} <= set(tt)
    for k in KEYS.final_keys():
        assert results[f"final_{k}"].shape == (3,), k
    # trial t's value of the i-th final key is t + i/100: in id order, under its own name
    i = KEYS.final_keys().index("metric_iou_val_noisy")
    np.testing.assert_allclose(results["final_metric_iou_val_noisy"], [0 + i / 100, 1 + i / 100, 2 + i / 100])
    # the plain keys are byte-identical to those of a plain run of the same trials
    plain_results, plain_tt = _collate(ResultKeys())
    for k, v in plain_tt.items():
        if k != "settings" and k.startswith(("losses", "perfs", "epochs", "trial")) and "noisy" not in k:
            assert tt[k].tobytes() == v.tobytes(), k
    assert set(tt) - set(plain_tt) == {k for c in curve_keys(("clean", "noisy"), ("iou",))[4:]
                                       for k in (c, f"{c}_smoothed")}
    assert set(results) - set(plain_results) == {f"final_{k}" for k in final_keys(("a", "noisy"), ("iou",))[4:]}


def test_a_trial_with_other_keys_is_refused_and_not_added():
    c = Collator({}, smooth_window=3)
    c.add(0, *_trial(0, KEYS))
    result, tt = _trial(1, ResultKeys(("clean", "noisy")))  # no custom metric
    with pytest.raises(ValueError, match=r"trial 1's final values .*missing \['metric_iou_train'"):
        c.add(1, result, tt)
    result, _ = _trial(1, KEYS)
    with pytest.raises(ValueError, match=r"trial 1's curves .*extra \[\], missing \['metric_iou_train'"):
        c.add(1, result, tt)
    assert len(c) == 1 and c.arrays()[0]["final_metric_iou_val"].shape == (1,)


def test_result_keys_names_parse_and_old_records():
    assert ResultKeys.from_record({"accuracy_style": "classification"}) == ResultKeys(("val",), ())
    rec = {"val_names": ["clean", "noisy"], "metric_names": ["iou"]}
    assert ResultKeys.from_record(rec) == KEYS
    assert KEYS.parse("final_metric_iou_val_noisy") == ("metric", "iou", "val_noisy", "noisy")
    assert KEYS.parse("perfs_val") == ("perf", None, "val", "clean")
    assert KEYS.parse("losses_train_smoothed") is None and KEYS.parse("epochs") is None
    assert KEYS.mode("iou") == "max" and ResultKeys(("val",), ("mae",), (("mae", "min"),)).mode("mae") == "min"
    with pytest.raises(ValueError, match="not ending in 'smoothed'"):
        ResultKeys(("val", "smoothed"))
    with pytest.raises(ValueError, match="same key"):
        ResultKeys(("val", "train"), ("a_val", "a"))  # metric_a_val_train twice

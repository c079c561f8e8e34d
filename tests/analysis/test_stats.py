from __future__ import annotations

import math

import numpy as np
import pytest

from ignite_seg.analysis.stats import Band, Stats, describe, mean_band, space_of, t975


def test_t975_table_and_tail():
    assert t975(1) == 12.706
    assert t975(30) == 2.042
    assert t975(100) == pytest.approx(1.984, abs=1e-3)  # the tabulated value is 1.984
    assert math.isnan(t975(0))


def test_describe_known_answer():
    s = describe(np.array([0.9, 0.8, 1.0, np.nan]), np.array([3, 5, 7, 9]), "max")
    half = 4.303 * 0.1 / math.sqrt(3)
    expected = Stats(3, 0.9, 0.1, 0.9 - half, 0.9 + half, 1.0, 0.8, 7, 5, "max")
    np.testing.assert_allclose(s[:7], expected[:7], rtol=1e-12)
    assert s[7:] == expected[7:]


def test_describe_min_mode_single_and_empty():
    s = describe(np.array([0.5, 0.2]), np.array([0, 1]), "min")
    assert (s.best, s.best_trial, s.worst, s.worst_trial) == (0.2, 1, 0.5, 0)
    one = describe(np.array([0.7]), np.array([4]), "max")
    assert one.n == 1 and one.mean == 0.7 and math.isnan(one.std) and math.isnan(one.ci_low)
    assert describe(np.zeros(0), np.zeros(0), "max").n == 0


def test_mean_band_ignores_nan_columnwise():
    y = np.array([[1.0, 2.0, np.nan], [3.0, 4.0, 5.0]])
    band = mean_band(y)
    half = 12.706 * math.sqrt(2.0) / math.sqrt(2)
    expected = Band(np.array([2.0, 3.0, 5.0]), np.array([2 - half, 3 - half, np.nan]),
                    np.array([2 + half, 3 + half, np.nan]), np.array([2, 2, 1]))
    np.testing.assert_equal(band._asdict(), expected._asdict())


def test_space_of_follows_the_values_where_the_names_space_does_not_hold_them():
    assert space_of("losses_val") == space_of("losses_val", np.array([0.5, 2.0])) == "log"
    assert space_of("final_loss_val", np.array([0.3, -0.1, np.nan])) == "linear"  # a likelihood's loss
    assert space_of("perfs_train", np.array([0.2, 1.0])) == "unit"
    assert space_of("final_perf_val", np.array([1.1, 1.2])) == "linear"  # inv-loss of a loss below zero
    assert space_of("metric_mae_val", np.array([-1.0])) == "linear"


def test_the_summarys_interval_note_says_the_spaces_used():
    from ignite_seg.analysis.text import interval_note

    usual = interval_note({"final_loss_val": "log", "final_perf_val": "unit"})
    assert usual == interval_note({}) and "log values" in usual and "clipped to [0, 1]" in usual
    below = interval_note({"final_loss_val": "linear", "final_loss_train": "log", "final_perf_val": "linear"})
    assert "values themselves" in below and "not clipped" in below


def test_loss_left_log_reads_the_final_losses():
    from ignite_seg.analysis.stats import loss_left_log

    assert not loss_left_log({"final_loss_val": np.array([0.3, 0.2]), "final_perf_val": np.array([1.2])})
    assert loss_left_log({"final_loss_train": np.array([0.1]), "final_loss_val": np.array([0.2, -0.05])})

"""The schedule figure draws the schedule the trials used: the trainer's scheduler, simulated."""
from __future__ import annotations

import io

import numpy as np
import pytest

from ignite_seg.analysis.lr import plot_schedule, schedule_info
from ignite_seg.config.hyperparameters import FixedHyperparameters
from ignite_seg.engine.schedules import simulate_lrs

RECIPE = {"lr_start": 0.01, "lr_end": 0.1, "batch_size": 8, "cycle_size_epochs": 2, "epochs": 4}


@pytest.mark.parametrize("schedule", ["triangular", "one-cycle", "cosine", "inv-sqrt", "constant"])
def test_schedule_info_of_a_recipe_with_warmup_is_the_simulated_scheduler(schedule):
    recipe = {**RECIPE, "schedule": schedule, "warmup_epochs": 0.5}  # as read from final.json
    info = schedule_info(recipe, points_per_half_cycle=10)
    expected = simulate_lrs(FixedHyperparameters(**recipe), 10)
    np.testing.assert_array_equal(info.lrs, expected)
    np.testing.assert_allclose(info.epochs, np.arange(40) / 10)
    assert info.lrs[0] == 0.0  # warmup from 0
    np.testing.assert_allclose(info.lrs[:5], np.arange(5) / 4 * expected[4])  # 5 warmup steps, linear
    assert (info.schedule, info.warmup_epochs) == (schedule, 0.5)


def test_cosine_without_warmup_is_drawn_from_lr_end_down():
    info = schedule_info({**RECIPE, "schedule": "cosine"}, points_per_half_cycle=10)
    assert info.lrs[0] == pytest.approx(0.1) and info.lrs[-1] < 0.0102
    assert np.all(np.diff(info.lrs) < 0)


def test_plot_schedule_names_the_schedule_and_the_warmup():
    info = schedule_info({**RECIPE, "schedule": "one-cycle", "warmup_epochs": 1.0})
    fig = plot_schedule(info)
    title = fig.axes[0].get_title()
    assert "one-cycle" in title and "warmup from 0 over 1 epochs" in title
    lo, _ = fig.axes[0].get_ylim()
    assert 0 < lo <= info.lrs[info.lrs > 0].min()  # the one-cycle's end (lr_start / 100) is on the axis
    fig.savefig(io.BytesIO(), format="png")
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_a_constant_schedules_figure_does_not_draw_the_lr_start_it_ignores():
    import matplotlib.pyplot as plt

    info = schedule_info({**RECIPE, "schedule": "constant", "lr_start": 0.001, "lr_end": 0.05})
    fig = plot_schedule(info)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "lr_end = 0.05" in labels and not any(x.startswith("lr_start") for x in labels)
    assert fig.axes[0].get_ylim()[0] > 0.01  # the axis is not stretched down to the unused 0.001
    plt.close(fig)
    cosine = plot_schedule(schedule_info({**RECIPE, "schedule": "cosine", "lr_start": 0.001, "lr_end": 0.05}))
    assert "lr_start = 0.001" in cosine.axes[0].get_legend_handles_labels()[1]
    plt.close(cosine)

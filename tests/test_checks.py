"""The one integer check, used by the settings records and the entry points."""
from __future__ import annotations

import pytest

from ignite_seg import ConfigError, ConfigTypeError, FixedHyperparameters, HyperparameterSettings
from ignite_seg.config.checks import check_int


def test_check_int_returns_the_value_and_names_argument_and_value_when_wrong():
    assert check_int("trials", 3, 1) == 3
    assert check_int("seed", None, 0, optional=True) is None
    with pytest.raises(ConfigTypeError, match=r"^trials must be an int, got True \(bool\)\.$"):
        check_int("trials", True, 1)
    with pytest.raises(ConfigTypeError, match=r"seed must be an int, got None"):
        check_int("seed", None, 0)
    with pytest.raises(ConfigError, match=r"^trials must be >= 1, got 0\.$"):
        check_int("trials", 0, 1)


def test_settings_records_use_the_shared_check():
    with pytest.raises(ConfigError, match=r"^HyperparameterSettings\.batch_pts must be >= 0, got -1\.$"):
        HyperparameterSettings(batch_pts=-1)
    with pytest.raises(ConfigTypeError, match=r"^HyperparameterSettings\.cycles must be an int, got 1\.0 \(float\)\.$"):
        HyperparameterSettings(cycles=1.0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^FixedHyperparameters\.epochs must be >= 1, got 0\.$"):
        FixedHyperparameters(lr_start=0.1, lr_end=1.0, batch_size=8, cycle_size_epochs=1, epochs=0)

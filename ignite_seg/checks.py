"""Argument checks shared by the settings records and the entry points (no torch, no package imports)."""
from __future__ import annotations

from typing import Any

from .exceptions import ConfigError, ConfigTypeError

__all__ = ["check_int"]


def check_int(name: str, value: Any, minimum: int, optional: bool = False) -> int | None:
    """``value`` when it is an int (not a bool) of at least ``minimum``; ``None`` passes when ``optional``.

    Raises:
        ConfigTypeError: ``value`` is not an int; the message names ``name`` and shows the value.
        ConfigError: ``value`` is below ``minimum``.

    Example:
        >>> check_int("trials", 3, 1)
        3
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigTypeError(f"{name} must be an int, got {value!r} ({type(value).__name__}).")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value!r}.")
    return value

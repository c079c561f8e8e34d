"""Shared pieces of the benchmarks: the digits task and machine facts."""
from __future__ import annotations

import os
import platform
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]

import psutil  # noqa: E402

DIGITS = {
    "model": ("digits", "model", (), {}),
    "dataset": ("digits", "dataset", (), {}),
    "loss": ("torch.nn", "CrossEntropyLoss", (), {}),
}


def machine() -> str:
    return (f"{psutil.cpu_count(logical=False)} physical / {psutil.cpu_count()} logical cores, "
            f"{psutil.virtual_memory().total / 2**30:.0f} GiB, {platform.processor() or platform.machine()}, "
            f"Python {platform.python_version()}")

"""The calling process's exit hook: the collector frozen at exit, once, unless IGNITE_SEG_FAST_EXIT=0."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import atexit, gc
atexit.register(lambda: print("frozen", gc.get_freeze_count() > 0))  # runs after hooks registered later
from ignite_seg.runtime.process_exit import freeze_at_exit
before = atexit._ncallbacks()
print("registered", freeze_at_exit(), freeze_at_exit())
print("hooks", atexit._ncallbacks() - before)
"""


@pytest.mark.parametrize("setting, registered, frozen", [(None, True, True), ("0", False, False), ("1", True, True)])
def test_the_collector_is_frozen_at_exit_once_unless_turned_off(setting, registered, frozen):
    env = {k: v for k, v in os.environ.items() if k != "IGNITE_SEG_FAST_EXIT"}
    if setting is not None:
        env["IGNITE_SEG_FAST_EXIT"] = setting
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"registered {registered} {registered}"
    assert lines[1] == f"hooks {int(registered)}"  # once, however often asked
    assert lines[-1] == f"frozen {frozen}"

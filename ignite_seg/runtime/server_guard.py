"""Imported first by the fork server (its preload): the server dies with the driver that started it.

The fork server is the parent of the trial workers; with the kernel's parent-death signal
(:func:`~ignite_seg.runtime.workers.die_with_parent`) it ends the moment the driver does, even
a SIGKILLed driver that its own parent has not reaped, and its workers, asking the same of it,
end with it. Nothing happens on import in any other process: only where the variable
``IGNITE_SEG_FORKSERVER_PARENT`` names this process's parent (the driver sets it just before it
starts the server).
"""
from __future__ import annotations

import os

from .workers import SERVER_GUARD_ENV, die_with_parent

_driver = os.environ.get(SERVER_GUARD_ENV)
if _driver == str(os.getppid()):
    die_with_parent()
    if str(os.getppid()) != _driver:  # the driver died before the signal was asked for
        os._exit(3)

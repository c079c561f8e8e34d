"""Claiming a run folder for one call: check it, move an old run to the history, lock it.

The whole claim runs under :func:`~.folder_lock.claiming` (a lock on the parent folder), and a
fresh run locks the old run's folder itself before it looks at it or moves it, so of two fresh
runs on one folder exactly one proceeds and the other gets :class:`FolderLockedError`, and a
live run (or analysis) is never moved. See docs/reliability.md, *Lock*.
"""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Iterator

from .atomic import remove_stale_temporaries
from .contained import contained
from .folder_lock import LOCK_NAME, FolderLock, claiming
from .run_folder import RunFolder, archive_folder, check_replaceable, has_content

__all__ = ["claimed"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def claimed(folder: Path, history: Path, fresh: bool) -> Iterator[RunFolder]:
    """``folder``, locked for this call (an old run moved to ``history`` first when ``fresh``).

    Inside, no write or delete under ``folder`` follows a link (:mod:`.contained`).
    """
    rf = RunFolder(folder)
    lock = FolderLock(rf.path)
    with claiming(rf.path):
        if fresh and has_content(rf.path):
            _archive_locked(rf.path, history)
        rf.path.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    try:
        with contained(rf.path):
            if n := remove_stale_temporaries(rf.path):
                logger.info("removed %d temporary file(s) left by an interrupted write", n)
            yield rf
    finally:
        lock.release()


def _archive_locked(folder: Path, history: Path) -> None:
    """Move the old run at ``folder`` to ``history`` while holding its lock (a live holder raises)."""
    old = FolderLock(folder)
    old.acquire()  # FolderLockedError naming a live holder; nothing moved
    try:
        check_replaceable(folder)  # again, under the lock: only an ignite_seg run is ever moved
        dest = archive_folder(folder, history)
    except BaseException:
        old.release()
        raise
    with contextlib.suppress(FileNotFoundError):  # our record went with the folder: removed there
        (dest / LOCK_NAME).unlink()
    old.close()  # then the lock dropped
    logger.info("archived the existing %s to %s", folder, dest)

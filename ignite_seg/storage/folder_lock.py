"""The run folder's lock: one run (or analysis) writes a folder at a time.

An exclusive ``fcntl.flock`` on ``folder/.ignite_seg.lock`` (atomic, released by the kernel when
the holder dies, in any PID namespace); the file records the holder (pid, host, time) for the
error message. See docs/reliability.md.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

import psutil

from ..exceptions import FolderError, FolderLockedError
from .contained import link_error

__all__ = ["FolderLock", "LOCK_NAME", "claiming"]

LOCK_NAME = ".ignite_seg.lock"
#: Attempts to take a lock someone holds (a :meth:`FolderLock.holder` probe holds it briefly).
LOCK_TRIES = 5
LOCK_RETRY_S = 0.02
#: How long a claim waits for another claim of a folder of the same parent (an archive) to end.
CLAIM_WAIT_S = 60.0
#: The lock file is opened without following a link (a link could lead outside the run folder).
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: How every lock record of ours begins (a half-written one is a prefix of a record).
_RECORD_START = b'{"pid": '
#: Descriptors of the locks this process holds; a forked child closes its copies (see below).
_HELD: set[int] = set()


def _close_inherited() -> None:
    """In a forked child: drop the copies of the parent's lock descriptors. A ``flock`` lives as long
    as any copy of its descriptor is open, so a worker forked from a run that is then SIGKILLed
    would otherwise keep the folder locked until the worker exits. Closing a copy never unlocks."""
    for fd in _HELD:
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited)


class FolderLock:
    """An exclusive ``flock`` on ``folder/.ignite_seg.lock``; the file names the holder for messages.

    The kernel releases a ``flock`` when its holder dies (SIGKILL included) and sees it across PID
    namespaces, so the lock is held exactly while its holder lives, and taking it is one atomic
    step. A lock file nobody holds was left by a run that died: it is stale and is taken over
    with a warning. (A file that names a live process of this host but is not held, as written
    by an ignite_seg older than the ``flock``, is respected.)
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    @staticmethod
    def holder(folder: Path) -> dict[str, Any] | None:
        """The live holder of ``folder``'s lock, or ``None`` when unlocked or stale."""
        try:
            fd = os.open(folder / LOCK_NAME, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _open_error(folder, exc) from None
        try:
            if not _try_flock(fd, fcntl.LOCK_SH):
                return _read_info(fd) or {"pid": None, "host": None}
            fcntl.flock(fd, fcntl.LOCK_UN)
            info = _read_info(fd)
            return info if info is not None and _legacy_live(info) else None
        finally:
            os.close(fd)

    def acquire(self) -> None:
        """Take the lock, or raise :class:`FolderLockedError` naming the live holder."""
        fd = self._locked_fd()
        if not _ours(os.pread(fd, 4096, 0)):
            os.close(fd)
            raise FolderError(
                f"{str(self.path)!r} is not a lock file of ignite_seg (it holds something else), so ignite_seg "
                "will not overwrite or delete it. Move it out of the folder, or use another folder."
            )
        previous = _read_info(fd)
        if previous is not None and _legacy_live(previous):
            os.close(fd)
            raise self._locked_error(previous)
        if os.fstat(fd).st_size:
            who = f"pid {previous.get('pid')} on {previous.get('host')!r}" if previous else "unreadable"
            warnings.warn(
                f"taking over the stale lock {str(self.path)!r} left by a process that is gone ({who})",
                stacklevel=_callers_level(),
            )
        info = {"pid": os.getpid(), "host": socket.gethostname(), "created": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd
        _HELD.add(fd)

    def _locked_fd(self) -> int:
        """An open descriptor of the lock file, flocked by us; the file is the one at ``path``."""
        for attempt in range(LOCK_TRIES):
            try:
                fd = os.open(self.path, _OPEN_FLAGS, 0o644)
            except OSError as exc:
                raise _open_error(self.path.parent, exc) from None
            if not _try_flock(fd, fcntl.LOCK_EX):
                info = _read_info(fd)
                os.close(fd)
                if attempt == LOCK_TRIES - 1:
                    raise self._locked_error(info or {"pid": "unknown", "host": "unknown"})
                time.sleep(LOCK_RETRY_S)  # a holder() probe holds it for microseconds
                continue
            if _same_file(fd, self.path):
                return fd
            os.close(fd)  # the holder released and unlinked it meanwhile: lock the new file
        raise self._locked_error({"pid": "unknown", "host": "unknown"})

    def _locked_error(self, info: dict[str, Any]) -> FolderLockedError:
        folder = self.path.parent
        return FolderLockedError(
            f"folder {str(folder)!r} is in use by process {info.get('pid')} on {info.get('host')!r} "
            f"(lock file {str(self.path)!r}). Wait for it to finish, or use another folder."
        )

    def close(self) -> None:
        """Drop the lock without touching any file (its folder was moved away)."""
        if self._fd is not None:
            _HELD.discard(self._fd)
            os.close(self._fd)
            self._fd = None

    def release(self) -> None:
        """Remove the lock file and drop the lock (removing first: a waiting acquirer retries)."""
        if self._fd is None:
            return
        try:
            if _same_file(self._fd, self.path):
                self.path.unlink()
        except FileNotFoundError:
            pass
        finally:
            _HELD.discard(self._fd)
            os.close(self._fd)
            self._fd = None


@contextlib.contextmanager
def claiming(folder: Path, wait_s: float = CLAIM_WAIT_S) -> Iterator[None]:
    """One claim (check, archive, lock) of ``folder`` at a time: an exclusive ``flock`` on its parent.

    The lock of a run folder lives in the folder, so it cannot cover the moment a fresh run looks
    at an old run and moves it to the history: a second fresh run would lock the new folder the
    first is about to make, or archive the first's. The parent folder's own descriptor is a lock
    no user file can be (nothing is written there) and it outlives the archive's rename; it is held
    for the claim only (milliseconds; an archive across filesystems: its copy), and siblings
    claimed at the same moment wait for each other. ``flock`` on a folder is Linux's and BSD's;
    where it is refused the claim goes on without it, as before.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    _HELD.add(fd)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise FolderLockedError(
                        f"folder {str(folder)!r}: another process has been claiming a folder of "
                        f"{str(folder.parent)!r} for {wait_s:.0f} s. Wait for it to finish, or use another folder."
                    ) from None
                time.sleep(LOCK_RETRY_S)
            except OSError:  # a filesystem without flock on folders: claim without it
                break
        yield
    finally:
        _HELD.discard(fd)
        os.close(fd)  # drops the flock


def _open_error(folder: Path, exc: OSError) -> Exception:
    """The lock file could not be opened: a link (never followed) names itself; others name the file."""
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return link_error(folder, folder / LOCK_NAME)
    return FolderError(
        f"cannot take the lock of folder {str(folder)!r}: opening {str(folder / LOCK_NAME)!r} failed "
        f"({exc.strerror or exc}). Pass a folder you can write to (a run or an analysis writes into it)."
    )


def _ours(raw: bytes) -> bool:
    """Whether the lock file's bytes are a record of ours, a half-written one, or nothing."""
    return raw.startswith(_RECORD_START) or _RECORD_START.startswith(raw)


def _try_flock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _read_info(fd: int) -> dict[str, Any] | None:
    """The lock file's record, or ``None`` when empty or half-written."""
    try:
        info = json.loads(os.pread(fd, 4096, 0))
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino)


def _legacy_live(info: dict[str, Any]) -> bool:
    """An unheld lock file naming a live process of this host, other than this one, that
    started before the lock was written (a later process only reused the pid)."""
    pid = info.get("pid")
    if info.get("host") != socket.gethostname() or not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        return bool(psutil.Process(pid).create_time() <= float(info.get("created", 0)) + 1)
    except (psutil.Error, TypeError, ValueError):
        return False


def _callers_level() -> int:
    """The ``stacklevel`` of the first frame outside ignite_seg and contextlib (the user's call), for a
    warning raised from this module's caller: through ``train()``'s context managers a fixed level
    pointed into contextlib."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    skipped = (package + os.sep, os.path.abspath(contextlib.__file__))
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(skipped):
        frame, level = frame.f_back, level + 1
    return level

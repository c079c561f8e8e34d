"""Atomic file writes: a temporary file in the same folder, fsync, then ``os.replace``.

A reader (or a run restarted after a crash) therefore sees either the previous version of a
file or the complete new one, never a half-written file.
"""
from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import pickle
import re
import secrets
import zipfile
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from ..exceptions import FolderError
from .contained import open_parent

__all__ = [
    "atomic_write_bytes",
    "write_json",
    "read_json",
    "write_npz",
    "to_jsonable",
    "remove_stale_temporaries",
    "named_damage",
]

#: Test hook: callables run with the destination path just before each atomic replace. The
#: fault-injection tests set ``IGNITE_SEG_KILL_AT_WRITE=N`` to SIGKILL the process at its N-th
#: atomic write, which drives kill points deterministically.
_before_replace_hooks: list[Any] = []


#: Number of atomic writes this process has made (the fault-injection tests read it).
write_count = 0


def _fault_hook_from_env() -> None:
    spec = os.environ.get("IGNITE_SEG_KILL_AT_WRITE")
    if not spec:
        return
    target = int(spec)

    def hook(path: Path) -> None:
        if write_count == target:
            os.kill(os.getpid(), 9)

    _before_replace_hooks.append(hook)


_fault_hook_from_env()

#: Prefix and suffix of the temporary files: ``.ignite_seg-<pid>-<name>.<random>.tmp``. A run
#: restarted after a crash removes the ones left behind, and only those (a user's own
#: ``.notes.tmp`` is not ignite_seg's to delete).
TMP_PREFIX = ".ignite_seg-"
TMP_SUFFIX = ".tmp"
_TMP_NAME = re.compile(rf"^{re.escape(TMP_PREFIX)}\d+-.+{re.escape(TMP_SUFFIX)}$")


def is_temporary(name: str) -> bool:
    """Whether the file name ``name`` is one of ignite_seg's own temporary files."""
    return _TMP_NAME.match(name) is not None


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> int:
    """Delete temporary files that a killed writer left in ``folder`` (recursively); count them."""
    n = 0
    for p in Path(folder).rglob(f"{TMP_PREFIX}*{TMP_SUFFIX}"):
        if p.is_file() and is_temporary(p.name):
            p.unlink()
            n += 1
    return n


def _name_the_file(exc: OSError, path: Path) -> None:
    """Name the file being written in ``exc`` when the OS named none (a full disk, an I/O error)."""
    if exc.filename is None:
        exc.filename = str(path)


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: Files get the permissions a plain ``open(path, "w")`` would give (``mkstemp`` makes them 0600).
_FILE_MODE = 0o666 & ~_current_umask()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (same-folder temporary file + ``os.replace``).

    The file's data is fsynced before the rename and its folder after, so the new version
    survives a crash of the machine (on filesystems that honour fsync). An ``OSError`` the OS
    raised without a file name (a full disk) names ``path``.
    """
    path = Path(path)
    global write_count
    dfd = open_parent(path)  # no link inside a run folder is followed (storage/contained.py)
    tmp = ""
    try:
        fd, tmp = _create_temporary(dfd, path.name)
        write_count += 1
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        for hook in _before_replace_hooks:
            hook(path)
        os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = ""
        _fsync_fd(dfd)
    except BaseException as exc:
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)
        if isinstance(exc, OSError):
            _name_the_file(exc, path)
        raise
    finally:
        os.close(dfd)


def _create_temporary(dfd: int, name: str) -> tuple[int, str]:
    """A new temporary file ``.ignite_seg-<pid>-<name>.<random>.tmp`` in the folder ``dfd`` (never a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = f"{TMP_PREFIX}{os.getpid()}-{name}.{secrets.token_hex(4)}{TMP_SUFFIX}"
        try:
            return os.open(tmp, flags, _FILE_MODE, dir_fd=dfd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", name)


def _fsync_fd(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a folder (EINVAL): nothing more to do
        pass


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples and non-finite floats into strict-JSON values.

    NaN and infinities become ``None`` so that every file is valid JSON.
    """
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented, strict JSON (no NaN), atomically."""
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=False, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode("utf-8"))


def read_json(path: str | os.PathLike[str]) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_npz(path: str | os.PathLike[str], **arrays: Any) -> None:
    """Write arrays to an uncompressed ``.npz`` atomically."""
    buf = io.BytesIO()
    named: dict[str, Any] = {k: np.asarray(v) for k, v in arrays.items()}
    np.savez(buf, **named)
    atomic_write_bytes(path, buf.getvalue())


@contextlib.contextmanager
def named_damage(path: Path) -> Iterator[None]:
    """Turn a damaged file's error (a truncated zip, garbage) into a FolderError naming ``path``."""
    try:
        yield
    except (zipfile.BadZipFile, EOFError, ValueError, RuntimeError, pickle.UnpicklingError) as exc:
        raise FolderError(
            f"{str(path)!r} is damaged ({type(exc).__name__}: {exc}). A trial's file: continue the run "
            "(is_continuation=True, trials=0) to run the trial again; results.npz or throughtimes.npz: the "
            "same continuation collates them again."
        ) from exc

"""Writes that stay inside the run folder: no symbolic link inside it is ever followed.

A run folder (registered with :func:`contained` while a run, an analysis or a worker's checkpoint
writes it) is walked from its root one directory at a time, each opened with ``O_NOFOLLOW``
relative to the one above it (``openat``), so a link planted anywhere inside it (``analysis/`` →
an outside folder, ``trials/0`` → elsewhere) cannot redirect a write, a rename or a delete: it
raises :class:`~ignite_seg.exceptions.FolderError` naming the link and the fix. The folder itself
may be a link, and so may any folder above it: those are the caller's choice of place. Final
names are never followed either: a temporary file is created with ``O_EXCL | O_NOFOLLOW`` and
renamed over the target (a rename replaces a link, never writes through it). See
docs/reliability.md, *Links in a run folder*.
"""
from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Iterator

from ..exceptions import FolderError

__all__ = ["contained", "root_of", "open_parent", "mkdir_inside", "unlink_inside", "replace_inside", "link_error"]

#: Run folders this process writes now (absolute paths, as the caller gave them), innermost last.
_ROOTS: list[Path] = []
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)


@contextlib.contextmanager
def contained(root: str | os.PathLike[str]) -> Iterator[Path]:
    """While inside: every write, rename or delete under ``root`` follows no link below it."""
    path = Path(os.path.abspath(root))
    _ROOTS.append(path)
    try:
        yield path
    finally:
        _ROOTS.remove(path)


def root_of(path: Path) -> Path | None:
    """The registered run folder holding ``path`` (lexically), or ``None``."""
    path = Path(os.path.abspath(path))
    for root in reversed(_ROOTS):
        if path == root or root in path.parents:
            return root
    return None


def link_error(root: Path, at: Path) -> FolderError:
    """The error for a link (or a non-folder) at ``at`` inside the run folder ``root``."""
    try:
        target = f" (a link to {os.readlink(at)!r})"
    except OSError:
        target = ""
    return FolderError(
        f"{str(at)!r}{target} in the run folder {str(root)!r} is not a folder of its own: ignite_seg never "
        "writes or deletes through a symbolic link inside a run folder, since it could lead outside it. "
        "Remove the link (or make it a real folder), or use another folder."
    )


def open_parent(path: Path, create: bool = True) -> int:
    """A descriptor of ``path``'s folder, reached without following a link below its run folder.

    Outside any registered run folder the folder is made (``create``) and opened as it is. The
    caller closes the descriptor.
    """
    path = Path(os.path.abspath(path))
    root = root_of(path)
    if root is None or path == root:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    at = root
    try:
        for part in path.parent.relative_to(root).parts:
            at = at / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise link_error(root, at) from None
                exc.filename = str(at)
                raise
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def mkdir_inside(path: Path) -> None:
    """``path.mkdir(parents=True, exist_ok=True)``, following no link inside a run folder."""
    os.close(open_parent(path / "_", create=True))


def unlink_inside(path: Path, missing_ok: bool = True) -> None:
    """Delete the file ``path`` (a link itself, never its target); its folders are reached without links."""
    try:
        fd = open_parent(path, create=False)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.unlink(path.name, dir_fd=fd)
    except FileNotFoundError:
        if not missing_ok:
            raise
    finally:
        os.close(fd)


def replace_inside(src: Path, dst: Path) -> None:
    """``os.replace(src, dst)`` for two names of one folder, reached without links."""
    if src.parent != dst.parent:
        raise ValueError(f"replace_inside renames within one folder, not {src} -> {dst}")
    fd = open_parent(dst, create=False)
    try:
        os.replace(src.name, dst.name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)

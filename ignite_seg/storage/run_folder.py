"""The output folder: layout, archiving, and reading/writing trials (the lock: :mod:`.folder_lock`).

Layout (see docs/usage.md)::

    folder/run.json  hparams/  trials/<i>/  results.npz  throughtimes.npz  analysis/

A trial folder is complete once its ``result.json`` exists: it is written last, after the
``state_dict`` files and the through-time arrays, so a crash leaves either a complete trial or
one that is rerun. An unfinished trial's folder may hold a ``checkpoint.pt`` written by its worker
(the one file a worker writes); it is removed right after the trial's ``result.json``.
"""
from __future__ import annotations

import datetime as _dt
import errno
import logging
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol

import numpy as np

from ..config.hyperparameters import FixedHyperparameters
from ..exceptions import ConfigTypeError, FolderError
from .atomic import atomic_write_bytes, is_temporary, named_damage, read_json, write_json, write_npz
from .contained import mkdir_inside, replace_inside, unlink_inside
from .folder_lock import LOCK_NAME
from .names import (
    ANALYSIS,
    CHECKPOINT_NAME,
    ERROR_TXT,
    FINAL_JSON,
    HIDDEN_NPZ,
    HPARAMS,
    MODEL_BEST_PT,
    MODEL_INIT_PT,
    MODEL_PT,
    MODEL_RAW_PT,
    RESULT_JSON,
    RESULTS_NPZ,
    RUN_JSON,
    THROUGHTIME_NPZ,
    THROUGHTIMES_NPZ,
    TRIALS,
)
from .records import RUN_STATES, RunRecord, RunState, TrialResult, state
from .result_keys import TRIAL_FILES
from .schemas import read_final

__all__ = [
    "RunFolder", "archive_folder", "resolve_folder_arg", "check_history_folder",
    "check_replaceable", "has_content", "RunState", "RUN_STATES", "state", "RUN_JSON", "CHECKPOINT_NAME",
    "TrialFiles",
]

logger = logging.getLogger(__name__)

def resolve_folder_arg(value: Any, name: str) -> Path:
    """The absolute path of the ``folder`` (or ``history_folder``) argument; ``~`` expanded.

    Resolved once, up front: a loader that changes the working directory cannot move it.

    Raises:
        ConfigTypeError: not a path.
        FolderError: a file, not writable, or a folder ignite_seg must never archive (the
            filesystem root, the home directory, the working directory, or one holding them).
    """
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigTypeError(f"{name} must be a path (str or os.PathLike), got {value!r} ({type(value).__name__}).")
    path = Path(os.path.abspath(os.path.expanduser(os.fspath(value))))
    if path.exists() and not path.is_dir():
        raise FolderError(f"{name}={str(path)!r} exists and is not a folder; pass a folder path.")
    if name == "folder":
        _refuse_precious(value, path)
    _check_writable(path, name)
    return path


def _refuse_precious(value: Any, path: Path) -> None:
    real = Path(os.path.realpath(path))
    if real == Path(real.anchor):
        raise FolderError(f"folder={os.fspath(value)!r} is the filesystem root; pass a dedicated subfolder.")
    precious = {"the current working directory": Path(os.path.realpath(os.getcwd())),
                "your home directory": Path(os.path.realpath(os.path.expanduser("~")))}
    for what, place in precious.items():
        if real == place or real in place.parents:
            held = "is" if real == place else "holds"
            raise FolderError(
                f"folder={os.fspath(value)!r} {held} {what} ({str(place)!r}); ignite_seg moves an existing "
                "run folder aside, so it needs a folder of its own. Pass a dedicated subfolder, e.g. "
                f"folder={str(place / 'runs' / 'current')!r}."
            )


def _check_writable(path: Path, name: str) -> None:
    probe = path
    while not probe.exists():
        probe = probe.parent
    try:  # a real write: os.access says yes to root even where writing fails
        fd, tmp = tempfile.mkstemp(prefix=".ignite_seg_probe_", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise FolderError(
            f"{name}={str(path)!r} cannot be written: creating a file in {str(probe)!r} failed "
            f"({exc.strerror or exc}). Pass a folder you can write to."
        ) from None


def check_history_folder(folder: Path, history: Path) -> None:
    """Refuse a ``history_folder`` inside ``folder`` (archiving would move it into itself)."""
    if history == folder or folder in history.parents:
        raise FolderError(
            f"history_folder={str(history)!r} is inside folder={str(folder)!r}: the folder cannot be "
            "moved into itself. Pass a history_folder outside it (the default is folder/../history)."
        )


def has_content(folder: Path) -> bool:
    """Whether ``folder`` holds anything but a lock file and ignite_seg temporaries left by a crash."""
    return folder.is_dir() and any(p.name != LOCK_NAME and not is_temporary(p.name) for p in folder.iterdir())


def check_replaceable(folder: Path) -> None:
    """Refuse to archive a non-empty folder that is not an ignite_seg run (nothing is moved).

    A run is a folder whose run.json is a valid record of ignite_seg's (:meth:`RunFolder.read_run`,
    the rule a continuation applies too): a foreign or unreadable run.json is no run."""
    if not has_content(folder):
        return
    try:
        RunFolder(folder).read_run()
    except FolderError as exc:
        raise FolderError(
            f"folder={str(folder)!r} is not empty and is not an ignite_seg run folder ({exc}), so "
            "ignite_seg will not move it aside. Pass an empty or new folder, or a previous run's folder."
        ) from None


def archive_folder(folder: Path, history_folder: Path) -> Path:
    """Move ``folder`` to ``history_folder/<timestamp>`` (suffix ``_k`` on a clash); return it.

    The destination name is claimed by creating it (two archivers never pick the same one). On
    one filesystem the move is one atomic rename; across filesystems the folder is copied whole
    first and the original removed only after the copy is complete.
    """
    history_folder.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    dest = history_folder / stamp
    k = 1
    while True:
        try:
            dest.mkdir()  # claims the name atomically: two archivers never pick the same one
            break
        except FileExistsError:
            dest = history_folder / f"{stamp}_{k}"
            k += 1
    try:
        os.replace(folder, dest)  # replaces the empty claimed folder
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            dest.rmdir()
            raise
        shutil.copytree(folder, dest, dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(folder)
    return dest


class TrialFiles(Protocol):
    """What :meth:`RunFolder.write_trial` writes of a finished trial (a worker's ``TrialOutcome``)."""

    @property
    def trial_id(self) -> int: ...
    @property
    def model_init(self) -> bytes: ...
    @property
    def model(self) -> bytes: ...
    @property
    def model_raw(self) -> bytes: ...
    @property
    def model_best(self) -> bytes: ...
    @property
    def files(self) -> Mapping[str, bytes]: ...
    @property
    def throughtime(self) -> Mapping[str, np.ndarray]: ...
    @property
    def hidden(self) -> Mapping[str, np.ndarray]: ...
    @property
    def error_text(self) -> str | None:
        """The whole error (``error.txt``), ``None`` without one."""
    @property
    def result(self) -> TrialResult:
        """The ``result.json`` record."""


class RunFolder:
    """Paths and I/O of one run folder. Only the calling process writes it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    # paths
    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def hparams(self) -> Path:
        return self.path / HPARAMS

    @property
    def trials(self) -> Path:
        return self.path / TRIALS

    @property
    def results(self) -> Path:
        return self.path / RESULTS_NPZ

    @property
    def throughtimes(self) -> Path:
        return self.path / THROUGHTIMES_NPZ

    @property
    def analysis(self) -> Path:
        return self.path / ANALYSIS

    def trial(self, trial_id: int) -> Path:
        return self.trials / str(trial_id)

    def is_run(self) -> bool:
        return self.run_json.is_file()

    # run.json
    def read_run(self) -> RunRecord:
        """``run.json``, today's record or an older one converted (:meth:`RunRecord.from_json`).

        Raises:
            FolderError: no run.json, not JSON, or not a record of ignite_seg's.
        """
        try:
            data = read_json(self.run_json)
        except (FileNotFoundError, NotADirectoryError):
            raise FolderError(
                f"{str(self.path)!r} is not an ignite_seg run folder (no run.json). Pass the folder "
                "given to ignite_seg.train(folder=...)."
            ) from None
        except ValueError as exc:
            raise FolderError(f"{str(self.run_json)!r} is not valid JSON ({exc}).") from None
        if not isinstance(data, dict) or "loaders" not in data:
            raise FolderError(f"{str(self.run_json)!r} was not written by ignite_seg.")
        try:
            return RunRecord.from_json(data)
        except (TypeError, ValueError) as exc:
            raise FolderError(f"{str(self.run_json)!r} is not a run record of this ignite_seg ({exc}).") from None

    def write_run(self, record: RunRecord) -> None:
        write_json(self.run_json, record.to_json())

    # trials
    def write_trial(self, outcome: TrialFiles) -> TrialResult:
        """Write one trial's files, ``result.json`` last; return its record."""
        d = self.trial(outcome.trial_id)
        mkdir_inside(d)
        for name, blob in ((MODEL_INIT_PT, outcome.model_init), (MODEL_PT, outcome.model),
                           (MODEL_RAW_PT, outcome.model_raw), (MODEL_BEST_PT, outcome.model_best)):
            if blob:  # model_raw: only with an EMA; model_best: only with a best checkpoint
                atomic_write_bytes(d / name, blob)
        for name, blob in outcome.files.items():  # the user handlers' output_dir
            _write_user_file(d, name, blob)
        if outcome.throughtime:
            write_npz(d / THROUGHTIME_NPZ, **outcome.throughtime)
        if outcome.hidden:
            write_npz(d / HIDDEN_NPZ, **outcome.hidden)
        if outcome.error_text:
            atomic_write_bytes(d / ERROR_TXT, outcome.error_text.encode("utf-8"))
        result = outcome.result
        write_json(d / RESULT_JSON, result.to_json())
        unlink_inside(d / CHECKPOINT_NAME)  # the trial is finished: it never resumes
        return result

    # hparams/final.json
    def read_final(self) -> FixedHyperparameters | None:
        """The trials' recipe (``hparams/final.json``), ``None`` before a tune completed."""
        return read_final(self.hparams / FINAL_JSON)

    def write_final(self, recipe: FixedHyperparameters) -> None:
        write_json(self.hparams / FINAL_JSON, recipe.to_dict())

    def trial_ids(self) -> list[int]:
        if not self.trials.is_dir():
            return []
        return sorted(int(p.name) for p in self.trials.iterdir() if p.name.isdigit())

    def read_result(self, trial_id: int) -> TrialResult | None:
        """The trial's record (an older flat one converted), or ``None`` when the trial never finished
        (or its record is garbage, or a completed trial lacks or has a damaged file)."""
        try:
            data = read_json(self.trial(trial_id) / RESULT_JSON)
            result = TrialResult.from_json(data, trial_id=trial_id) if _readable_record(data) else None
        except (FileNotFoundError, ValueError, TypeError):
            return None
        if result is not None and result.completed:
            d = self.trial(trial_id)
            if not ((d / MODEL_PT).is_file() and (d / THROUGHTIME_NPZ).is_file()) or damaged_file(d):
                return None
        return result

    def set_aside_corrupt_results(self) -> list[int]:
        """Rename each unreadable ``result.json`` to ``result.json.corrupt`` (never deleted); their ids.

        A completed trial with a damaged file (:func:`damaged_file`, logged naming it) is set aside
        the same way. Those trials count as unfinished, so a continuation runs them again.
        """
        moved = []
        for tid in self.trial_ids():
            path = self.trial(tid) / RESULT_JSON
            bad = damaged_file(self.trial(tid)) if path.is_file() and _readable_file(path) else None
            if bad is not None:
                logger.warning("trial %d: %s is damaged (%s); the trial is run again (its result.json kept as "
                               "result.json.corrupt)", tid, self.trial(tid) / bad[0], bad[1])
            if path.is_file() and self.read_result(tid) is None and (bad or not _readable_file(path)):
                dest, k = path.with_name("result.json.corrupt"), 1
                while dest.exists():
                    dest, k = path.with_name(f"result.json.corrupt.{k}"), k + 1
                replace_inside(path, dest)
                moved.append(tid)
        return moved

    def finished_trials(self) -> Iterator[tuple[int, TrialResult]]:
        for tid in self.trial_ids():
            res = self.read_result(tid)
            if res is not None:
                yield tid, res

    def read_throughtime(self, trial_id: int) -> dict[str, np.ndarray]:
        path = self.trial(trial_id) / THROUGHTIME_NPZ
        with named_damage(path), np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}


#: A completed trial's files that are zip archives (``torch.save``'s format, ``.npz``).
ZIP_FILES = (MODEL_PT, MODEL_INIT_PT, MODEL_RAW_PT, MODEL_BEST_PT, THROUGHTIME_NPZ, HIDDEN_NPZ)


def damaged_file(trial: Path) -> tuple[str, str] | None:
    """The first of ``trial``'s zip files (weights, arrays) whose central directory does not read,
    and why; ``None`` when every one present reads. Cheap: only each file's end is read."""
    for name in ZIP_FILES:
        try:
            with zipfile.ZipFile(trial / name) as z:
                z.infolist()
        except FileNotFoundError:
            continue
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            return name, f"{type(exc).__name__}: {exc}"
    return None


def _write_user_file(trial: Path, name: str, blob: bytes) -> None:
    """A user handler's file into the trial folder; a name leaving it, or one of ours, is skipped."""
    if ".." in Path(name).parts or Path(name).is_absolute() or name in TRIAL_FILES:
        logger.warning("not writing the handlers' file %r into %s: not a plain name of its own", name, trial)
        return
    atomic_write_bytes(trial / name, blob)


def _readable_file(path: Path) -> bool:
    try:
        data = read_json(path)
    except ValueError:
        return False
    return _readable_record(data)


def _readable_record(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("status"), str)

"""Logging set-up: INFO lines of ``ignite_seg`` are visible even without any logging config; the
lines and progress bars of a thread that runs one point of a sweep say which point."""
from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Iterator

from tqdm.auto import tqdm

__all__ = ["ensure_logging", "labelled", "tagged", "current_label"]

_local = threading.local()
_factory_lock = threading.Lock()
_factory_installed = False


class _TqdmHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes through ``tqdm.write`` so that log lines do not break the progress bars."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # logging must never raise
            self.handleError(record)


def ensure_logging() -> None:
    """Give the ``ignite_seg`` logger an INFO handler unless the application configured logging."""
    logger = logging.getLogger("ignite_seg")
    if logger.hasHandlers():
        return
    handler = _TqdmHandler()
    handler.setFormatter(logging.Formatter("[ignite_seg] %(message)s"))
    logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


@contextlib.contextmanager
def labelled(label: str) -> Iterator[None]:
    """While inside, this thread's ``ignite_seg`` log lines start with ``label:`` and its progress
    bars' descriptions with ``label`` (a sweep's point, when several run at once)."""
    _install_record_factory()
    previous = getattr(_local, "label", None)
    _local.label = label
    try:
        yield
    finally:
        _local.label = previous


def current_label() -> str | None:
    """This thread's label (:func:`labelled`), ``None`` outside one."""
    return getattr(_local, "label", None)


def tagged(desc: str) -> str:
    """A progress bar's description, with this thread's label (:func:`labelled`) in front."""
    label = getattr(_local, "label", None)
    return f"{label} {desc}" if label else desc


def _install_record_factory() -> None:
    """Once per process: records of ``ignite_seg`` loggers made in a labelled thread get the label
    (a record factory, so that every handler, the application's included, shows it)."""
    global _factory_installed
    with _factory_lock:
        if _factory_installed:
            return
        base = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = base(*args, **kwargs)
            label = getattr(_local, "label", None)
            if label and record.name.startswith("ignite_seg"):
                prefix = label.replace("%", "%%") if record.args else label
                record.msg = f"{prefix}: {record.msg}"
            return record

        logging.setLogRecordFactory(factory)
        _factory_installed = True

"""Logging set-up: INFO lines of ``ignite_seg`` are visible even without any logging config."""
from __future__ import annotations

import logging

from tqdm.auto import tqdm

__all__ = ["ensure_logging"]


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

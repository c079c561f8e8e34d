"""Exceptions raised by ignite_seg.

Every error the library raises on purpose derives from :class:`IgniteSegError`, and the
configuration errors also derive from the built-in ``TypeError`` / ``ValueError`` so that
callers who catch those keep working.
"""
from __future__ import annotations

__all__ = [
    "IgniteSegError",
    "ConfigError",
    "ConfigTypeError",
    "FolderError",
    "FolderLockedError",
    "CheckpointWriteError",
    "AnalysisUnavailableError",
    "TuningError",
]


class IgniteSegError(Exception):
    """Base class of every error raised by ignite_seg."""


class ConfigError(IgniteSegError, ValueError):
    """An argument of :func:`ignite_seg.train` has a bad value.

    The message names the argument, shows the value and says how to fix it.
    """


class ConfigTypeError(ConfigError, TypeError):
    """An argument of :func:`ignite_seg.train` has the wrong type."""


class FolderError(IgniteSegError):
    """The output folder cannot be used as asked (not a run folder, a file, not writable...)."""


class FolderLockedError(FolderError):
    """Another live process holds the lock of the output folder."""


class CheckpointWriteError(IgniteSegError):
    """A trial's mid-trial checkpoint could not be written (a full disk): an error of the run, not
    of the trial. It reaches the caller of ``train()``; a continuation resumes the trial."""


class AnalysisUnavailableError(IgniteSegError):
    """The analysis asked for needs data that this run did not collect."""


class TuningError(IgniteSegError):
    """The tuner could not choose a hyperparameter from the evidence it gathered."""

"""Re-analyse a run folder from the folder alone.

Usage::

    python -m ignite_seg.reanalyze FOLDER [--analysis PRESET] [--cores N] [--force]

Exit codes: 0 done, 2 the folder cannot be analysed (missing, not a run folder, locked by a
live run, or the analysis needs data the run did not collect), 1 an analysis product failed.
"""
from __future__ import annotations

import argparse
import logging
import sys

from .config.analysis import ALIASES, LEVELS
from .exceptions import AnalysisUnavailableError, ConfigError, FolderError

__all__ = ["main"]


def _cores(value: str) -> int | str:
    if value == "all":
        return value
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f'--cores must be a positive int or "all", got {value!r}') from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"--cores must be >= 1, got {n}")
    return n


def _recorded_analysis(folder: str) -> str:
    """The analysis preset the run was trained with (``images`` when it was ``none``)."""
    from .storage.run_folder import RunFolder

    try:
        recorded = RunFolder(folder).read_run().analysis
    except FolderError:  # analyze() says what is wrong with the folder
        return "images"
    return "images" if recorded in ("none", "text") else recorded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ignite_seg.reanalyze", description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a run folder written by ignite_seg.train()")
    parser.add_argument("--analysis", default=None, choices=list(LEVELS) + sorted(ALIASES), metavar="PRESET",
                        help=f"analysis preset: {', '.join(LEVELS)} (default: the run's own analysis "
                        "preset, or images when the run asked for none)")
    parser.add_argument("--cores", type=_cores, default=1, help='worker processes, or "all" (default: 1)')
    parser.add_argument("--force", action="store_true", help="redo every output, even up-to-date ones")
    args = parser.parse_args(argv)

    from .analysis import analyze
    from .runtime.logs import ensure_logging

    ensure_logging()
    log = logging.getLogger("ignite_seg")
    try:
        analysis = args.analysis or _recorded_analysis(args.folder)
        analyze(args.folder, analysis=analysis, cores=args.cores, force=args.force)
    except (FolderError, AnalysisUnavailableError, ConfigError) as exc:
        log.error("%s", exc)
        return 2
    except Exception as exc:  # a product failed; the others were written
        log.error("analysis failed: %s: %s", type(exc).__name__, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""ignite-simple's ``helper.handle(__name__)``: a command line that trains (or reanalyses) a module.

The module holds ``model()``, ``dataset()``, ``loss`` and ``accuracy_style``. The flags are
ignite-simple's: ``--folder`` (default ``out/<module path>``; the run goes to ``<folder>/current``,
old runs to ``<folder>/history``), ``--hparams``, ``--analysis``, ``--analysis_up_to``, ``--trials``,
``--not_continuation``, ``--cores``, ``--reanalyze``, ``--module``, ``--strict_trials``,
``--loggercfg`` (a ``logging.config`` file used when it exists).
"""
from __future__ import annotations

import argparse
import importlib
import logging.config
import os
import sys
from typing import Literal, Sequence

from . import utils  # noqa: F401  (a script importing the helper can torch.load its cached Subsets)
from .analysis import analyze
from .api import train

__all__ = ["handle", "parser"]

logger = logging.getLogger("ignite_seg")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Train (or reanalyse) the model, dataset and loss of a module")
    p.add_argument("--folder", type=str, default=None, help="where to store the output (default out/<module>)")
    p.add_argument("--hparams", type=str, default="fast", help="fastest, fast, slow or slowest")
    p.add_argument("--analysis", type=str, default="images-min", help="analysis preset run at the end")
    p.add_argument("--analysis_up_to", type=str, default="videos", help="analysis possible later without new trials")
    p.add_argument("--trials", type=int, default=1, help="minimum number of trials")
    p.add_argument("--not_continuation", action="store_true", help="archive an existing run instead of adding to it")
    p.add_argument("--cores", type=int, default=-1, help="worker processes (default: all physical cores)")
    p.add_argument("--reanalyze", action="store_true", help="only analyse the existing run")
    p.add_argument("--module", type=str, help="module holding model, dataset, loss and accuracy_style")
    p.add_argument("--strict_trials", action="store_true", help="run exactly --trials trials")
    p.add_argument("--loggercfg", type=str, default="logging.conf", help="logging config file, used if it exists")
    return p


def handle(module: str | None = None, argv: Sequence[str] | None = None) -> None:
    """Parse the command line (``argv``, default ``sys.argv[1:]``) and train or reanalyse ``module``."""
    args = parser().parse_args(argv)
    name = args.module if args.module is not None else module
    if name is None:
        raise ValueError("helper.handle: no module; pass --module NAME or call handle(__name__) from the module.")
    mod = sys.modules["__main__"] if name == "__main__" else importlib.import_module(name)
    folder = args.folder if args.folder is not None else os.path.join("out", *_module_path(name, mod).split("."))
    if os.path.exists(args.loggercfg):
        logging.config.fileConfig(args.loggercfg, disable_existing_loggers=False)
    cores: int | Literal["all"] = args.cores if args.cores != -1 else "all"
    if args.reanalyze:
        analyze(os.path.join(folder, "current"), analysis=args.analysis, cores=cores)
        return
    train((name, "model", (), {}), (name, "dataset", (), {}), (name, "loss", (), {}),
          folder=os.path.join(folder, "current"), hyperparameters=args.hparams, analysis=args.analysis,
          allow_later_analysis_up_to=args.analysis_up_to,
          accuracy_style=getattr(mod, "accuracy_style", "classification"), trials=args.trials,
          is_continuation=not args.not_continuation, history_folder=os.path.join(folder, "history"),
          cores=cores, trials_strict=args.strict_trials)


def _module_path(name: str, mod: object) -> str:
    """The module's dotted name; a script run as ``__main__`` is named by its file."""
    if name != "__main__":
        return name
    path = getattr(mod, "__file__", None) or "main"
    return os.path.splitext(os.path.basename(path))[0]

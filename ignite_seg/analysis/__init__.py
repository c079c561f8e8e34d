"""Analysis of a run folder: text, images, animations, video and an HTML report.

Work in progress (issue 4): only the entry points exist so far.
"""
from __future__ import annotations

import os
from typing import Any

from .settings import AnalysisSettings, resolve_analysis

__all__ = ["analyze", "analyze_folder", "AnalysisSettings", "resolve_analysis"]


def analyze_folder(rf: Any, settings: AnalysisSettings, cores: int = 1, force: bool = False) -> None:
    raise NotImplementedError("analysis is not built yet (issue 4); use analysis='none'")


def analyze(folder: str | os.PathLike[str], *, analysis: str | AnalysisSettings = "images",
            cores: int | str = 1, force: bool = False) -> None:
    raise NotImplementedError("analysis is not built yet (issue 4)")

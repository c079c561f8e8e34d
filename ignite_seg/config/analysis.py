"""Analysis presets: each a strict superset of the previous one."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from ..exceptions import ConfigError, ConfigTypeError
from .records import JsonRecord

__all__ = ["AnalysisSettings", "ANALYSIS_PRESETS", "ALIASES", "LEVELS", "resolve_analysis"]

#: Preset names, from least to most.
LEVELS: tuple[str, ...] = (
    "none",
    "text",
    "images-min",
    "images",
    "animations-draft",
    "animations",
    "video-draft",
    "video",
)

#: The prior art's spellings.
ALIASES: dict[str, str] = {
    "image": "images",
    "imgs": "images",
    "images_min": "images-min",
    "image-min": "images-min",
    "image_min": "images-min",
    "animation": "animations",
    "animations_draft": "animations-draft",
    "animation-draft": "animations-draft",
    "animation_draft": "animations-draft",
    "videos": "video",
    "video_draft": "video-draft",
    "videos-draft": "video-draft",
    "videos_draft": "video-draft",
}


@dataclass(frozen=True)
class AnalysisSettings(JsonRecord):
    """What the analysis produces. ``level`` orders presets (see :data:`LEVELS`).

    Example:
        >>> resolve_analysis("images").images
        True
    """

    name: str = "images"
    level: int = 3
    text: bool = True
    images_min: bool = True
    images: bool = True
    animations: bool = False
    video: bool = False
    draft: bool = False
    #: PNG resolution (the same for every preset; ``-draft`` lowers only the movies).
    dpi: int = 110
    fps: int = 24
    video_height: int = 720
    animation_height: int = 540
    hidden_pca: bool = True


    @property
    def collects_hidden(self) -> bool:
        """Whether trials must record hidden representations for this analysis (the video)."""
        return self.video and self.hidden_pca


def _preset(level: int) -> AnalysisSettings:
    name = LEVELS[level]
    return AnalysisSettings(
        name=name,
        level=level,
        text=level >= 1,
        images_min=level >= 2,
        images=level >= 3,
        animations=level >= 4,
        video=level >= 6,
        draft=name.endswith("-draft"),
        fps=10 if name.endswith("-draft") else 24,
        video_height=360 if name.endswith("-draft") else 720,
        animation_height=360 if name.endswith("-draft") else 540,
    )


ANALYSIS_PRESETS: dict[str, Callable[[], AnalysisSettings]] = {
    name: partial(_preset, level) for level, name in enumerate(LEVELS)
}


def resolve_analysis(value: Any, argname: str = "analysis") -> AnalysisSettings:
    """A preset name (or alias), or an ``AnalysisSettings``, as ``AnalysisSettings``."""
    if isinstance(value, AnalysisSettings):
        return value
    if isinstance(value, str):
        name = ALIASES.get(value, value)
        if name in ANALYSIS_PRESETS:
            return ANALYSIS_PRESETS[name]()
        close = [ALIASES.get(c, c) for c in difflib.get_close_matches(value, [*LEVELS, *ALIASES], n=1)]
        raise ConfigError(f"{argname}={value!r} is not an analysis preset"
                          f"{f' (did you mean {close[0]!r}?)' if close else ''}; use one of {list(LEVELS)}.")
    raise ConfigTypeError(
        f"{argname} must be a preset name ({', '.join(LEVELS)}) or an AnalysisSettings, got "
        f"{value!r} ({type(value).__name__})."
    )

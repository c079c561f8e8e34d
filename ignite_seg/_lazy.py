"""Lazy re-exports for the packages' ``__init__`` (PEP 562): a name is imported from its module on first use.

A layer's ``__init__`` names what the layer exposes without importing it (torch, matplotlib), so
``import ignite_seg`` and ``python -m ignite_seg.reanalyze`` stay cheap.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` that import each of ``names`` (name -> module of the
    package, relative: ``"recipe"``) on first use."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{names[name]}"), name)

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__

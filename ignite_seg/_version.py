"""The package's version, at the bottom of the layers (``run.json`` records it; the root re-exports it)."""
from __future__ import annotations

__version__ = "0.1.0"

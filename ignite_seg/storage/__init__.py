"""Layer 2, the run folder on disk (the only layer that writes files): its layout and states, atomic
writes, the lock, the records of its files and the collator."""
from __future__ import annotations

from .._lazy import lazy_exports

#: What the layer exposes: name -> its module (imported on first use).
_EXPORTS = {
    "RunFolder": "run_folder",
    "RunState": "run_folder",
    "state": "run_folder",
    "archive_folder": "run_folder",
    "write_json": "atomic",
    "read_json": "atomic",
    "write_npz": "atomic",
    "atomic_write_bytes": "atomic",
    "FolderLock": "folder_lock",
    "claimed": "claim",
    "Collator": "collate",
    "MiscFile": "schemas",
    "LRSweepFile": "schemas",
    "BatchSweepFile": "schemas",
    "BatchSampledFile": "schemas",
    "read_final": "schemas",
    "ResultKeys": "result_keys",
    "SweepRecord": "sweep_file",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

"""Constants shared by the tests (import as ``from helpers import ...``)."""
from __future__ import annotations

import ignite_seg

FAST_HP = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=3)
CE = ("torch.nn", "CrossEntropyLoss", (), {})

"""User handlers that break one rank of a trial's group (importable by the workers and their ranks)."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import ignite.distributed as idist
from ignite.engine import Events


def kill_rank(rank: int = 1, at_iteration: int = 3, marker: str | None = None):
    """SIGKILL rank ``rank`` at ``at_iteration``; with ``marker``, only while that file does not exist
    (it is created first: the group's second launch runs to the end)."""
    def attach(trainer, context):
        def kill(_engine):
            if idist.get_rank() != rank or (marker is not None and Path(marker).exists()):
                return
            if marker is not None:
                Path(marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        trainer.add_event_handler(Events.ITERATION_COMPLETED(once=at_iteration), kill)
    return attach


def hang_rank(rank: int = 1, at_iteration: int = 3):
    """Rank ``rank`` stops taking part (sleeps) at ``at_iteration``: the others' collectives time out."""
    def attach(trainer, context):
        def hang(_engine):
            if idist.get_rank() == rank:
                time.sleep(3600)
        trainer.add_event_handler(Events.ITERATION_COMPLETED(once=at_iteration), hang)
    return attach


def write_threads():
    """Writes the rank's torch thread count into ``threads.txt`` (rank 0's comes back)."""
    import torch

    def attach(trainer, context):
        (context.output_dir / "threads.txt").write_text(str(torch.get_num_threads()))
    return attach


def write_rendezvous():
    """Writes the group's rendezvous port and the rank's pid into ``rendezvous.txt`` (rank 0's comes back)."""
    def attach(trainer, context):
        (context.output_dir / "rendezvous.txt").write_text(f"{os.environ['MASTER_PORT']} {os.getpid()}")
    return attach

"""One trial on several processes: ignite's ``idist.Parallel`` (``gloo`` on the CPU, ``nccl`` on CUDA).

:func:`run_trial_group` is the function a worker runs for a trial with ``processes > 1``. It
launches the group with ``idist.Parallel(backend, nproc_per_node=processes)``; every rank runs
:func:`~ignite_seg.engine.trainer.run_trial` with a :class:`RankPlacement`, and rank 0 hands its
:class:`~ignite_seg.engine.trainer.TrialOutcome` back through a file in the worker's temporary folder.

* **Batch size is the global batch.** On the tensor path every rank draws the same permutation
  from the trial's seed and takes its slice of each global batch; its loss is weighted by its
  share, so the gradient DDP averages is the one-process gradient of the same global batch (for a
  loss that is a mean over the batch). On the DataLoader path a ``DistributedSampler`` seeded by
  the trial (``set_epoch`` every epoch) gives each rank batches of ``ceil(batch_size / processes)``:
  the same training in distribution, not the same batches as one process.
* **Measurements on every rank.** Snapshots, final metrics, the EMA, the best checkpoint and the
  user handlers run on every rank's full copy of the model (the same weights after each DDP step), so
  every rank takes the same decisions (a divergence stop, a handler that terminates) without a
  collective; rank 0's are returned. The logged loss is the global batch's, all-reduced.
* **A lost process fails the trial, never hangs it.** The worker notices a rank that died at once
  (``torch.multiprocessing`` ends the others); a rank that hangs makes the others' collectives time
  out after ``collective_timeout`` s. A rank that fails (lost a peer, or the user's code raised: the
  two are told apart by nothing reliable) ends the group; it is launched a second time, as the task
  runner retries a trial whose worker died, and after that the trial is ``failed`` with the last error.
* **Mid-trial checkpoints** (``checkpoint_every``): rank 0 writes the trial's one file, with every
  rank's random states (:mod:`~ignite_seg.engine.checkpoints`); every rank of a later launch loads it,
  so a group relaunched after losing a process, or in a continued run, resumes from its last
  checkpoint. The data order resumes with it: the tensor path's permutations draw from a generator
  the file keeps, and the ``DistributedSampler`` takes its epoch from the trainer's.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import pickle
import socket
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from torch.utils.data import DataLoader, DistributedSampler

from ..config.hyperparameters import FixedHyperparameters
from ..storage.records import TrialResult
from .batching import BatchSource, PrepareBatch, shuffled_batches
from .trainer import LossFn, TrialOutcome, TrialPlacement, TrialTask, create_trainer, resolve_device, run_trial

__all__ = ["run_trial_group", "RankPlacement", "RankBatches", "GROUP_ATTEMPTS", "group_gpus", "visible_gpus"]

logger = logging.getLogger(__name__)

#: Launches of a trial's group before the trial is failed (a lost process is retried once).
GROUP_ATTEMPTS = 2
#: Launches again, not counted as attempts, when the rendezvous port was taken between
#: :func:`_free_port` choosing it and rank 0 binding it (two groups starting at once).
PORT_RETRIES = 3


def backend_for(device: str) -> str:
    """``nccl`` when the trial's ranks train on CUDA, ``gloo`` on the CPU."""
    cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "nccl" if cuda else "gloo"


def visible_gpus() -> list[str]:
    """This process's GPUs as ``CUDA_VISIBLE_DEVICES`` names them (all of them when it is unset)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip()]
    return [str(i) for i in range(torch.cuda.device_count())]


def group_gpus(visible: list[str], device: str, trial_id: int, processes: int) -> list[str]:
    """The GPUs of one trial's ranks, one each: from ``cuda:N`` on, else round-robin by trial.

    Raises ``RuntimeError`` when there are fewer GPUs than ranks (``nccl`` needs one per rank).
    """
    if len(visible) < processes:
        raise RuntimeError(f"trial_processes={processes} on CUDA needs a GPU per process; this worker sees "
                           f"{len(visible)} ({visible}). Pass trial_processes <= {len(visible)}, or device='cpu'.")
    first = int(device.split(":")[1]) if ":" in device else trial_id * processes
    return [visible[(first + r) % len(visible)] for r in range(processes)]


def run_trial_group(task: TrialTask) -> TrialOutcome:
    """Run one trial on ``task.setup.processes`` processes; never raises for a failure of the user's code."""
    started, t0 = time.time(), time.perf_counter()
    if task.threads is None:  # the caller's executor: the worker's threads shared out, not multiplied
        task = dataclasses.replace(task, threads=max(1, torch.get_num_threads() // task.setup.processes))
    errors: list[str] = []
    for attempt in range(1, GROUP_ATTEMPTS + 1):
        outcome, error = _launch(task)
        for _ in range(PORT_RETRIES):  # another process took the free port before rank 0 bound it
            if outcome is not None or "EADDRINUSE" not in error:
                break
            logger.info("trial %d: its rendezvous port was taken; launching again on another", task.trial_id)
            outcome, error = _launch(task)
        if outcome is not None:
            break
        errors.append(error)
        logger.warning("trial %d: its group of %d processes failed (attempt %d): %s",
                       task.trial_id, task.setup.processes, attempt, error.strip().splitlines()[-1:])
    else:
        outcome = TrialOutcome(TrialResult(trial_id=task.trial_id, status="failed"))
        outcome.end("failed", f"the trial's group failed or lost a process {GROUP_ATTEMPTS} times; last:\n{errors[-1]}")
    outcome.result = dataclasses.replace(outcome.result, started_at=started, seconds=time.perf_counter() - t0,
                                         pid=os.getpid())
    return outcome


def _launch(task: TrialTask) -> tuple[TrialOutcome | None, str]:
    """One launch of the group: rank 0's outcome, else ``None`` and why the group failed."""
    backend = backend_for(task.setup.device)
    # fork is quick, and safe on the CPU from a process of one torch thread (the default pool's
    # workers); after a pool of OpenMP threads, or for CUDA, a rank must start afresh
    one_thread = torch.get_num_threads() == 1
    method = "fork" if backend == "gloo" and one_thread and sys.platform.startswith("linux") else "spawn"
    with tempfile.TemporaryDirectory(prefix=f"ignite_seg_group{task.trial_id}_") as tmp:
        result = Path(tmp) / "rank0.pkl"
        error = ""
        try:
            timeout = timedelta(seconds=task.setup.collective_timeout)
            with _gpus_of(task, backend), idist.Parallel(backend=backend, nproc_per_node=task.setup.processes,
                                                         master_port=_free_port(), timeout=timeout,
                                                         start_method=method) as group:
                group.run(_rank_main, task, str(result))
        except Exception:  # a rank died or raised: torch.multiprocessing has ended the others
            error = traceback.format_exc()
        if result.exists():
            with open(result, "rb") as f:
                return pickle.load(f), ""
        return None, error or "the group ended without rank 0's outcome"


@contextlib.contextmanager
def _gpus_of(task: TrialTask, backend: str) -> Iterator[None]:
    """``CUDA_VISIBLE_DEVICES`` of the group's ranks while they start (ignite gives local rank ``r``
    the ``r``-th visible GPU); nothing on the CPU."""
    if backend != "nccl":
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = group_gpus(visible_gpus(), task.setup.device, task.trial_id, task.setup.processes)
    logger.info("trial %d: ranks on GPUs %s", task.trial_id, ", ".join(gpus))
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(local_rank: int, task: TrialTask, result: str) -> None:
    """One rank: the trial with a :class:`RankPlacement`; rank 0 writes its outcome for the worker."""
    _die_with_parent()
    rank = idist.get_rank()
    outcome = run_trial(task, RankPlacement(rank, idist.get_world_size()))
    if outcome.status == "failed":  # end the group now rather than at the others' collective timeout
        raise RuntimeError(f"rank {rank} of trial {task.trial_id} failed:\n{outcome.error_text}")
    if rank == 0:  # a failure is never handed back: a rank that lost a peer fails too, and is retried
        tmp = f"{result}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(outcome, f)
        os.replace(tmp, result)


def _die_with_parent() -> None:
    """On Linux, a rank is killed with its worker (a trial timed out): no orphan waits for the timeout."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


class RankPlacement(TrialPlacement):
    """One rank of a trial's group: its device, its share of each batch, a DDP-wrapped step."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.processes = rank, size
        self._batches: RankBatches | None = None

    def device(self, task: TrialTask) -> torch.device:
        if backend_for(task.setup.device) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())  # ignite set it from the local rank
            label = f"cuda:{visible_gpus()[device.index]}"  # the GPU's name outside the group
        else:
            device = resolve_device(task.setup.device)
            label = str(device)
        gathered: list[str] = idist.all_gather(label)  # type: ignore[assignment]  # a collective: all ranks
        self.devices = tuple(gathered)
        return device

    def batches(self, source: BatchSource, batch_size: int, seed: int) -> RankBatches:
        self._batches = RankBatches(source, batch_size, seed, self.rank, self.processes)
        return self._batches

    def trainer(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss_fn: LossFn,
                device: torch.device, hp: FixedHyperparameters, prepare: PrepareBatch) -> Engine:
        """ignite_seg's step over the DDP-wrapped model; measurements keep using ``model`` itself."""
        ddp = idist.auto_model(model, sync_bn=False)
        optimizer = idist.auto_optim(optimizer)

        def weighted_loss(out: Any, target: tuple[Any, float]) -> torch.Tensor:
            return loss_fn(out, target[0]) * target[1]

        def prepare_share(batch: Any, dev: Any, non_blocking: bool) -> tuple[Any, Any]:
            raw, weight = batch
            x, y = prepare(raw, dev, non_blocking)
            return x, (y, weight)

        engine = create_trainer(ddp, optimizer, weighted_loss, device, hp.grad_clip_norm, hp.amp, prepare_share)
        engine.add_event_handler(Events.ITERATION_COMPLETED, _global_loss, self.processes)  # before DivergenceStop
        if self._batches is not None:  # the sampler's epoch follows the trainer's, restored from a checkpoint too
            engine.add_event_handler(Events.EPOCH_STARTED, self._batches.start_epoch)
        return engine


def _global_loss(engine: Engine, size: int) -> None:
    """The global batch's loss on every rank (each rank's output is its weighted share)."""
    state: Any = engine.state
    state.output = float(idist.all_reduce(torch.tensor(float(state.output)))) / size


class RankBatches:
    """One rank's share of each global batch of ``batch_size``, with its loss weight; one ``iter()`` per epoch.

    Tensor path: the trial's permutation (the same on every rank) cut into global batches; rank
    ``r`` takes the ``r``-th of ``processes`` near-equal slices, weighted by ``len(slice) * processes
    / len(batch)`` (a rank with no item gets one, weighted 0). DataLoader path: a ``DistributedSampler``
    seeded by the trial, weight 1.
    """

    def __init__(self, source: BatchSource, batch_size: int, seed: int, rank: int, size: int) -> None:
        self.source, self.batch_size, self.rank, self.size = source, int(batch_size), rank, size
        self.generator = torch.Generator().manual_seed(seed)
        self.epoch = 0
        self._loader: DataLoader[Any] | None = None
        self.sampler: DistributedSampler[Any] | None = None
        if not source.fast:
            self.sampler = DistributedSampler(source.dataset, num_replicas=size, rank=rank, shuffle=source.shuffle,
                                              seed=seed)
            self._loader = DataLoader(
                source.dataset, batch_size=math.ceil(self.batch_size / size), sampler=self.sampler,
                collate_fn=source.collate_fn, num_workers=source.num_workers, pin_memory=source.pin_memory,
            )

    def __len__(self) -> int:
        if self._loader is not None:
            return len(self._loader)
        return (len(self.source) + self.batch_size - 1) // self.batch_size

    def finish_epoch(self) -> None:
        """Nothing to run out (the interface of :class:`~ignite_seg.engine.batching.Batches`)."""

    def start_epoch(self, engine: Engine) -> None:
        """The ``DistributedSampler``'s epoch from the trainer's (``Events.EPOCH_STARTED``): 0, 1, ... as
        ``iter()`` counts them, and right after a trial resumed from a checkpoint."""
        self.epoch = engine.state.epoch - 1

    def __iter__(self) -> Iterator[tuple[Any, float]]:
        if self._loader is not None and self.sampler is not None:
            self.sampler.set_epoch(self.epoch)
            self.epoch += 1
            yield from ((batch, 1.0) for batch in self._loader)
            return
        assert self.source.tensors is not None
        x, y = self.source.tensors
        for idx in shuffled_batches(len(x), self.batch_size, self.generator, self.source.shuffle):
            mine = torch.tensor_split(idx, self.size)[self.rank]
            weight = len(mine) * self.size / len(idx)
            if len(mine) == 0:
                mine = idx[:1]
            yield (x[mine], y[mine]), weight

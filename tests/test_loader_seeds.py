"""The DataLoader path's random draws, epoch by epoch: what a checkpoint at an epoch's end must hold.

Every epoch's order and augmentation follow from the trial's batch generator: its state after
``Batches.finish_epoch`` decides the next epoch's order and, with DataLoader workers (persistent:
started once per trial), the seeds from which each worker draws its augmentation; the
augmentation still changes from epoch to epoch and from worker to worker.
"""
from __future__ import annotations

import itertools

import pytest
import torch
from resume_tasks import Draws

from ignite_seg.engine.batching import Batches, BatchSource, Data

N, BATCH = 24, 4  # 6 batches per epoch


def _batches(num_workers: int, seed: int = 0) -> Batches:
    data = Data(Draws(N), Draws(4), num_workers=num_workers)
    return Batches(BatchSource(data.train, data), BATCH, torch.Generator().manual_seed(seed))


def _epoch(batches: Batches) -> tuple[torch.Tensor, torch.Tensor]:
    """One epoch as a trainer takes it (``len`` batches, then the checkpoint's ``finish_epoch``):
    the ``[index, torch seed, worker id, pid]`` rows and the draws, in the order read."""
    got = list(itertools.islice(iter(batches), len(batches)))
    batches.finish_epoch()
    return torch.cat([who for who, _ in got]), torch.cat([draws for _, draws in got])


def _int64(generator: torch.Generator) -> int:
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_next_epoch_draws_its_seed_then_its_order_from_the_state_at_the_epoch_end(num_workers):
    batches = _batches(num_workers)
    _epoch(batches)
    at_end = batches.generator.get_state()  # what a checkpoint after epoch 1 keeps
    who, _ = _epoch(batches)
    replay = torch.Generator()
    replay.set_state(at_end)
    seed = _int64(replay)  # the DataLoader's base seed (no workers) or the epoch's seed (workers)
    order = torch.randperm(N, generator=replay)  # then the epoch's permutation
    assert who[:, 0].tolist() == order.tolist()
    if num_workers:  # batch j is read by worker j % 2, which re-seeded itself with the epoch's seed + its id
        ids = torch.arange(N) // BATCH % num_workers
        assert who[:, 2].tolist() == ids.tolist()
        assert who[:, 1].tolist() == (seed + ids).tolist()
    else:
        torch.randperm(N, generator=replay)  # the RandomSampler's permutation once it runs out, unused
    assert torch.equal(batches.generator.get_state(), replay.get_state())


def test_augmentation_in_workers_changes_every_epoch_and_between_workers_in_the_same_processes():
    batches = _batches(2)
    epochs = [_epoch(batches) for _ in range(3)]
    by_item = [draws[who[:, 0].argsort()] for who, draws in epochs]  # rows by item index
    for a, b in itertools.combinations(by_item, 2):
        assert (a != b).all()  # torch, numpy and random each draw anew every epoch: nothing frozen
    who, draws = epochs[0]
    first = [draws[(who[:, 2] == k).nonzero()[0, 0]] for k in (0, 1)]  # each worker's first draws
    assert (first[0] != first[1]).all()  # the workers' streams are not copies of each other
    pids = [set(who[:, 3].tolist()) for who, _ in epochs]
    assert len(pids[0]) == 2 and pids[0] == pids[1] == pids[2]  # the same two workers serve every epoch


def test_restored_generator_gives_the_same_epochs_in_workers_as_an_uninterrupted_run():
    reference = _batches(2)
    want = [_epoch(reference) for _ in range(3)]
    before = _batches(2)
    _epoch(before)
    state = before.generator.get_state()
    after = _batches(2, seed=7)  # another process, until the checkpoint is loaded
    after.generator.set_state(state)
    for (w_who, w_draws), (g_who, g_draws) in zip(want[1:], [_epoch(after) for _ in range(2)]):
        assert torch.equal(g_who[:, :3], w_who[:, :3]) and torch.equal(g_draws, w_draws)

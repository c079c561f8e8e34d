"""The DataLoader path's random draws, epoch by epoch: what a checkpoint at an epoch's end must hold.

With DataLoader workers started afresh each epoch, every epoch's augmentation comes from worker
seeds that the trial's batch generator draws at ``iter()``: the generator's state after
``Batches.finish_epoch`` decides the next epoch's worker seeds and order exactly, and the
augmentation still changes from epoch to epoch.
"""
from __future__ import annotations

import itertools

import pytest
import torch
from resume_tasks import Draws

from ignite_seg.engine.batching import Batches, BatchSource, Data
from ignite_seg.exceptions import ConfigTypeError

N, BATCH = 24, 4  # 6 batches per epoch


def _batches(num_workers: int, persistent: bool = False, seed: int = 0) -> Batches:
    data = Data(Draws(N), Draws(4), num_workers=num_workers, persistent_workers=persistent)
    return Batches(BatchSource(data.train, data), BATCH, torch.Generator().manual_seed(seed))


def _epoch(batches: Batches) -> tuple[torch.Tensor, torch.Tensor]:
    """One epoch as a trainer takes it (``len`` batches, then the checkpoint's ``finish_epoch``):
    the ``[index, worker seed, worker id]`` rows and the draws, in the order read."""
    got = list(itertools.islice(iter(batches), len(batches)))
    batches.finish_epoch()
    return torch.cat([who for who, _ in got]), torch.cat([draws for _, draws in got])


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_next_epoch_draws_its_worker_seed_then_its_order_from_the_state_at_the_epoch_end(num_workers):
    batches = _batches(num_workers)
    _epoch(batches)
    at_end = batches.generator.get_state()  # what a checkpoint after epoch 1 keeps
    who, _ = _epoch(batches)
    replay = torch.Generator()
    replay.set_state(at_end)
    base = int(torch.empty((), dtype=torch.int64).random_(generator=replay))  # iter(): the workers' base seed
    order = torch.randperm(N, generator=replay)  # then the RandomSampler's permutation
    assert who[:, 0].tolist() == order.tolist()
    if num_workers:  # batch j is read by worker j % 2, seeded base + its id
        ids = torch.arange(N) // BATCH % num_workers
        assert who[:, 2].tolist() == ids.tolist()
        assert who[:, 1].tolist() == (base + ids).tolist()
    torch.randperm(N, generator=replay)  # the permutation the sampler draws once it runs out, unused
    assert torch.equal(batches.generator.get_state(), replay.get_state())


def test_augmentation_in_workers_changes_every_epoch_and_between_workers():
    batches = _batches(2)
    epochs = [_epoch(batches) for _ in range(3)]
    by_item = [draws[who[:, 0].argsort()] for who, draws in epochs]  # rows by item index
    for a, b in itertools.combinations(by_item, 2):
        assert (a != b).all()  # torch, numpy and random each draw anew every epoch: nothing frozen
    who, draws = epochs[0]
    first = [draws[(who[:, 2] == k).nonzero()[0, 0]] for k in (0, 1)]  # each worker's first draws
    assert (first[0] != first[1]).all()  # the workers' numpy and random streams are not copies of each other


def test_restored_generator_gives_the_same_epochs_in_workers_as_an_uninterrupted_run():
    reference = _batches(2)
    want = [_epoch(reference) for _ in range(3)]
    before = _batches(2)
    _epoch(before)
    state = before.generator.get_state()
    after = _batches(2, seed=7)  # another process, until the checkpoint is loaded
    after.generator.set_state(state)
    for (w_who, w_draws), (g_who, g_draws) in zip(want[1:], [_epoch(after) for _ in range(2)]):
        assert torch.equal(g_who, w_who) and torch.equal(g_draws, w_draws)


def test_persistent_workers_are_asked_for_and_keep_their_random_state_across_epochs():
    batches = _batches(2, persistent=True)
    assert batches.source.persistent
    one, two = _epoch(batches)[0], _epoch(batches)[0]
    assert torch.equal(one[:, 1], two[:, 1])  # the same worker seeds: drawn once, by the first epoch only
    assert not _batches(0, persistent=True).source.persistent  # nothing to keep without workers
    with pytest.raises(ConfigTypeError, match=r"Data\(persistent_workers=1\) must be True or False"):
        Data(Draws(2), Draws(2), persistent_workers=1)  # type: ignore[arg-type]

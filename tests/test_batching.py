"""The data record and the two batching paths (tensor indexing, seeded DataLoader)."""
from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset, Subset, TensorDataset

from ignite_seg.engine.batching import Batches, BatchSource, Data, as_data, default_prepare_batch, tensor_pair
from ignite_seg.exceptions import ConfigError


class RandomFlip(Dataset):
    """Items whose input is flipped at random in ``__getitem__`` (augmentation), counting reads."""

    def __init__(self, n: int = 16) -> None:
        self.x = torch.arange(n * 4, dtype=torch.float32).reshape(n, 4)
        self.reads = 0

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        self.reads += 1
        x = self.x[i]
        if torch.rand(()) < 0.5:
            x = x.flip(0)
        return x, torch.tensor(i % 2)


def _epoch(batches: Batches) -> list[torch.Tensor]:
    return [b[0] for b in batches]


def test_random_augmentation_is_drawn_afresh_every_epoch():
    torch.manual_seed(0)
    ds = RandomFlip()
    batches = Batches(BatchSource(ds, Data(ds, ds)), 16, torch.Generator().manual_seed(1))
    gen_state = batches.generator.get_state()
    first = _epoch(batches)
    batches.generator.set_state(gen_state)  # same order, so only the augmentation can differ
    second = _epoch(batches)
    assert ds.reads == 32
    assert not torch.equal(first[0], second[0])


def test_cache_reads_once_and_freezes_the_draw_as_documented():
    torch.manual_seed(0)
    ds = RandomFlip()
    source = BatchSource(ds, Data(ds, ds, cache=True))
    assert ds.reads == 16 and source.fast  # equal-shape pairs are stacked into tensors
    batches = Batches(source, 16, torch.Generator().manual_seed(1))
    state = batches.generator.get_state()
    first = _epoch(batches)
    batches.generator.set_state(state)
    assert torch.equal(first[0], _epoch(batches)[0]) and ds.reads == 16


def test_tensor_datasets_and_their_subsets_take_the_fast_path():
    ds = TensorDataset(torch.arange(10.0).reshape(5, 2), torch.arange(5))
    assert BatchSource(ds, Data(ds, ds)).fast
    x, y = tensor_pair(Subset(Subset(ds, [4, 3, 2]), [0, 2]))
    assert y.tolist() == [4, 2] and x[0].tolist() == [8.0, 9.0]
    # a collate_fn of the user's is always honoured: no fast path then
    assert not BatchSource(ds, Data(ds, ds, collate_fn=lambda items: items)).fast


def test_same_seed_same_batches_on_both_paths():
    ds = RandomFlip(8)
    for source in (BatchSource(TensorDataset(ds.x, torch.arange(8)), Data(ds, ds)), BatchSource(ds, Data(ds, ds))):
        runs = []
        for _ in range(2):
            torch.manual_seed(3)
            runs.append(_epoch(Batches(source, 3, torch.Generator().manual_seed(5))))
        assert all(torch.equal(a, b) for a, b in zip(*runs, strict=True))


def test_fixed_subsets_and_in_order_use_the_collate_fn():
    def pad(items):
        n = max(len(x) for x, _ in items)
        return torch.stack([torch.nn.functional.pad(x, (0, n - len(x))) for x, _ in items]), torch.tensor([y for _, y in items])

    items = [(torch.ones(k), k) for k in (1, 3, 2)]
    source = BatchSource(items, Data(items, items, collate_fn=pad))
    (x, y), = source.fixed([2, 1])
    assert x.shape == (2, 3) and y.tolist() == [2, 3]
    assert [b[1].tolist() for b in source.in_order(batch_size=2)] == [[1, 3], [2]]


def test_val_may_be_named_sets_the_first_primary():
    ds = TensorDataset(torch.zeros(2, 1), torch.zeros(2))
    data = Data(ds, {"clean": ds, "noisy": ds})
    assert data.val_names == ("clean", "noisy") and data.primary is ds
    assert as_data((ds, ds)).val_names == ("val",)


@pytest.mark.parametrize("bad, match", [
    (dict(val={}), "no validation set"),
    (dict(val={"a b": None}), "letters, digits"),
    (dict(val={"x_smoothed": None}), "not ending"),
    (dict(collate_fn=3), "collate_fn"),
    (dict(num_workers=-1), "num_workers"),
    (dict(cache="yes"), "cache"),
    (dict(shuffle=1), r"Data\(shuffle=1\) must be True"),
    (dict(eval_batch_size=0), r"Data\(eval_batch_size=0\) must be an int >= 1, or None for 1024"),
    (dict(eval_batch_size=True), "eval_batch_size"),
])
def test_bad_data_records_name_the_argument(bad, match):
    with pytest.raises(ConfigError, match=match):
        Data(**{"train": [], "val": [], **bad})


def test_a_loader_returning_neither_pair_nor_data_is_refused():
    with pytest.raises(ConfigError, match="pair .*ignite_seg.Data"):
        as_data([1, 2, 3])


def test_default_prepare_batch_says_what_to_pass_for_dict_batches():
    with pytest.raises(TypeError, match="prepare_batch"):
        default_prepare_batch({"x": torch.zeros(1), "y": torch.zeros(1)}, "cpu")


def test_default_prepare_batch_moves_a_pair_of_tensors_like_ignites_convert_tensor():
    from ignite.utils import convert_tensor

    x, y = torch.randn(4, 3), torch.arange(4)
    kept = default_prepare_batch((x, y), None, False)
    assert kept[0] is x and kept[1] is y  # no device: the tensors as they are
    moved = default_prepare_batch([x, y], torch.device("cpu"), True)
    expected = (convert_tensor(x, torch.device("cpu"), True), convert_tensor(y, torch.device("cpu"), True))
    assert all(torch.equal(a, b) and a.dtype == b.dtype and a.device == b.device for a, b in zip(moved, expected))
    nested = default_prepare_batch(((x, {"extra": y}), y), "cpu", False)  # any other batch: convert_tensor's walk
    assert torch.equal(nested[0][0], x) and torch.equal(nested[0][1]["extra"], y) and isinstance(nested[0][1], dict)


@pytest.mark.parametrize("workers", [0, 1])
def test_shuffle_false_gives_the_datasets_order_every_epoch_on_both_paths(workers):
    ds = TensorDataset(torch.arange(10, dtype=torch.float32)[:, None], torch.arange(10))
    fast = BatchSource(ds, Data(ds, ds, shuffle=False))
    loader = BatchSource(ds, Data(ds, ds, shuffle=False, collate_fn=torch.utils.data.default_collate,
                                  num_workers=workers))
    assert fast.fast and not loader.fast
    for source in (fast, loader):
        batches = Batches(source, 4, torch.Generator().manual_seed(0))
        for _ in range(2):
            assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    shuffled = Batches(BatchSource(ds, Data(ds, ds)), 4, torch.Generator().manual_seed(0))
    assert [b[1].tolist() for b in shuffled] != [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_eval_batch_size_sizes_the_snapshot_and_final_batches():
    ds = TensorDataset(torch.zeros(10, 1), torch.arange(10))
    source = BatchSource(ds, Data(ds, ds, eval_batch_size=4))
    assert [len(b[1]) for b in source.in_order()] == [4, 4, 2]
    assert [len(b[1]) for b in source.fixed(range(7))] == [4, 3]
    default = BatchSource(ds, Data(ds, ds))
    assert default.eval_batch_size == 1024 and [len(b[1]) for b in default.in_order()] == [10]

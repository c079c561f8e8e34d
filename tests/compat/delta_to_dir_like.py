"""The shape of ignite-simple's examples/delta_to_dir.py: a dataset cached with torch.save of a
utils.split pair, read back with torch.load in every process; helper.handle(__name__)."""
import os

import torch

import ignite_seg as ignite_simple
import ignite_seg.helper  # noqa: F401

CACHE = os.environ["COMPAT_CACHE"]


def model():
    return torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def dataset():
    if os.path.exists(CACHE):
        return torch.load(CACHE)
    g = torch.Generator().manual_seed(0)
    inps = torch.randn(300, 2, generator=g)
    outs = (inps[:, 0] > 0).long() * 2 + (inps[:, 1] > 0).long()  # the quadrant: a direction
    dset = torch.utils.data.TensorDataset(inps, outs)
    result = ignite_simple.utils.split(dset, 0.1)
    torch.save(result, CACHE)
    return result


loss = torch.nn.CrossEntropyLoss
accuracy_style = 'classification'

if __name__ == '__main__':
    ignite_simple.helper.handle(__name__)

"""The shape of ignite-simple's examples/mnist_nonlins.py: sweeper.sweep over nonlinearities with
FixedSweep.with_fixed_trials, and the result tuples indexed as the example does."""
import json
import os
import sys

import torch

import ignite_seg.gen_sweep.sweeper as sweeper
from ignite_seg.gen_sweep.param_selectors import FixedSweep

NONLINEARITIES = ['Tanh', 'ReLU']


def model(nonlin: str):
    return torch.nn.Sequential(torch.nn.Linear(8, 16), getattr(torch.nn, nonlin)(), torch.nn.Linear(16, 3))


def dataset():
    from tasks import blobs

    return blobs(n_train=192, n_val=96)


loss = torch.nn.CrossEntropyLoss
accuracy_style = 'classification'


def main():
    folder = sys.argv[1]
    os.makedirs(folder)  # fail if already exists
    res = sweeper.sweep(__name__, FixedSweep.with_fixed_trials(list((s,) for s in NONLINEARITIES), 2), 2,
                        sys.argv[2], folder)
    labels = [pt[0][0] for pt in res]
    avg_perfs = [pt[4].mean() for pt in res]  # use 6 for validation
    print("RESULT " + json.dumps({"labels": labels, "train": avg_perfs, "val": [pt[6].mean() for pt in res],
                                  "loss_val": [pt[7].tolist() for pt in res], "lr": [pt[1] for pt in res],
                                  "bs": [pt[3] for pt in res]}))


if __name__ == '__main__':
    main()

"""The shape of ignite-simple's examples/mnist.py: a pair model and helper.handle(__name__).

Run as a script, as its users ran it; synthetic blobs instead of the MNIST download.
"""
import torch

import ignite_seg as ignite_simple
import ignite_seg.helper  # noqa: F401  (the example imports ignite_simple.helper)


class WithHidden(torch.nn.Module):
    """Stands in for torchluent's model with hidden outputs: (output, [hidden...])."""

    def __init__(self, stripped):
        super().__init__()
        self.stripped = stripped

    def forward(self, x):
        h = self.stripped[1](self.stripped[0](x))
        return self.stripped[2](h), [h]


def model():
    stripped = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    return WithHidden(stripped), stripped  # torchluent's build(with_stripped=True)


def dataset():
    from tasks import blobs

    return blobs(n_train=192, n_val=96)


loss = torch.nn.CrossEntropyLoss
accuracy_style = 'classification'

if __name__ == '__main__':
    ignite_simple.helper.handle(__name__)

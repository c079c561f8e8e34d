"""A stand-in for torchvision in bench/ignite_simple_examples.py: ignite-simple's examples use
``torchvision.datasets.MNIST/FashionMNIST/CIFAR10`` (downloads) and ``transforms.ToTensor``.

There are no downloads here, and PyPI's torchvision cannot be imported beside the CPU build of torch
on this machine ("operator torchvision::nms does not exist"), so these synthetic datasets of the same
shapes and types stand in for them: the one change the migration goal allows ("synthetic data where
they download"). Nothing else of torchvision is provided.
"""
from . import datasets, transforms

__all__ = ["datasets", "transforms"]
__version__ = "0.0+synthetic"

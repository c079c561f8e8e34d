from pathlib import Path

from setuptools import find_packages, setup

setup(
    name="ignite_seg",
    version="0.1.0",
    description="Tuned, parallel, recorded and analysed PyTorch training with pytorch-ignite",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["ignite_seg", "ignite_seg.*"]),
    package_data={"ignite_seg": ["py.typed"]},
    python_requires=">=3.10",
    install_requires=[
        "torch>=2.0",
        "pytorch-ignite>=0.5",
        "numpy>=1.22",
        "psutil>=5.8",
        "matplotlib>=3.5",
        "tqdm>=4.60",
    ],
    extras_require={
        "video": ["imageio-ffmpeg>=0.4", "imageio>=2.20"],
        "dask": ["dask[distributed]>=2023.1"],
        "ray": ["ray>=2.5"],
        "examples": ["scikit-learn>=1.0"],
        "tensorboard": ["tensorboard>=2.10"],
        "dev": [
            "pytest>=7",
            "pytest-timeout>=2",
            "ruff>=0.4",
            "mypy>=1.0",
            "scikit-learn>=1.0",
            "imageio-ffmpeg>=0.4",
            "imageio>=2.20",
            "dask[distributed]>=2023.1",
            "ray>=2.5",
            "tensorboard>=2.10",
            "optuna>=3.0",  # bench/tune_quality.py --anchors only
            "prodigyopt>=1.0",  # bench/tune_quality.py --anchors only
        ],
    },
    classifiers=["Programming Language :: Python :: 3", "Topic :: Scientific/Engineering :: Artificial Intelligence"],
)

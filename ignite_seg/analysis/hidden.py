"""Hidden representations (``hidden.npz``): a 3D PCA per epoch, coloured by class."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, cast

import numpy as np

from ._mpl import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from mpl_toolkits.mplot3d.axes3d import Axes3D

__all__ = ["PCAInfo", "pca_info", "pca_at", "pca_limit", "plot_hidden_pca", "draw_pca"]


class PCAInfo(NamedTuple):
    epochs: np.ndarray
    layer_name: str
    coords: np.ndarray
    explained: np.ndarray
    labels: np.ndarray
    categorical: bool
    n_features: int
    #: the recorded module's class (``ReLU``), when the run recorded it; and the trial it comes from
    layer_type: str = ""
    trial: int | None = None

    def layer_title(self) -> str:
        """The layer as a reader finds it in the model: ``module '1' (ReLU) of trial 0``."""
        kind = f" ({self.layer_type})" if self.layer_type else ""
        trial = f" of trial {self.trial}" if self.trial is not None else ""
        return f"module '{self.layer_name}'{kind}{trial}"


def _labels(targets: np.ndarray) -> tuple[np.ndarray, bool]:
    t = np.asarray(targets)
    if t.ndim == 2 and t.shape[1] > 1:
        return np.argmax(t, axis=1).astype(np.int64), True
    t = t.reshape(t.shape[0])
    if np.issubdtype(t.dtype, np.integer) or np.issubdtype(t.dtype, np.bool_):
        return t.astype(np.int64), True
    return t.astype(np.float64), False


def _pca3(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates on the first 3 principal components (zero-padded) and their variance fractions."""
    x = np.asarray(x, dtype=np.float64)
    xc = x - x.mean(axis=0, keepdims=True)
    _u, s, vt = np.linalg.svd(xc, full_matrices=False)
    k = min(3, vt.shape[0])
    coords = np.zeros((x.shape[0], 3))
    coords[:, :k] = xc @ vt[:k].T
    var = s**2
    explained = np.zeros(3)
    total = var.sum()
    if total > 0:
        explained[:k] = var[:k] / total
    return coords, explained


def pca_info(hidden: Mapping[str, Any], layer: int = -1, trial: int | None = None) -> PCAInfo | None:
    """Per-epoch 3D PCA of one recorded layer (the last by default), signs aligned between epochs.

    Each epoch gets its own principal components (the representation changes a lot); the sign
    of each component is flipped where needed so that consecutive epochs agree (positive
    correlation of the coordinates), so an animation does not jump. ``None`` without layers.
    """
    names = [str(n) for n in np.asarray(hidden.get("layer_names", np.zeros(0))).ravel()]
    if not names:
        return None
    k = layer % len(names)
    values = np.asarray(hidden[f"layer_{k}"], dtype=np.float64)
    epochs = np.asarray(hidden["epochs"], dtype=np.float64)
    labels, categorical = _labels(np.asarray(hidden["targets"]))
    coords = np.zeros(values.shape[:2] + (3,))
    explained = np.zeros((values.shape[0], 3))
    for e in range(values.shape[0]):
        c, ex = _pca3(values[e])
        if e > 0:
            signs = np.sign(np.sum(c * coords[e - 1], axis=0))
            c = c * np.where(signs == 0, 1.0, signs)
        coords[e], explained[e] = c, ex
    types = [str(n) for n in np.asarray(hidden.get("layer_types", np.zeros(0))).ravel()]
    return PCAInfo(epochs, names[k], coords, explained, labels, categorical, int(values.shape[2]),
                   types[k] if len(types) == len(names) else "", trial)


def pca_at(info: PCAInfo, position: float) -> np.ndarray:
    """Coordinates at a fractional epoch index (linear interpolation between recorded epochs)."""
    last = info.coords.shape[0] - 1
    position = min(max(position, 0.0), float(last))
    i = int(np.floor(position))
    if i >= last:
        return info.coords[last]
    w = position - i
    return (1 - w) * info.coords[i] + w * info.coords[i + 1]


def _limits(info: PCAInfo) -> np.ndarray:
    """Per-epoch scale: the 98th percentile of |coordinate|, so one outlier does not shrink the cloud."""
    return np.maximum(np.percentile(np.abs(info.coords), 98, axis=(1, 2)), 1e-12)


def pca_limit(info: PCAInfo, position: float) -> float:
    """Half-width of the cube shown at ``position`` (interpolated between epochs)."""
    return float(np.interp(position, np.arange(info.coords.shape[0]), _limits(info)) * 1.1)


def draw_pca(ax: Axes3D, info: PCAInfo, position: float, azim: float, elev: float = 20.0, legend: bool = True) -> None:
    """A 3D scatter of the sample at ``position`` (fractional epoch index), seen from ``azim``.

    One scatter per class (categorical labels), labelled ``class <c>``, in class order.
    """
    c = pca_at(info, position)
    lim = pca_limit(info, position)
    if info.categorical:
        classes = np.unique(info.labels)
        cmap_name = "tab10" if classes.size <= 10 else "tab20"
        from matplotlib import colormaps

        cmap = colormaps[cmap_name]
        for j, cl in enumerate(classes):
            m = info.labels == cl
            ax.scatter(c[m, 0], c[m, 1], c[m, 2], s=10, color=cmap(j % cmap.N), depthshade=False,
                       label=f"class {cl}")
        if legend and classes.size <= 20:
            ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="colour", title_fontsize=6,
                      markerscale=1.2, framealpha=0.8)
    else:
        ax.scatter(c[:, 0], c[:, 1], c[:, 2], s=10, c=info.labels, cmap="viridis", depthshade=False)
    for setter in (ax.set_xlim, ax.set_ylim, ax.set_zlim):
        setter(-lim, lim)
    i = int(round(min(max(position, 0), info.coords.shape[0] - 1)))
    ex = info.explained[i]
    ax.set_xlabel(f"PC1 ({ex[0]:.0%})", fontsize=7, labelpad=-10)
    ax.set_ylabel(f"PC2 ({ex[1]:.0%})", fontsize=7, labelpad=-10)
    ax.set_zlabel(f"PC3 ({ex[2]:.0%})", fontsize=7, labelpad=-10)
    ax.set_xticklabels([])
    ax.set_yticklabels([])
    ax.set_zticklabels([])
    ax.view_init(elev=elev, azim=azim)


def plot_hidden_pca(info: PCAInfo, dpi: float = 110) -> Figure:
    """Start and end of training side by side (3D PCA of the hidden representation)."""
    fig = new_figure(11, 5, dpi)
    last = info.coords.shape[0] - 1
    for j, pos in enumerate((0, last)):
        ax = cast("Axes3D", fig.add_subplot(1, 2, j + 1, projection="3d"))
        draw_pca(ax, info, float(pos), azim=-60, legend=(j == 1))
        ax.set_title(f"epoch {info.epochs[pos]:g}", fontsize=10)
    fig.suptitle(f"Hidden representation of {info.labels.size} val points ({info.layer_title()}, "
                 f"{info.n_features} features): 3D PCA, {'coloured by class' if info.categorical else 'coloured by target'}")
    return fig

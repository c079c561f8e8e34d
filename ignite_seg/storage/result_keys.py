"""The names of the metrics in the result files: one owner for the key scheme.

A run measures loss and perf on the training subset and on every validation set, and each
custom metric ``<m>`` on the same splits. A *split* is named by its key suffix: ``train``,
``val`` (the primary validation set, whatever its name: ignite-simple's keys) and
``val_<set>`` (every other named set)::

    throughtime.npz / throughtimes.npz   losses_<split>  perfs_<split>  metric_<m>_<split>
    result.json's metrics                loss_<split>    perf_<split>   metric_<m>_<split>
    results.npz                          final_ + the name in result.json's metrics

With ``train(best_metric=..., best_mode=...)`` every trial also records where its best checkpoint
was taken (:class:`BestRecord`): ``result.json``'s ``best`` (``metric``, ``mode``, ``epoch``,
``value``); ``results.npz`` ``best_epoch`` and ``best_value`` (:data:`BEST_KEYS`, one value
per trial). A completed trial records whether a user handler stopped it early (:class:`StopRecord`,
``result.json``'s ``stop``). The whole ``result.json`` record: :class:`~ignite_seg.storage.records.TrialResult`.

The names are recorded in ``run.json`` as ``val_names`` (primary first) and ``metric_names``;
a folder without them (older runs, a plain ``(train, val)`` pair) reads as ``["val"]`` and ``[]``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, NamedTuple

from .names import (
    CHECKPOINT_NAME,
    ERROR_TXT,
    HIDDEN_NPZ,
    MODEL_BEST_PT,
    MODEL_INIT_PT,
    MODEL_PT,
    MODEL_RAW_PT,
    RESULT_JSON,
    THROUGHTIME_NPZ,
)

__all__ = [
    "ResultKeys", "KeyParts", "BestRecord", "StopRecord", "BEST_KEYS", "TRIAL_FILES", "curve_keys", "final_keys", "is_curve_key",
    "NAME",
]

#: Names of validation sets and metrics: letters, digits and ``_``.
NAME = re.compile(r"[A-Za-z0-9_]+\Z")
_SPLIT = r"(?:train|val(?:_[A-Za-z0-9_]+)?)"
_CURVE = re.compile(rf"(?!.*_smoothed\Z)(?:(?:losses|perfs)|metric_[A-Za-z0-9_]+?)_{_SPLIT}\Z")

Kind = Literal["loss", "perf", "metric"]
Mode = Literal["min", "max"]

#: The files of a trial folder that ignite_seg writes (a user handler's output may not use these names).
TRIAL_FILES = frozenset({MODEL_PT, MODEL_INIT_PT, MODEL_RAW_PT, MODEL_BEST_PT, RESULT_JSON, THROUGHTIME_NPZ,
                         HIDDEN_NPZ, ERROR_TXT, CHECKPOINT_NAME})
#: The best checkpoint's keys in ``results.npz`` (``(T,)`` arrays, trials in id order).
BEST_KEYS = ("best_epoch", "best_value")


@dataclass(frozen=True)
class BestRecord:
    """Where a trial's best checkpoint (``model_best.pt``) was taken: the ``metric`` (``loss``,
    ``perf`` or a custom metric's name) on the primary validation set's snapshot subset, its
    direction ``mode``, the fractional ``epoch`` of the snapshot and the ``value`` measured there.
    With ``train(best_over=...)``, ``parts`` names the validation sets whose snapshot values were
    averaged into ``value`` by their key suffixes (``val``, ``val_<name>``); empty: the primary set alone."""

    metric: str
    mode: Mode
    epoch: float
    value: float
    parts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``result.json``'s ``best`` (``parts`` only for a mean over several sets)."""
        out: dict[str, Any] = {"metric": self.metric, "mode": self.mode, "epoch": self.epoch, "value": self.value}
        if self.parts:
            out["parts"] = list(self.parts)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BestRecord:
        value = data.get("value")  # NaN is written as null
        return cls(str(data["metric"]), "min" if data["mode"] == "min" else "max", float(data["epoch"]),
                   float("nan") if value is None else float(value), tuple(str(p) for p in data.get("parts", ())))


@dataclass(frozen=True)
class StopRecord:
    """Whether a completed trial was stopped early by a user handler (``train(handlers=...)``): the
    fractional ``epoch`` it stopped at, ``None`` when it ran to its last epoch."""

    epoch: float | None

    @property
    def stopped(self) -> bool:
        return self.epoch is not None

    def to_json(self) -> dict[str, Any]:
        """``result.json``'s ``stop``: ``{"epoch": null}`` for a trial that ran to its last epoch."""
        return {"epoch": self.epoch}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StopRecord:
        epoch = data.get("epoch")
        return cls(None if epoch is None else float(epoch))


class KeyParts(NamedTuple):
    """What a key measures: ``kind``, the custom ``metric`` (or ``None``), the ``split`` suffix and
    the ``set`` it names (``train`` or the validation set's own name)."""

    kind: Kind
    metric: str | None
    split: str
    set: str


@dataclass(frozen=True)
class ResultKeys:
    """The validation sets (primary first) and custom metrics of one run, and the keys they give.

    Example:
        >>> ResultKeys(("clean", "noisy"), ("iou",)).curve_keys()[4:]
        ('losses_val_noisy', 'perfs_val_noisy', 'metric_iou_train', 'metric_iou_val', 'metric_iou_val_noisy')
    """

    val_names: tuple[str, ...] = ("val",)
    metric_names: tuple[str, ...] = ()
    #: The direction of each custom metric's "best" (``max`` unless recorded otherwise).
    metric_modes: tuple[tuple[str, Mode], ...] = ()

    def __post_init__(self) -> None:
        if not self.val_names:
            raise ValueError("val_names=() names no validation set; a run has at least its primary one, e.g. ('val',)")
        for what, names in (("val_names", self.val_names), ("metric_names", self.metric_names)):
            bad = [n for n in names if not (isinstance(n, str) and NAME.match(n))]
            bad += [n for n in names if n not in bad and (n == "smoothed" or str(n).endswith("_smoothed"))]
            if bad or len(set(names)) != len(names):
                raise ValueError(f"{what}={list(names)!r}: names must be distinct letters, digits and '_', not "
                                 f"ending in 'smoothed' (kept for the smoothed curves); bad: {bad or 'a repeat'}")
        keys = self.curve_keys()
        if len(set(keys)) != len(keys):
            raise ValueError(f"val_names={list(self.val_names)!r} and metric_names={list(self.metric_names)!r} "
                             "give two metrics the same key; rename one of them")

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | None) -> ResultKeys:
        """From ``run.json`` (or a trial's settings); an older record without the names gives the defaults."""
        record = record or {}
        modes = record.get("metric_modes") or {}
        return cls(tuple(record.get("val_names") or ("val",)), tuple(record.get("metric_names") or ()),
                   tuple((str(k), "min" if v == "min" else "max") for k, v in dict(modes).items()))

    @property
    def splits(self) -> tuple[str, ...]:
        """``train``, ``val`` and ``val_<set>`` for every other validation set."""
        return ("train", "val", *(f"val_{n}" for n in self.val_names[1:]))

    @property
    def val_splits(self) -> tuple[str, ...]:
        return self.splits[1:]

    def set_name(self, split: str) -> str:
        """The name a split shows in a legend: ``train``, or its validation set's own name."""
        if split == "train":
            return "train"
        return self.val_names[0] if split == "val" else split[len("val_"):]

    def label(self, split: str) -> str:
        """How figures and the summary name a split: ``train``, ``val`` (``val (<name>)`` when the primary
        set has its own name) or the other set's name."""
        name = self.set_name(split)
        return f"val ({name})" if split == "val" and name != "val" else name

    def mode(self, metric: str) -> Mode:
        return dict(self.metric_modes).get(metric, "max")

    def curve_keys(self) -> tuple[str, ...]:
        """The through-time keys, the four of a plain run first."""
        return curve_keys(self.val_names, self.metric_names)

    def final_keys(self) -> tuple[str, ...]:
        """The final values in ``result.json`` (``results.npz``: with the prefix ``final_``)."""
        return final_keys(self.val_names, self.metric_names)

    def parse(self, key: str) -> KeyParts | None:
        """What a through-time, ``result.json`` or ``results.npz`` key measures; ``None`` if not one of ours."""
        key = key[len("final_"):] if key.startswith("final_") else key
        for split in self.splits:
            kinds: dict[str, tuple[Kind, str | None]] = {
                f"loss_{split}": ("loss", None), f"losses_{split}": ("loss", None),
                f"perf_{split}": ("perf", None), f"perfs_{split}": ("perf", None),
                **{f"metric_{m}_{split}": ("metric", m) for m in self.metric_names},
            }
            if key in kinds:
                return KeyParts(*kinds[key], split, self.set_name(split))
        return None


def _split_keys(prefix_loss: str, prefix_perf: str, val_names: tuple[str, ...], metric_names: tuple[str, ...]
                ) -> tuple[str, ...]:
    others = [f"val_{n}" for n in val_names[1:]]
    keys = [f"{prefix_loss}_train", f"{prefix_loss}_val", f"{prefix_perf}_train", f"{prefix_perf}_val"]
    for s in others:
        keys += [f"{prefix_loss}_{s}", f"{prefix_perf}_{s}"]
    for m in metric_names:
        keys += [f"metric_{m}_{s}" for s in ("train", "val", *others)]
    return tuple(keys)


def curve_keys(val_names: tuple[str, ...] = ("val",), metric_names: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Through-time keys (``throughtime.npz``, ``throughtimes.npz``)."""
    return _split_keys("losses", "perfs", tuple(val_names), tuple(metric_names))


def final_keys(val_names: tuple[str, ...] = ("val",), metric_names: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Final-value keys of ``result.json`` (``results.npz`` adds ``final_``)."""
    return _split_keys("loss", "perf", tuple(val_names), tuple(metric_names))


def is_curve_key(key: str) -> bool:
    """Whether ``key`` has the shape of a through-time key of the scheme (names not needed)."""
    return bool(_CURVE.match(key))

"""What :func:`ignite_seg.train` returns: the recipe used, every trial's final metrics, the paths written."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .config.hyperparameters import FixedHyperparameters
from .storage.records import TrialResult
from .storage.run_folder import RunFolder

__all__ = ["TrialSummary", "TrainResult", "train_result"]


@dataclass(frozen=True)
class TrialSummary:
    """Final metrics of one trial (NaN where the trial did not complete)."""

    trial_id: int
    status: str
    loss_train: float
    loss_val: float
    perf_train: float
    perf_val: float
    seconds: float
    error: str | None = None


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train` returns: the recipe used, every trial of the folder and the paths written."""

    folder: Path
    hyperparameters: FixedHyperparameters
    trials: tuple[TrialSummary, ...]
    paths: Mapping[str, Path] = field(default_factory=dict)

    @property
    def completed(self) -> tuple[TrialSummary, ...]:
        return tuple(t for t in self.trials if t.status == "completed")

    @property
    def n_failed(self) -> int:
        return sum(t.status == "failed" for t in self.trials)

    @property
    def n_diverged(self) -> int:
        return sum(t.status == "diverged" for t in self.trials)

    @property
    def failures(self) -> tuple[TrialSummary, ...]:
        """The trials that failed or diverged, each with its ``error`` saying why."""
        return tuple(t for t in self.trials if t.status != "completed")

    def __str__(self) -> str:
        done = self.completed
        lines = [f"ignite_seg run in {self.folder}: {len(done)} of {len(self.trials)} trial(s) completed"]
        if done:
            perfs = [t.perf_val for t in done]
            lines.append(f"  val perf: mean {sum(perfs) / len(perfs):.4f}, best {max(perfs):.4f}")
        lines.extend(f"  trial {t.trial_id} {t.status}: {t.error}" for t in self.failures)
        return "\n".join(lines)


def train_result(rf: RunFolder, hp: FixedHyperparameters, finished: Mapping[int, TrialResult]) -> TrainResult:
    summaries = tuple(
        TrialSummary(
            trial_id=tid, status=r.status, loss_train=r.metric("loss_train"), loss_val=r.metric("loss_val"),
            perf_train=r.metric("perf_train"), perf_val=r.metric("perf_val"),
            seconds=float(r.seconds or float("nan")), error=r.error,
        )
        for tid, r in sorted(finished.items())
    )
    paths = {
        "folder": rf.path, "run": rf.run_json, "results": rf.results, "throughtimes": rf.throughtimes,
        "hparams": rf.hparams, "trials": rf.trials, "analysis": rf.analysis,
    }
    return TrainResult(folder=rf.path, hyperparameters=hp, trials=summaries, paths=paths)

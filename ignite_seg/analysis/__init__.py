"""Analysis of a run folder: text, images, animations, a walk-through video and an HTML report.

Each product is extracted from the folder (pure ``*_info`` functions), rendered (``plot_*`` ->
matplotlib Figure, no file I/O) and written here, atomically, by the caller. Independent
products render in parallel on ``cores`` processes; products whose outputs are newer than their
inputs (and were made with the same settings) are skipped unless ``force``.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import TYPE_CHECKING, Any, Generator

from ..config.analysis import LEVELS, AnalysisSettings, resolve_analysis
from ..exceptions import AnalysisUnavailableError, FolderError

if TYPE_CHECKING:
    from ..storage.records import RunRecord
    from ..storage.run_folder import RunFolder
    from .products import Product, Task

__all__ = ["analyze", "analyze_folder", "AnalysisSettings", "resolve_analysis", "MANIFEST"]

logger = logging.getLogger(__name__)

#: Records which settings made each product (in the analysis folder).
MANIFEST = ".manifest.json"
#: Below this many estimated seconds of work, rendering in this process beats starting workers
#: (forked workers start at once; spawned ones import numpy and matplotlib first, ~1.3 s each).
PARALLEL_MIN_COST = {"fork": 1.0, "spawn": 4.0}


def analyze(folder: str | os.PathLike[str], *, analysis: str | AnalysisSettings = "images",
            cores: int | str = 1, force: bool = False) -> None:
    """Analyse a run folder from the folder alone (``run.json`` and the files the run wrote).

    Args:
        folder: a folder written by :func:`ignite_seg.train`.
        analysis: preset name (``none``, ``text``, ``images-min``, ``images``, ``animations-draft``,
            ``animations``, ``video-draft``, ``video``) or an :class:`AnalysisSettings`.
        cores: worker processes for independent figures, or ``"all"``.
        force: redo every output, even those newer than their inputs.

    Raises:
        FolderError: the folder is missing, is not a run folder, or a live run holds its lock.
        AnalysisUnavailableError: the run did not collect the data this analysis needs.

    Example:
        >>> ignite_seg.analyze("out/current", analysis="video-draft", cores=2)  # doctest: +SKIP
    """
    from ..runtime.checks import resolve_cores
    from ..storage.contained import contained
    from ..storage.folder_lock import FolderLock
    from ..storage.run_folder import RunFolder

    settings = resolve_analysis(analysis)
    n_cores = resolve_cores(cores)
    rf = RunFolder(folder)
    if not rf.path.exists():
        raise FolderError(f"folder={str(rf.path)!r} does not exist; pass the folder given to ignite_seg.train().")
    if not rf.path.is_dir():
        raise FolderError(f"folder={str(rf.path)!r} is not a folder; pass the folder given to ignite_seg.train().")
    rf.read_run()  # raises FolderError for a foreign folder
    lock = FolderLock(rf.path)
    lock.acquire()  # FolderLockedError (a FolderError) while a live run writes the folder
    try:
        with contained(rf.path):  # no write or delete through a link inside the folder
            analyze_folder(rf, settings, cores=n_cores, force=force)
            _mark_complete(rf, settings)
    finally:
        lock.release()


def _mark_complete(rf: RunFolder, settings: AnalysisSettings) -> None:
    """A run whose train() was stopped during its analysis (``collated``) is complete once the
    analysis it asked for is made."""
    import dataclasses

    run = rf.read_run()
    asked = run.analysis
    if run.state == "collated" and settings.level >= resolve_analysis(asked if asked in LEVELS else "video").level:
        rf.write_run(dataclasses.replace(run, state="complete"))


def _check_collected(run: RunRecord, settings: AnalysisSettings) -> None:
    """Refuse an analysis that needs data the run did not record: only the video's hidden-representation
    scene depends on ``allow_later_analysis_up_to`` (every run records its through-time curves)."""
    collected = run.allow_later_analysis_up_to
    recorded = resolve_analysis(collected if collected in LEVELS else "video", "allow_later_analysis_up_to")
    if settings.collects_hidden and not recorded.collects_hidden:
        raise AnalysisUnavailableError(
            f"analysis={settings.name!r} makes the video, whose PCA scene needs the hidden representations, "
            f"and this run did not record them: it was trained with allow_later_analysis_up_to={collected!r}. "
            f"Analyse with analysis='animations' or less (or AnalysisSettings(..., hidden_pca=False)), or "
            f"rerun ignite_seg.train(..., allow_later_analysis_up_to={settings.name!r})."
        )


def analyze_folder(rf: RunFolder, settings: AnalysisSettings, cores: int = 1, force: bool = False) -> None:
    """Analyse ``rf`` as ``settings`` asks. The caller holds the folder's lock (``train()`` does)."""
    from ..storage.atomic import read_json
    from ..storage.contained import mkdir_inside
    from .products import FORMAT, PRODUCTS

    run = rf.read_run()
    _check_collected(run, settings)
    if settings.level == 0:
        return
    if run.state == "failed":
        err = run.error or {}
        raise FolderError(
            f"the run in {str(rf.path)!r} failed while {err.get('stage', 'running')} ({err.get('type', 'error')}): "
            f"{err.get('message', 'no message recorded')}\nChange what the error says, then run train() again: "
            "is_continuation=False archives this folder; is_continuation=True reruns the failed step with the new settings."
        )
    if run.state not in ("complete", "collated"):  # collated: train() is analysing it now
        if not rf.results.is_file():
            raise FolderError(
                f"the run in {str(rf.path)!r} never finished (state {run.state!r}, no results.npz): "
                "finish it with ignite_seg.train(..., is_continuation=True), then analyse it."
            )
        logger.warning("the run in %s did not finish (state %r): analysing the trials collated so far",
                       rf.path, run.state)
    if settings.animations or settings.video:
        from .movie import ffmpeg_exe

        ffmpeg_exe()  # fails early, saying what to install
    t0 = time.perf_counter()
    mkdir_inside(rf.analysis)
    try:
        manifest: dict[str, Any] = read_json(rf.analysis / MANIFEST)
    except (FileNotFoundError, ValueError):
        manifest = {}
    from .snapshot import Snapshot

    snap = Snapshot(rf.path)  # the availability of every product, from one reading of the run
    wanted = [p for p in PRODUCTS if getattr(settings, p.needs) and p.available(snap)]
    run_digest = _run_digest(run)
    stamps = {p.name: {"format": FORMAT, "key": p.key(settings), "run": run_digest} for p in wanted}
    todo = [p for p in wanted if force or not _fresh(rf, p, manifest.get(p.name), stamps[p.name])]
    skipped = len(wanted) - len(todo)
    if todo:
        logger.info("analysis %r: making %s%s", settings.name, ", ".join(p.name for p in todo),
                    f" ({skipped} up to date)" if skipped else "")
        errors = _make(rf, settings, todo, cores, manifest, stamps)
    else:
        errors = []
        logger.info("analysis %r: all %d product(s) up to date (use force=True / --force to redo)",
                    settings.name, len(wanted))
    if settings.text:
        _write_index(rf, [p for p in PRODUCTS if _fresh(rf, p, manifest.get(p.name), manifest.get(p.name))])
    logger.info("analysis done in %.1f s: %s", time.perf_counter() - t0, rf.analysis / "index.html")
    if errors:
        raise errors[0][1]  # each failure was logged with its product; the others were written


#: Fields of ``run.json`` that say how the run went or was called, not what it recorded: writing them
#: (train() marks the run complete after its analysis) leaves the products up to date. (``created``
#: changes only with a new run, whose new results redo the products anyway; so does ``run_id``, which
#: tells workers the folder they see is this run's; ``checkpoint_every`` changes no result.)
_RUN_BOOKKEEPING = ("state", "argv", "analysis", "created", "run_id", "checkpoint_every")


def _run_digest(run: RunRecord) -> str:
    """A digest of what ``run.json`` tells the analysis (its mtime is not an input: see :data:`_RUN_BOOKKEEPING`)."""
    import hashlib
    import json

    facts = {k: v for k, v in run.to_json().items() if k not in _RUN_BOOKKEEPING}
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _fresh(rf: RunFolder, product: Product, recorded: Any, stamp: Any) -> bool:
    """Every output exists, was made with ``stamp`` and is newer than every input."""
    from .products import inputs_of

    if recorded is None or recorded != stamp:
        return False
    try:
        oldest = min((rf.analysis / o).stat().st_mtime_ns for o in product.outputs)
    except FileNotFoundError:
        return False
    newest_input = max((p.stat().st_mtime_ns for p in inputs_of(product, rf)), default=0)
    return oldest >= newest_input


def _make(rf: RunFolder, settings: AnalysisSettings, todo: list[Product], cores: int,
          manifest: dict[str, Any], stamps: dict[str, Any]) -> list[tuple[str, BaseException]]:
    from tqdm.auto import tqdm

    from ..storage.atomic import atomic_write_bytes, write_json
    from .products import finish, plan

    tasks = plan(rf, settings, todo)
    by_name = {p.name: p for p in todo}
    built: dict[str, dict[int, dict[str, bytes]]] = {p.name: {} for p in todo}  # product -> part index -> files
    pending = {p.name: sum(t.product == p.name for t in tasks) for p in todo}
    errors: list[tuple[str, BaseException]] = []
    for key in by_name:
        manifest.pop(key, None)  # an interrupted rewrite must not look up to date
    results = _run(tasks, cores)
    try:
        next(results)  # starts the workers before tqdm starts its monitor thread (fork needs a lone thread)
        with tqdm(total=len(tasks), desc="analysis", unit="part", mininterval=0.5, disable=None) as bar:
            for task, out in results:
                bar.update(1)
                if isinstance(out, BaseException):
                    logger.error("analysis product %s%s failed: %r", task.product, f" ({task.part})" if task.part else "",
                                 out)
                    errors.append((task.product, out))
                    pending[task.product] = -1
                    continue
                built[task.product][task.index] = out
                if pending[task.product] > 0:
                    pending[task.product] -= 1
                if pending[task.product] == 0:
                    parts = built.pop(task.product)
                    try:
                        files = finish(by_name[task.product], [parts[i] for i in sorted(parts)])
                    except Exception as exc:  # joining the parts failed: reported like a failed task
                        logger.error("analysis product %s failed: %r", task.product, exc)
                        errors.append((task.product, exc))
                        continue
                    for name, data in files.items():
                        atomic_write_bytes(rf.analysis / name, data)
                    manifest[task.product] = stamps[task.product]
                    write_json(rf.analysis / MANIFEST, manifest)
    finally:
        results.close()  # after an exception (an interrupt) this kills the workers at once
    return errors


def _run(tasks: list[Task], cores: int) -> Generator[Any, None, None]:
    """Build the tasks, in this process or on ``cores`` worker processes.

    Yields ``None`` once the work has started (the workers exist), then ``(task, outputs or
    exception)`` as each task finishes.
    """
    import multiprocessing

    from .products import build

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() and _fork_safe() else "spawn"
    workers = min(cores, len(tasks))
    if workers <= 1 or sum(t.cost for t in tasks) < PARALLEL_MIN_COST[method]:
        yield None
        for t in tasks:
            try:
                yield t, build(t)
            except Exception as exc:  # reported by the caller, the other products go on
                yield t, exc
        return
    if method == "fork":  # import once here rather than once per worker (~0.7 s of CPU each)
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401
    from ..runtime.workers import worker_pool

    # guarded workers: they ignore SIGINT, exit when this process dies, and are killed (not
    # awaited) when the loop below is interrupted
    with worker_pool(workers, multiprocessing.get_context(method)) as pool:
        futures: dict[Future[Any], Task] = {pool.submit(build, t): t for t in tasks}
        yield None
        while futures:
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for f in done:
                t = futures.pop(f)
                error = f.exception()
                yield t, error if error is not None else f.result()


def _fork_safe() -> bool:
    """Fork is cheapest (the workers re-import nothing) but safe only without other threads.

    tqdm's monitor thread is tolerated: it sleeps on an event and only touches tqdm's own lock,
    which the workers never use (and logging re-creates its locks after a fork).
    """
    try:
        from tqdm import TMonitor
    except ImportError:  # pragma: no cover - tqdm is a dependency
        TMonitor = ()  # noqa: N806
    return all(t is threading.main_thread() or isinstance(t, TMonitor) for t in threading.enumerate())


def _write_index(rf: RunFolder, fresh: list[Product]) -> None:
    """``index.html`` linking every up-to-date output; rewritten only when its text changes."""
    from ..storage.atomic import atomic_write_bytes
    from ..storage.names import RESULTS_NPZ, RUN_JSON, THROUGHTIMES_NPZ
    from .report import render_index

    present = [o for p in fresh for o in p.outputs if (rf.analysis / o).is_file()]
    md = rf.analysis / "summary.md"
    summary = md.read_text(encoding="utf-8") if "summary.md" in present else None
    data = [f"../{name}" for name in (RESULTS_NPZ, THROUGHTIMES_NPZ, RUN_JSON) if (rf.path / name).is_file()]
    from .extract import run_title
    from .snapshot import Snapshot

    snap = Snapshot(rf.path)  # every caption from one reading of the run
    captions = {}
    for p in fresh:
        for e in p.report:
            if e.caption_of is not None and e.file in present:
                caption = e.caption_of(snap)
                if caption is not None:
                    captions[e.file] = caption
    text = render_index(f"ignite_seg: {run_title(rf.path)}", summary, present, data, captions).encode("utf-8")
    path = rf.analysis / "index.html"
    try:
        if path.read_bytes() == text:
            return
    except FileNotFoundError:
        pass
    atomic_write_bytes(path, text)

"""``python -m ignite_seg.reanalyze`` and ``ignite_seg.analyze`` end to end on a tiny real run."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from fakes import add_tuner_files

import ignite_seg
from ignite_seg.analysis import movie, scenes
from ignite_seg.config.analysis import resolve_analysis
from ignite_seg.reanalyze import main
from ignite_seg.storage.atomic import write_json

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    return subprocess.run([sys.executable, "-m", "ignite_seg.reanalyze", *args], capture_output=True, text=True,
                          env=env, timeout=240)


def _mtimes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (folder / "analysis").iterdir()}


def _links(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]+)"', html)


def test_cli_video_draft_end_to_end(tiny_run: Path):
    add_tuner_files(tiny_run)  # the tuning figures appear because the files exist
    proc = _cli(str(tiny_run), "--analysis", "video-draft", "--cores", "2")
    assert proc.returncode == 0, proc.stderr
    a = tiny_run / "analysis"
    expected = {"summary.md", "summary.json", "index.html", "throughtime.png", "final_perf.png", "lr_sweep.png",
                "batch_size.png", "lr_schedule.png", "final_train_vs_val.png", "hidden_pca.png", "throughtime.mp4",
                "throughtime.gif", "lr_sweep.mp4", "lr_sweep.gif", "video.mp4", "video.poster.png"}
    assert expected <= {p.name for p in a.iterdir()}
    assert not [p.name for p in a.iterdir() if p.name.endswith(".tmp")]

    import imageio

    settings = resolve_analysis("video-draft")
    plan = scenes.scene_plan(str(tiny_run), settings.fps)
    assert [s.name for s in plan] == ["title", "lr_sweep", "batch_size", "schedule", "training", "final", "hidden",
                                    "closing"]  # the closing card states the result
    reader = imageio.get_reader(a / "video.mp4", "ffmpeg")
    assert reader.count_frames() == sum(s.frames for s in plan)
    assert reader.get_meta_data()["size"] == (640, 360) and reader.get_meta_data()["fps"] == settings.fps
    frame = reader.get_data(sum(s.frames for s in plan[:4]) + 5)  # a training frame is not blank
    assert frame.std() > 10
    reader.close()
    anim = imageio.get_reader(a / "throughtime.mp4", "ffmpeg")
    assert anim.count_frames() == int(round(movie.ANIMATIONS["throughtime"][1] * settings.fps))
    anim.close()
    from PIL import Image

    with Image.open(a / "throughtime.gif") as gif:  # identical hold frames are merged: count the time
        total_ms = 0
        for i in range(gif.n_frames):
            gif.seek(i)
            total_ms += gif.info["duration"]
        assert total_ms == pytest.approx(1000 * movie.ANIMATIONS["throughtime"][1], abs=50)
        assert gif.size == (640, 360)

    html = (a / "index.html").read_text()
    links = _links(html)
    assert "video.mp4" in links and "lr_sweep.png" in links and "hidden_pca.png" in links
    for link in links:
        assert not link.startswith(("/", "http")), link
        if link.startswith("#"):  # the navigation bar: an in-page anchor of a figure
            assert f'id="{link[1:]}"' in html, link
            continue
        assert (a / link).resolve().is_file(), link
    summary = json.loads((a / "summary.json").read_text())
    assert summary["trials"]["counts"]["completed"] == 3

    # nothing changed: a re-analysis rewrites nothing (and says so)
    before = _mtimes(tiny_run)
    proc = _cli(str(tiny_run), "--analysis", "video-draft")
    assert proc.returncode == 0 and "up to date" in proc.stderr
    assert _mtimes(tiny_run) == before


def test_reanalysis_skips_redoes_changed_inputs_and_force(tiny_run: Path):
    assert main([str(tiny_run), "--analysis", "images"]) == 0
    first = _mtimes(tiny_run)
    assert main([str(tiny_run), "--analysis", "images"]) == 0
    assert _mtimes(tiny_run) == first
    # a newer input redoes exactly the products that read it
    time.sleep(0.01)
    os.utime(tiny_run / "hparams" / "final.json")
    assert main([str(tiny_run), "--analysis", "images"]) == 0
    changed = {k for k, v in _mtimes(tiny_run).items() if v != first[k]}
    assert changed == {"lr_schedule.png", "summary.md", "summary.json", ".manifest.json"}
    # --force redoes everything
    second = _mtimes(tiny_run)
    assert main([str(tiny_run), "--analysis", "images", "--force"]) == 0
    third = _mtimes(tiny_run)
    assert all(third[k] != second[k] for k in ("throughtime.png", "final_perf.png", "summary.md", "hidden_pca.png"))


def test_a_reanalysis_with_nothing_to_do_imports_neither_torch_nor_matplotlib(tiny_run: Path):
    """Every product up to date: the command reads the folder and its manifest, and no heavy package."""
    assert main([str(tiny_run), "--analysis", "images"]) == 0
    before = _mtimes(tiny_run)
    code = ("import sys, runpy; sys.argv = ['reanalyze', sys.argv[1], '--analysis', 'images']\n"
            "try:\n    runpy.run_module('ignite_seg.reanalyze', run_name='__main__')\n"
            "except SystemExit as e:\n    print('exit', e.code)\n"
            "print('heavy', sorted(m for m in ('torch', 'matplotlib', 'ignite') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    out = subprocess.run([sys.executable, "-c", code, str(tiny_run)], capture_output=True, text=True, env=env,
                         timeout=120).stdout
    assert "exit 0" in out and "heavy []" in out, out
    assert _mtimes(tiny_run) == before


def test_presets_are_supersets_and_tuning_figures_follow_the_files(tiny_run: Path):
    ignite_seg.analyze(tiny_run, analysis="text")
    assert {p.name for p in (tiny_run / "analysis").iterdir()} == {"summary.md", "summary.json", "index.html",
                                                                   ".manifest.json"}
    ignite_seg.analyze(tiny_run, analysis="images-min")
    names = {p.name for p in (tiny_run / "analysis").iterdir()}
    assert {"throughtime.png", "final_perf.png"} <= names and "lr_sweep.png" not in names  # fixed recipe: no sweep
    assert "lr_schedule.png" not in names  # images-min keeps the few a reader needs
    add_tuner_files(tiny_run, empty=True)  # the "fastest" preset: empty arrays
    ignite_seg.analyze(tiny_run, analysis="images")
    names = {p.name for p in (tiny_run / "analysis").iterdir()}
    assert {"lr_schedule.png", "final_train_vs_val.png", "hidden_pca.png"} <= names
    assert "lr_sweep.png" not in names and "batch_size.png" not in names


def test_failed_trial_is_reported(tiny_run: Path):
    d = tiny_run / "trials" / "9"
    d.mkdir()
    (d / "error.txt").write_text("Traceback (most recent call last):\nRuntimeError: boom in training\n")
    write_json(d / "result.json", {"trial_id": 9, "status": "failed", "seconds": 0.1,
                                   "error": "RuntimeError: boom in training"})
    ignite_seg.analyze(tiny_run, analysis="text")
    md = (tiny_run / "analysis" / "summary.md").read_text()
    assert "| 9 | failed | RuntimeError: boom in training |" in md
    assert "3 completed, 0 diverged, 1 failed" in md


def test_bad_folders_exit_2(tmp_path: Path, tiny_run: Path, caplog: pytest.LogCaptureFixture):
    assert main([str(tmp_path / "missing")]) == 2
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("hi")
    assert main([str(foreign)]) == 2
    assert "does not exist" in caplog.text and "not an ignite_seg run folder" in caplog.text
    # a live run holds the lock: refuse, naming the process
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        (tiny_run / ".ignite_seg.lock").write_text(json.dumps(
            {"pid": sleeper.pid, "host": socket.gethostname(), "created": time.time()}))
        assert main([str(tiny_run), "--analysis", "text"]) == 2
        assert f"in use by process {sleeper.pid}" in caplog.text
        assert not (tiny_run / "analysis").exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_more_than_collected_says_what_to_rerun(tiny_run: Path, caplog: pytest.LogCaptureFixture):
    run = json.loads((tiny_run / "run.json").read_text())
    run["allow_later_analysis_up_to"] = "images"
    write_json(tiny_run / "run.json", run)
    with pytest.raises(ignite_seg.AnalysisUnavailableError, match="allow_later_analysis_up_to='video-draft'"):
        ignite_seg.analyze(tiny_run, analysis="video-draft")
    assert main([str(tiny_run), "--analysis", "video"]) == 2
    assert "allow_later_analysis_up_to='images'" in caplog.text


def test_unfinished_run_without_results_is_refused(tiny_run: Path):
    run = json.loads((tiny_run / "run.json").read_text())
    run["state"] = "running"
    write_json(tiny_run / "run.json", run)
    (tiny_run / "results.npz").unlink()
    with pytest.raises(ignite_seg.FolderError, match="is_continuation=True"):
        ignite_seg.analyze(tiny_run, analysis="text")


def test_summary_numbers_match_results(tiny_run: Path):
    ignite_seg.analyze(tiny_run, analysis="text")
    data = json.loads((tiny_run / "analysis" / "summary.json").read_text())
    with np.load(tiny_run / "results.npz") as z:
        perf = z["final_perf_val"]
    assert data["trials"]["final"]["final_perf_val"]["mean"] == pytest.approx(float(perf.mean()))
    assert data["trials"]["final"]["final_perf_val"]["n"] == perf.size

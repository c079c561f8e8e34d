"""The product registry: one entry per product is all the planner, the builder and the report read."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import ignite_seg
from ignite_seg.analysis import products
from ignite_seg.analysis.products import PRODUCTS, Entry, Part, Product, plan
from ignite_seg.analysis.report import render_index
from ignite_seg.analysis.scenes import scene_plan
from ignite_seg.config.analysis import AnalysisSettings, resolve_analysis
from ignite_seg.storage.atomic import read_json
from ignite_seg.storage.run_folder import RunFolder


def _fake(name: str, outputs: tuple[str, ...], build, **kw) -> Product:
    return Product(name=name, needs="text", outputs=outputs, inputs=lambda rf: [rf.run_json], available=lambda snap: True,
                   cost=0.1, key=lambda s: {}, build=build, **kw)


def test_every_product_is_reported_and_planned(tiny_run: Path):
    names = [p.name for p in PRODUCTS]
    outputs = [o for p in PRODUCTS for o in p.outputs]
    assert len(set(names)) == len(names) and len(set(outputs)) == len(outputs)
    flags = {f.name for f in dataclasses.fields(AnalysisSettings) if f.type in (bool, "bool")}
    for p in PRODUCTS:
        assert p.needs in flags, p.name
        assert p.report and {e.file for e in p.report} <= set(p.outputs), p.name
        assert all(e.also is None or e.also in p.outputs for e in p.report), p.name

    page = render_index("t", "# s", outputs)
    shown = re.findall(r'(?:src|href)="([^"]+)"', page)
    for p in PRODUCTS:
        for e in p.report:
            assert e.file in shown, e.file
    figures = re.findall(r'<figure id="([^"]+)"', page)  # in the registry's order
    assert figures == [e.file.replace(".", "-") for p in PRODUCTS for e in p.report if e.kind != "link"]

    tasks = plan(RunFolder(tiny_run), resolve_analysis("video"), list(PRODUCTS))
    assert {t.product for t in tasks} == set(names)
    video = sorted((t for t in tasks if t.product == "video"), key=lambda t: t.index)
    assert [t.part for t in video] == [s.name for s in scene_plan(str(tiny_run), 24)]
    assert [t.cost for t in tasks] == sorted((t.cost for t in tasks), reverse=True)


def test_one_registry_entry_is_planned_built_written_and_reported(tiny_run: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake("fake_note", ("note.png",), lambda folder, settings, part: {"note.png": b"not really a png"},
                 report=(Entry("note.png", "image", "A fake note", "Registered in one place."),))
    # parts built out of order (the costlier first) are joined in the product's order
    split = _fake("fake_split", ("split.txt",), lambda folder, settings, part: {part: part.encode()},
                  parts=lambda folder, settings: [Part("a", 0.1), Part("b", 0.9), Part("c", 0.5)],
                  join=lambda outs: {"split.txt": b"".join(v for out in outs for v in out.values())},
                  report=(Entry("split.txt", "link"),))
    monkeypatch.setattr(products, "PRODUCTS", (*PRODUCTS, fake, split))

    ignite_seg.analyze(tiny_run, analysis="text", cores=1)

    a = tiny_run / "analysis"
    assert (a / "note.png").read_bytes() == b"not really a png"
    assert (a / "split.txt").read_bytes() == b"abc"
    page = (a / "index.html").read_text()
    assert 'src="note.png"' in page and "A fake note" in page and "Registered in one place." in page
    assert '<a href="split.txt">split.txt</a>' in page
    manifest = read_json(a / ".manifest.json")
    assert {"fake_note", "fake_split", "summary"} <= set(manifest)


def test_a_product_writes_only_its_declared_outputs(tiny_run: Path, monkeypatch: pytest.MonkeyPatch):
    stray = _fake("fake_stray", ("declared.txt",), lambda folder, settings, part: {"undeclared.txt": b"x"})
    monkeypatch.setattr(products, "PRODUCTS", (*PRODUCTS, stray))

    with pytest.raises(ValueError, match=r"'fake_stray' made \['undeclared.txt'\]"):
        ignite_seg.analyze(tiny_run, analysis="text", cores=1)

    a = tiny_run / "analysis"
    assert not (a / "undeclared.txt").exists()
    assert (a / "summary.md").is_file()  # the other products were written
    assert "fake_stray" not in read_json(a / ".manifest.json")


def test_unknown_product_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown analysis product 'nope'.*'summary'"):
        products.find("nope")

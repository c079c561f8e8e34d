"""``index.html``: one self-contained page (relative links only) with the summary, images and videos."""
from __future__ import annotations

import html
import re
from typing import Mapping, Sequence

from . import products

__all__ = ["markdown_to_html", "render_index"]


def _inline(text: str) -> str:
    out = html.escape(text, quote=False).replace("&lt;br&gt;", "<br>")
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def markdown_to_html(md: str) -> str:
    """The subset of Markdown that ``summary.md`` uses: headings, nested bullets, tables, bold, code."""
    lines = md.splitlines()
    out: list[str] = []
    depth = 0  # open <ul> levels
    i = 0
    while i < len(lines):
        line = lines[i]
        bullet = re.match(r"^( *)- (.*)$", line)
        if bullet:
            level = len(bullet.group(1)) // 2 + 1
            while depth < level:
                out.append("<ul>")
                depth += 1
            while depth > level:
                out.append("</ul>")
                depth -= 1
            out.append(f"<li>{_inline(bullet.group(2))}</li>")
            i += 1
            continue
        while depth:
            out.append("</ul>")
            depth -= 1
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-| ]+\|$", lines[i + 1]):
            head = [c.strip() for c in line.strip("|").split("|")]
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr></thead><tbody>")
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", lines[i].strip()[1:-1])]
                out.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in cells) + "</tr>")
                i += 1
            out.append("</tbody></table>")
            continue
        heading = re.match(r"^(#{1,3}) (.*)$", line)
        if heading:
            n = len(heading.group(1))
            out.append(f"<h{n}>{_inline(heading.group(2))}</h{n}>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    while depth:
        out.append("</ul>")
        depth -= 1
    return "\n".join(out)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
table{border-collapse:collapse;margin:1em 0;font-size:0.92em}th,td{border:1px solid #ccc;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f3f3f3}code{background:#f3f3f3;padding:0 3px;border-radius:3px}
figure{margin:2em 0}figure img,figure video{max-width:100%;border:1px solid #ddd}figcaption{color:#555;font-size:0.92em}
nav{position:sticky;top:0;background:#fff;padding:.4em 0;border-bottom:1px solid #ddd;z-index:1}
nav a{margin-right:1em}
details{margin:1em 0}summary{cursor:pointer;font-weight:600}
"""


def _sections(md: str) -> list[str]:
    """``md`` cut before each ``## `` heading (the first part: the title and what precedes the first section)."""
    return re.split(r"(?m)^(?=## )", md)


def render_index(title: str, summary_md: str | None, present: Sequence[str], data_links: Sequence[str] = (),
                 captions: Mapping[str, str] | None = None) -> str:
    """The page: the decisions, the figures, then the summary's tables and the tuner's log (collapsed).

    Shows the report entries of :data:`.products.PRODUCTS` whose file is present, with a navigation bar
    to each; ``captions`` (file -> caption, from the figures' info records) replace the entries' own.
    ``data_links``: relative paths of data files (e.g. ``../results.npz``) linked after the products'
    own links (the summary's files).
    """
    have = set(present)
    entries = [e for p in products.PRODUCTS for e in p.report if e.file in have]
    figs = [_figure(e._replace(caption=(captions or {}).get(e.file, e.caption)), have)
            for e in entries if e.kind != "link"]
    links = [e.file for e in entries if e.kind == "link"] + list(data_links)
    nav = " ".join([f'<a href="#{_anchor(e.file)}">{html.escape(e.title)}</a>' for e in entries if e.kind != "link"]
                   + [f'<a href="{f}">{f.rsplit("/", 1)[-1]}</a>' for f in links])
    head, rest = _split_summary(summary_md)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<nav>{nav}</nav>\n{head}\n" + "\n".join(figs) + f"\n{rest}\n</body></html>\n"
    )


def _split_summary(summary_md: str | None) -> tuple[str, str]:
    """The summary as HTML: what comes before the figures (the title, the facts and the decisions) and
    after them (the tables; the tuner's log in a collapsed ``<details>``)."""
    if not summary_md:
        return "<p>No summary.</p>", ""
    parts = _sections(summary_md)
    cut = next((i + 1 for i, p in enumerate(parts) if p.startswith("## Decisions")), 1)
    head = markdown_to_html("".join(parts[:cut]))
    rest = []
    for part in parts[cut:]:
        if part.startswith("## Tuner decisions"):
            heading, _, body = part.partition("\n")
            rest.append(f"<details><summary>{_inline(heading[3:])}: the tuner's full log</summary>"
                        f"{markdown_to_html(body)}</details>")
        else:
            rest.append(markdown_to_html(part))
    return head, "\n".join(rest)


def _anchor(file: str) -> str:
    return file.replace(".", "-")


def _figure(e: products.Entry, have: set[str]) -> str:
    """One ``<figure>``: a video player, a GIF (linking ``e.also`` when present) or a linked image."""
    caption = e.caption
    if e.kind == "video":
        poster = e.file.rsplit(".", 1)[0] + ".poster.png"
        body = (f'<video controls preload="metadata" src="{e.file}"'
                + (f' poster="{poster}"' if poster in have else "") + "></video>")
    elif e.kind == "gif":
        body = f'<img src="{e.file}" alt="{html.escape(e.title)}" loading="lazy">'
        if e.also is not None and e.also in have:
            caption += f' (<a href="{e.also}">{e.also.rsplit(".", 1)[-1].upper()}</a>)'
    else:
        body = f'<a href="{e.file}"><img src="{e.file}" alt="{html.escape(e.title)}" loading="lazy"></a>'
    return (f'<figure id="{_anchor(e.file)}"><h2>{html.escape(e.title)}</h2>{body}'
            f"<figcaption>{caption}</figcaption></figure>")

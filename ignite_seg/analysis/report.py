"""``index.html``: one self-contained page (relative links only) with the summary, images and videos."""
from __future__ import annotations

import html
import re
from typing import Sequence

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
nav a{margin-right:1em}
"""


def render_index(title: str, summary_md: str | None, present: Sequence[str], data_links: Sequence[str] = ()) -> str:
    """The page: the summary, then the report entries of :data:`.products.PRODUCTS` whose file is present.

    ``present``: the files of the analysis folder; ``data_links``: relative paths of data files
    (e.g. ``../results.npz``) linked at the top, after the products' own links (the summary's files).
    """
    have = set(present)
    entries = [e for p in products.PRODUCTS for e in p.report if e.file in have]
    figs = [_figure(e, have) for e in entries if e.kind != "link"]
    links = [e.file for e in entries if e.kind == "link"] + list(data_links)
    nav = " ".join(f'<a href="{f}">{f.rsplit("/", 1)[-1]}</a>' for f in links)
    summary = markdown_to_html(summary_md) if summary_md else "<p>No summary.</p>"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<nav>{nav}</nav>\n"
        f"{summary}\n" + "\n".join(figs) + "\n</body></html>\n"
    )


def _figure(e: products.Entry, have: set[str]) -> str:
    """One ``<figure>``: a video player, a GIF (linking ``e.also`` when present) or a linked image."""
    caption = e.caption
    if e.kind == "video":
        body = f'<video controls preload="metadata" src="{e.file}"></video>'
    elif e.kind == "gif":
        body = f'<img src="{e.file}" alt="{html.escape(e.title)}" loading="lazy">'
        if e.also is not None and e.also in have:
            caption += f' (<a href="{e.also}">{e.also.rsplit(".", 1)[-1].upper()}</a>)'
    else:
        body = f'<a href="{e.file}"><img src="{e.file}" alt="{html.escape(e.title)}" loading="lazy"></a>'
    return (f'<figure id="{e.file.replace(".", "-")}"><h2>{html.escape(e.title)}</h2>{body}'
            f"<figcaption>{caption}</figcaption></figure>")

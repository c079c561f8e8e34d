"""``index.html``: one self-contained page (relative links only) with the summary, images and videos."""
from __future__ import annotations

import html
import re
from typing import NamedTuple, Sequence

__all__ = ["Entry", "ENTRIES", "markdown_to_html", "render_index"]


class Entry(NamedTuple):
    file: str
    kind: str  # image | video | gif
    title: str
    caption: str


#: Every file the report can show, in reading order.
ENTRIES: tuple[Entry, ...] = (
    Entry("video.mp4", "video", "Walk-through video",
          "The whole run in one video: LR sweep, batch size, schedule, training, final distribution."),
    Entry("lr_sweep.png", "image", "Learning-rate range test",
          "Loss and perf against the LR (log scale) for each repeat, with the mean ± 95% CI; green: the chosen "
          "range; red dotted: divergence. Bottom: the derivatives used to choose the range."),
    Entry("lr_sweep.gif", "gif", "Learning-rate range test, drawn progressively", ""),
    Entry("batch_size.png", "image", "Batch size",
          "Perf against batch size, the gradient noise scale B_simple, and the candidates' short-run scores."),
    Entry("lr_schedule.png", "image", "Schedule of the final trials",
          "Triangular cyclical learning rate (log scale) of every final trial."),
    Entry("throughtime.png", "image", "Training through time",
          "Loss and perf on fixed train/val subsets: each trial (thin) and the mean ± 95% CI across trials."),
    Entry("throughtime.gif", "gif", "Training through time, drawn progressively", ""),
    Entry("final_perf.png", "image", "Final validation perf across trials",
          "One dot per completed trial, the mean and its 95% confidence interval."),
    Entry("final_train_vs_val.png", "image", "Generalisation gap",
          "Final train vs val loss and perf of each trial; on the dashed line val equals train."),
    Entry("hidden_pca.png", "image", "Hidden representations",
          "3D PCA of a hidden layer's representation of validation points, at the start and end of training."),
)

_MP4_OF_GIF = {"lr_sweep.gif": "lr_sweep.mp4", "throughtime.gif": "throughtime.mp4"}


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
    """The page: the summary, then every present file of :data:`ENTRIES`.

    ``present``: the files of the analysis folder; ``data_links``: relative paths of data files
    (e.g. ``../results.npz``) linked at the top.
    """
    have = set(present)
    figs = []
    for e in ENTRIES:
        if e.file not in have:
            continue
        anchor = e.file.replace(".", "-")
        if e.kind == "video":
            body = f'<video controls preload="metadata" src="{e.file}"></video>'
        elif e.kind == "gif":
            mp4 = _MP4_OF_GIF.get(e.file)
            link = f' (<a href="{mp4}">MP4</a>)' if mp4 in have else ""
            body = f'<img src="{e.file}" alt="{html.escape(e.title)}" loading="lazy">'
            e = e._replace(caption=e.caption + link)
        else:
            body = f'<a href="{e.file}"><img src="{e.file}" alt="{html.escape(e.title)}" loading="lazy"></a>'
        figs.append(f'<figure id="{anchor}"><h2>{html.escape(e.title)}</h2>{body}'
                    f"<figcaption>{e.caption}</figcaption></figure>")
    links = [f for f in ("summary.md", "summary.json") if f in have] + list(data_links)
    nav = " ".join(f'<a href="{f}">{f.rsplit("/", 1)[-1]}</a>' for f in links)
    summary = markdown_to_html(summary_md) if summary_md else "<p>No summary.</p>"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<nav>{nav}</nav>\n"
        f"{summary}\n" + "\n".join(figs) + "\n</body></html>\n"
    )

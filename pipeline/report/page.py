"""The report's one HTML page: self-contained (every image embedded as a base64 data URI, no
external style, script or font), every text escaped with ``html.escape``.

The page carries a small inline script that, once the page has loaded, marks each ``<img>``
``data-loaded="yes"`` (decoded, naturalWidth > 0) or ``"no"`` and sets ``data-images-loaded``
("loaded/total") and ``data-all-images-loaded`` ("yes"/"no") on ``<body>``: a headless browser's
dumped DOM then tells whether every picture rendered.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

GENERATOR = "bnpmix report"  # <meta name="generator">: marks a directory a report may replace

STYLE = """
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 0 auto;
       max-width: 1180px; padding: 1.2em 2em 3em; color: #1b1b1b; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
p.sub { color: #555; margin-top: 0; }
p.note { color: #555; font-size: 0.92em; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #e3e3e3; }
figcaption { font-size: 0.9em; color: #444; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #d0d0d0; padding: 0.25em 0.6em; text-align: left;
         vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.tables { display: flex; flex-wrap: wrap; gap: 2em; align-items: flex-start; }
"""

SCRIPT = """
window.addEventListener("load", function () {
  var images = document.images, loaded = 0;
  for (var i = 0; i < images.length; i++) {
    var ok = images[i].complete && images[i].naturalWidth > 0;
    images[i].setAttribute("data-loaded", ok ? "yes" : "no");
    if (ok) { loaded++; }
  }
  document.body.setAttribute("data-images-loaded", loaded + "/" + images.length);
  document.body.setAttribute("data-all-images-loaded",
                             loaded === images.length ? "yes" : "no");
});
"""


@dataclass
class Image:
    """One picture: written as ``file`` beside the page and embedded in it."""

    file: str
    png: bytes
    alt: str
    caption: str = ""


@dataclass
class Section:
    """A heading with its pictures and (already escaped) HTML fragments."""

    title: str
    images: list[Image] = field(default_factory=list)
    html: list[str] = field(default_factory=list)
    anchor: str = ""


def esc(value: Any) -> str:
    """Text for HTML, quotes included."""
    return html.escape(str(value), quote=True)


def format_value(value: Any) -> str:
    """A figure as a person reads it: floats to 6 significant digits, lists joined."""
    if isinstance(value, bool) or value is None:
        return str(value).lower() if isinstance(value, bool) else "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple):
        return ", ".join(format_value(v) for v in value) or "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={format_value(v)}" for k, v in value.items()) or "(none)"
    return str(value)


def table(rows: Iterable[Sequence[Any]], header: Sequence[str] | None = None,
          table_id: str = "") -> str:
    """An HTML table of the rows (cells escaped; numbers right-aligned)."""
    out = [f'<table id="{esc(table_id)}">' if table_id else "<table>"]
    if header:
        out.append("<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header)
                   + "</tr></thead>")
    out.append("<tbody>")
    for row in rows:
        cells = [f'<td class="num">{esc(format_value(c))}</td>'
                 if isinstance(c, int | float) and not isinstance(c, bool)
                 else f"<td>{esc(format_value(c))}</td>" for c in row]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def paragraph(text: str, css: str = "note") -> str:
    """One escaped paragraph of the given CSS class."""
    return f'<p class="{esc(css)}">{esc(text)}</p>'


def image_html(image: Image) -> str:
    """A figure with the picture embedded as a data URI and a link to its PNG file."""
    data = base64.b64encode(image.png).decode("ascii")
    caption = (f"<figcaption>{esc(image.caption)} "
               f'(<a href="{esc(image.file)}">{esc(image.file)}</a>)</figcaption>')
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{esc(image.alt)}" '
            f'data-file="{esc(image.file)}">{caption}</figure>')


def render(title: str, subtitle: str, sections: Sequence[Section]) -> str:
    """The whole page."""
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             f'<meta name="generator" content="{esc(GENERATOR)}">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{esc(title)}</title>", f"<style>{STYLE}</style>",
             f"<script>{SCRIPT}</script>", "</head>", "<body>",
             f"<h1>{esc(title)}</h1>", paragraph(subtitle, "sub")]
    links = [f'<a href="#{esc(s.anchor)}">{esc(s.title)}</a>' for s in sections if s.anchor]
    if links:
        parts.append("<p>" + " · ".join(links) + "</p>")
    for s in sections:
        anchor = f' id="{esc(s.anchor)}"' if s.anchor else ""
        parts.append(f"<h2{anchor}>{esc(s.title)}</h2>")
        parts.extend(s.html)
        parts.extend(image_html(image) for image in s.images)
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)

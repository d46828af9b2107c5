"""A page's HTML form: the Markdown a report folder already holds (a report's ``README.md``, the leaderboard's
``board.md``), rendered by markdown-it-py into one standalone HTML document (docs/design.md §10).

The Markdown is the page's one model: the HTML is derived from it and from nothing else, so the two cannot
say different things. CommonMark with GitHub's pipe tables (the dialect the Markdown is written in).
Raw HTML in the Markdown is escaped, not passed through, except the lines that are a whole HTML comment
(the generated-file marker), which are kept as comments in the page's head. Links stay as written (relative
to the folder, where the page lies beside the files it links to); images that are files of the folder are
embedded as base64 ``data:`` URIs when ``folder`` is given, so the page is one self-contained file (its
figures are compared by their pixels, ``uwbench.report.compare``). Nothing depends on the time or the
machine: the same Markdown and figures give the same bytes.
"""
from __future__ import annotations

import base64
import html
import os
import re
from typing import List, Optional

from markdown_it import MarkdownIt

CSS = """body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#1a1a1a;background:#fff;line-height:1.45}h1{font-size:1.6em}
h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.9em;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:.3em .6em;vertical-align:top}th{background:#eef2f7}
img{max-width:100%;border:1px solid #ddd}
code{background:#f3f4f6;padding:.1em .3em;border-radius:3px;font-size:.92em}
pre{background:#f3f4f6;padding:.7em 1em;overflow-x:auto}pre code{padding:0;background:none}
em{color:#444}"""

_COMMENT_LINE = re.compile(r"^<!--.*-->[ \t]*$")


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def _embed(src: str, folder: Optional[str]) -> str:
    """A local PNG of the folder as a data URI; any other source as it is."""
    if not folder or "://" in src or src.startswith(("data:", "/", "#")) or not src.lower().endswith(".png"):
        return src
    path = os.path.join(folder, src)
    if not os.path.isfile(path):
        return src
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode("ascii")


def _first_heading(tokens) -> str:
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.tag == "h1" and i + 1 < len(tokens):
            return "".join(c.content for c in tokens[i + 1].children or [] if c.type in ("text", "code_inline"))
    return ""


def to_html(markdown: str, title: Optional[str] = None, folder: Optional[str] = None) -> str:
    """The standalone HTML document of ``markdown``: ``title`` (default: the first level-1 heading's text),
    the page's CSS, and its body as markdown-it renders it; images of ``folder`` embedded."""
    comments: List[str] = []
    lines = []
    for line in markdown.split("\n"):
        if _COMMENT_LINE.match(line):
            comments.append(line.strip())
            line = ""
        lines.append(line)
    md = _parser()
    tokens = md.parse("\n".join(lines))
    for tok in tokens:
        for child in tok.children or []:
            if child.type == "image":
                child.attrSet("src", _embed(str(child.attrGet("src") or ""), folder))
    body = md.renderer.render(tokens, md.options, {})
    head_title = title if title is not None else _first_heading(tokens)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            + "".join(c + "\n" for c in comments)
            + f"<title>{html.escape(head_title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + body + "</body>\n</html>\n")

"""Safe rendering of model output and guidelines: Markdown to HTML on the server.

Model answers are untrusted. The renderer:

* escapes raw HTML (markdown-it-py with ``html=False``), so ``<script>`` shows as text;
* keeps links only when they are ``http``/``https`` (no ``javascript:``, ``data:``, relative or
  protocol-relative URLs) and marks them ``rel="noopener noreferrer nofollow"``;
* never loads images: an image becomes a plain link to its URL (or only its alt text);
* highlights fenced code with Pygments (class names only, no inline styles, so the page's strict
  Content-Security-Policy holds).
"""

from __future__ import annotations

import re
from functools import lru_cache
from html import escape
from typing import Any
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markupsafe import Markup

SAFE_SCHEMES = ("http", "https")
REL = "noopener noreferrer nofollow"
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")


def safe_url(url: str | None) -> str | None:
    """The URL if it is an absolute http(s) URL with a host, else ``None``."""
    if not url:
        return None
    cleaned = _CONTROL.sub("", url)
    try:
        parts = urlsplit(cleaned)
    except ValueError:
        return None
    if parts.scheme.lower() not in SAFE_SCHEMES or not parts.netloc:
        return None
    return cleaned


def _highlight(code: str, lang: str, _attrs: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(lang.strip().split()[0]) if lang.strip() else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""  # markdown-it escapes the code itself
    body = highlight(code, lexer, HtmlFormatter(nowrap=True, classprefix="hl-"))
    cls = escape(lang.strip().split()[0], quote=True)
    return f'<pre class="code"><code class="language-{cls}">{body}</code></pre>\n'


def _link_open(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    href = safe_url(token.attrGet("href"))
    if href is None:
        token.attrs.pop("href", None)
        token.attrSet("class", "unsafe-link")
        token.attrSet("title", "link removed: only http and https links are kept")
        token.tag = "span"
        env.setdefault("_closing", []).append("span")
        return self.renderToken(tokens, idx, options, env)
    token.attrSet("href", href)
    token.attrSet("rel", REL)
    token.attrSet("target", "_blank")
    env.setdefault("_closing", []).append("a")
    return self.renderToken(tokens, idx, options, env)


def _link_close(self, tokens, idx, options, env) -> str:
    stack = env.get("_closing") or ["a"]
    tag = stack.pop() if stack else "a"
    return f"</{tag}>"


def _image(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    href = safe_url(token.attrGet("src"))
    label = f"[image: {escape(alt)}]"
    if href is None:
        return f'<span class="image-alt">{label}</span>'
    return f'<a class="image-link" href="{escape(href, quote=True)}" rel="{REL}" target="_blank">{label}</a>'


@lru_cache(maxsize=1)
def _md() -> MarkdownIt:
    md = MarkdownIt(
        "commonmark",
        {"html": False, "linkify": False, "typographer": False, "highlight": _highlight},
    )
    md.enable("table").enable("strikethrough")
    # links with unsafe schemes are not even parsed as links (defence in depth with _link_open)
    md.validateLink = lambda url: safe_url(url) is not None  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("link_close", _link_close)
    md.add_render_rule("image", _image)
    return md


def markdown(text: Any) -> Markup:
    """Sanitised HTML for untrusted Markdown (``None`` renders as nothing)."""
    if text is None:
        return Markup("")
    return Markup(_md().render(str(text), {}))


def steps_of(text: str) -> list[str]:
    """Split an answer into steps for process labels: paragraphs, else lines, else the whole.

    The split is what the rater sees and is stored with the judgment (``steps``)."""
    text = (text or "").strip()
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(paragraphs) > 1:
        return paragraphs
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if len(lines) > 1:
        return lines
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9])", text) if s.strip()]
    return sentences or [text]

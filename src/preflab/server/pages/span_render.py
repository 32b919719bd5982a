"""Answers rendered for critique spans: the Markdown as the label page shows it, each run of text
carrying the raw offset it came from, so a selection on screen maps back to code-point offsets
into ``Candidate.as_text()`` (docs/critiques.md).

The parse is markdown-it's (the one :mod:`.render` uses, same options and link rules); before
rendering, every text-bearing token (text, inline code, soft breaks, code blocks) is aligned
with the raw text inside its block's lines: the token's text found whole at or after the cursor
(the common case: plain words, code; a match that would skip a letter is not taken), else
character by character within a short window
(escapes such as ``\\*`` and entities such as ``&amp;`` render one character for several).
A character that cannot be placed (an entity like ``&copy;``) is shown without an offset, so a
selection edge on it moves to the nearest placed character: offsets are never guessed. Each
placed run renders as ``<span data-o="N">``, escaped; links keep the safe-link rules; images
show their alt text without offsets; code is shown plain (no highlighting), so its text is one
run. ``spans`` (``[{start, end, category}]``) marks those raw stretches with ``<mark>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from html import escape
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from .render import _image, _link_close, _link_open, safe_url

#: A stretch of rendered text and the raw offset of its first character (None: not placed).
Piece = tuple[str, int | None]
#: How far past the cursor a character of an escaped or entity-laden run is looked for.
WINDOW = 12


class _Aligner:
    """Places rendered text in the raw source, left to right (the cursor only moves on)."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.cursor = 0
        self.line_starts = [0]
        for i, ch in enumerate(src):
            if ch == "\n":
                self.line_starts.append(i + 1)

    def region(self, token: Token) -> tuple[int, int]:
        if not token.map:
            return self.cursor, len(self.src)
        lo, hi = token.map
        start = self.line_starts[lo] if lo < len(self.line_starts) else len(self.src)
        end = self.line_starts[hi] if hi < len(self.line_starts) else len(self.src)
        self.cursor = max(self.cursor, start)
        return start, end

    def place(self, text: str, end: int) -> list[Piece]:
        if not text:
            return []
        pos = self.src.find(text, self.cursor, end)
        # whole, unless the match skips a letter (then it is a later occurrence: the text here
        # is escaped or has an entity, and is placed character by character instead)
        if pos >= 0 and not any(ch.isalpha() for ch in self.src[self.cursor : pos]):
            self.cursor = pos + len(text)
            return [(text, pos)]
        pieces: list[Piece] = []
        for ch in text:
            p = self.src.find(ch, self.cursor, min(end, self.cursor + WINDOW))
            if p < 0:
                pieces.append((ch, None))
                continue
            self.cursor = p + 1
            last = pieces[-1] if pieces else None
            if last and last[1] is not None and last[1] + len(last[0]) == p:
                pieces[-1] = (last[0] + ch, last[1])
            else:
                pieces.append((ch, p))
        return _merged_unplaced(pieces)

    def skip_link_tail(self, end: int) -> None:
        """After a link's text: past ``](destination "title")`` or ``][label]`` in the raw."""
        src, i = self.src, self.cursor
        if src.startswith("](", i):
            depth, j = 0, i + 1
            while j < end:
                if src[j] == "(":
                    depth += 1
                elif src[j] == ")":
                    depth -= 1
                    if depth == 0:
                        self.cursor = j + 1
                        return
                j += 1
        elif src.startswith("][", i):
            j = src.find("]", i + 2, end)
            if j >= 0:
                self.cursor = j + 1
        elif src.startswith("]", i):
            self.cursor = i + 1


def _merged_unplaced(pieces: list[Piece]) -> list[Piece]:
    out: list[Piece] = []
    for text, o in pieces:
        if out and o is None and out[-1][1] is None:
            out[-1] = (out[-1][0] + text, None)
        else:
            out.append((text, o))
    return out


def _align(tokens: list[Token], src: str) -> None:
    """Store each text-bearing token's pieces in ``token.meta["pieces"]``."""
    al = _Aligner(src)
    for tok in tokens:
        if tok.type == "inline":
            _, end = al.region(tok)
            for child in tok.children or []:
                if child.type in ("text", "code_inline"):
                    child.meta["pieces"] = al.place(child.content, end)
                elif child.type == "softbreak":
                    child.meta["pieces"] = al.place("\n", end)
                elif child.type == "link_close":
                    al.skip_link_tail(end)
                elif child.type == "image":
                    j = src.find("](", al.cursor, end)
                    if j >= 0:
                        al.cursor = j
                        al.skip_link_tail(end)
        elif tok.type in ("fence", "code_block"):
            _, end = al.region(tok)
            if tok.type == "fence":  # past the opening fence and its info string
                nl = src.find("\n", al.cursor, end)
                al.cursor = nl + 1 if nl >= 0 else al.cursor
            body = tok.content[:-1] if tok.content.endswith("\n") else tok.content
            tok.meta["pieces"] = al.place(body, end)


def _runs(pieces: Sequence[Piece], base: int) -> str:
    return "".join(
        f'<span data-o="{base + o}">{escape(t, quote=False)}</span>'
        if o is not None
        else escape(t, quote=False)
        for t, o in pieces
    )


def _text(self: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    tok = tokens[idx]
    pieces = tok.meta.get("pieces") if tok.meta else None
    if pieces is None:
        return escape(tok.content, quote=False)
    return _runs(pieces, env["base"])


def _code_inline(
    self: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]
) -> str:
    return f"<code>{_text(self, tokens, idx, options, env)}</code>"


def _softbreak(self: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    return _text(self, tokens, idx, options, env)


def _code(self: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    tok = tokens[idx]
    lang = (tok.info or "").strip().split()[0] if (tok.info or "").strip() else ""
    cls = f' class="language-{escape(lang, quote=True)}"' if lang else ""
    pieces = tok.meta.get("pieces") if tok.meta else None
    body = _runs(pieces, env["base"]) if pieces is not None else escape(tok.content, quote=False)
    return f'<pre class="code"><code{cls}>{body}</code></pre>\n'


@lru_cache(maxsize=1)
def _md() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table").enable("strikethrough")
    md.validateLink = lambda url: safe_url(url) is not None  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("link_close", _link_close)
    md.add_render_rule("image", _image)
    md.add_render_rule("text", _text)
    md.add_render_rule("code_inline", _code_inline)
    md.add_render_rule("softbreak", _softbreak)
    md.add_render_rule("fence", _code)
    md.add_render_rule("code_block", _code)
    return md


def span_markdown(text: Any, base: int = 0) -> Markup:
    """Sanitised HTML for an answer's Markdown with each text run's raw offset (``data-o``,
    plus ``base``: the run's place in ``Candidate.as_text()``)."""
    if text is None:
        return Markup("")
    src = str(text)
    env: dict[str, Any] = {"base": base}
    md = _md()
    tokens = md.parse(src, env)
    _align(tokens, src)
    return Markup(md.renderer.render(tokens, md.options, env))


#: The kinds whose label page offers critique spans (those whose judgments take ``spans``).
SPAN_KINDS = frozenset({"pairwise", "ranking", "rubric", "unary"})


def marks_spans(policy: Any, kind: Any, mode: Any) -> bool:
    """Whether the label page offers span marking: the project lists span categories, the kind
    takes spans, and a rater is labelling (a new label, a revision or an edit)."""
    return bool(
        getattr(policy, "span_categories", None)
        and kind in SPAN_KINDS
        and mode in ("label", "revise", "edit")
    )


def marked_text(text: str, spans: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The raw answer cut at every span edge: ``[{text, categories}]`` in order, for a
    reviewer's view (rendered inert by Jinja's escaping; no Markdown, so offsets are exact)."""
    edges = {0, len(text)}
    for s in spans:
        edges.update((max(0, min(len(text), s["start"])), max(0, min(len(text), s["end"]))))
    cuts = sorted(edges)
    out = []
    for lo, hi in zip(cuts, cuts[1:]):
        cats = [s["category"] for s in spans if s["start"] <= lo and hi <= s["end"]]
        out.append({"text": text[lo:hi], "categories": cats})
    return out

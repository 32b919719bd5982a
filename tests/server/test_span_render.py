"""``pages/span_render.py``: answers rendered with each text run's raw offset, the map the label
page's span marking reads. Every run a page shows with an offset is exactly the raw text at that
offset (HTML unescaped), in code points; what cannot be placed carries none."""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from preflab.server.pages.render import markdown
from preflab.server.pages.span_render import marked_text, marks_spans, span_markdown
from preflab.server.policy import Policy

RUN = re.compile(r'<span data-o="(\d+)">(.*?)</span>', re.S)


def runs(src: str, base: int = 0) -> list[tuple[int, str]]:
    return [
        (int(o) - base, html.unescape(t)) for o, t in RUN.findall(str(span_markdown(src, base)))
    ]


def assert_placed(src: str, base: int = 0) -> list[tuple[int, str]]:
    found = runs(src, base)
    for o, text in found:
        assert src[o : o + len(text)] == text, (src, o, text)
    offsets = [o for o, _ in found]
    assert offsets == sorted(offsets)  # left to right, never overlapping
    for (o1, t1), (o2, _) in zip(found, found[1:]):
        assert o1 + len(t1) <= o2
    return found


def test_markdown_syntax_is_skipped_and_text_is_placed() -> None:
    src = (
        "😀 **Bold** and *em* & `x<y` [link](https://e.org/a_(b)) end\n\n"
        "- one\n- two &amp; three \\*\n\n"
        "1. AT&copy;T ![alt](https://e.org/i.png) after\n\n"
        "```python\ndef f():\n    return '<b>'\n```\n\n"
        "| a | b |\n|---|---|\n| c | d |\n\n> quote\nsoft break"
    )
    found = assert_placed(src)
    texts = "".join(t for _, t in found)
    for piece in ("😀 ", "Bold", "em", "x<y", "link", " end", "one", "two &", " three ", "*",
                  "AT", "T ", " after", "def f():\n    return '<b>'", "c", "d", "quote", "\n", "soft break"):  # fmt: skip
        assert piece in texts, piece
    assert "©" not in texts and "https" not in texts and "alt" not in texts
    assert (src.index("Bold"), "Bold") in found
    out = str(span_markdown(src))
    assert "<script" not in out and "&lt;b&gt;" in out  # escaped, inert


def test_unsafe_links_and_raw_html_stay_inert() -> None:
    src = "[x](javascript:alert(1)) <script>alert(1)</script> <img src=x onerror=alert(1)>"
    out = str(span_markdown(src))
    assert "<script" not in out and "<img" not in out and "javascript:" not in out.split('"')[0]
    assert_placed(src)


def test_a_run_with_an_entity_is_not_placed_at_a_later_copy() -> None:
    src = "*AT&amp;T* AT&T"  # the emphasis renders "AT&T"; the raw "AT&T" later is not it
    found = assert_placed(src)
    assert found[:2] == [(1, "AT&"), (8, "T")]


def test_a_base_shifts_every_offset() -> None:
    assert runs("a *b*", 10) == runs("a *b*")
    assert RUN.findall(str(span_markdown("a *b*", 10)))[0][0] == "10"


def test_the_label_page_text_matches_the_ordinary_rendering() -> None:
    """Same words on screen: the marked rendering differs only by its run spans (and plain code)."""
    src = "Hello **world** & [a](https://x.org) `c`\n\n- i\n- j"
    plain = re.sub(r"<[^>]+>", "", str(markdown(src)))
    spanned = re.sub(r"<[^>]+>", "", str(span_markdown(src)))
    assert plain == spanned


WORDS = st.sampled_from(
    ["word", "😀", "**b**", "*e*", "`c`", "&amp;", "&copy;", "\\*", "<x>", "[l](https://a.b)",
     "![i](https://a.b/c.png)", "\n", "\n\n", "- ", "1. ", "# ", "> ", "```\ncode\n```\n", "  ", "é"]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, max_size=25))
def test_every_placed_run_is_the_raw_text_at_its_offset(parts: list[str]) -> None:
    assert_placed(" ".join(parts))


def test_marks_spans_and_marked_text() -> None:
    on = Policy(span_categories=["factual_error"])
    assert marks_spans(on, "pairwise", "label") and marks_spans(on, "unary", "edit")
    assert not marks_spans(on, "steps", "label") and not marks_spans(on, "pairwise", "adjudicate")
    assert not marks_spans(Policy(), "pairwise", "label")
    spans = [{"start": 2, "end": 6, "category": "a"}, {"start": 4, "end": 8, "category": "b"}]
    parts = marked_text("0123456789", spans)
    assert [(p["text"], p["categories"]) for p in parts] == [
        ("01", []), ("23", ["a"]), ("45", ["a", "b"]), ("67", ["b"]), ("89", []),
    ]  # fmt: skip

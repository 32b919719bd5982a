"""Model output is untrusted: a corpus of injection payloads in prompts, answers, tool output
and rationales never executes, never loads anything from another host, and stays text."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot

# Each payload that could run sets window.__xss (and opens a dialog) so a miss is loud.
PAYLOADS = [
    "<script>window.__xss=1;alert(1)</script>",
    '<img src=x onerror="window.__xss=2;alert(2)">',
    "[click me](javascript:window.__xss=3;alert(3))",
    '<svg onload="window.__xss=4;alert(4)"></svg>',
    "![tracking pixel](https://evil.example/pixel.png)",
    "![x](javascript:alert(5))",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCg2KTwvc2NyaXB0Pg==)",
    "</textarea><script>alert(7)</script>",
    '"><script>alert(8)</script><b x="',
    '<a href="javascript:alert(9)">html link</a>',
    "[mixed case](JaVaScRiPt:alert(10))",
    "[entity](jav&#x61;script:alert(11))",
    "[ref link][r]\n\n[r]: javascript:alert(12)",
    '<iframe src="https://evil.example/"></iframe>',
    "```html\n<script>alert(13)</script>\n```",
    "<style>body{display:none}</style>",
    "<details open ontoggle=alert(14)>x</details>",
    '[quote](https://evil.example/" onmouseover="alert(15))',
    '![alt](https://evil.example/a.png "title" onerror=alert(16))',
    "<math><maction actiontype=statusline xlink:href=javascript:alert(17)>x</maction></math>",
    "{{ 7*7 }} {% raw %} ${alert(18)}",
    "[protocol relative](//evil.example/x)",
    '<object data="https://evil.example/x.swf"></object>',
    '<base href="https://evil.example/">',
    '<meta http-equiv="refresh" content="0;url=https://evil.example/">',
]
CORPUS = "\n\n".join(PAYLOADS)


def xss_items() -> list[dict]:
    return [
        {
            "id": "xss-answers",
            "prompt": "Say hello. " + PAYLOADS[0],
            "candidates": [
                {"id": "p1", "text": CORPUS},
                {"id": "p2", "text": "\n\n".join(reversed(PAYLOADS))},
            ],
        },
        {
            "id": "xss-agent",
            "prompt": [{"role": "user", "content": PAYLOADS[1]}],
            "candidates": [
                {
                    "id": "m1",
                    "messages": [
                        {
                            "role": "assistant",
                            "content": PAYLOADS[2],
                            "tool_calls": [
                                {
                                    "id": "c1",
                                    "type": "function",
                                    "function": {
                                        "name": "<img src=x onerror=alert(20)>",
                                        "arguments": PAYLOADS[7],
                                    },
                                }
                            ],
                        },
                        {
                            "role": "tool",
                            "name": "</summary><script>alert(21)</script>",
                            "content": CORPUS,
                        },
                    ],
                },
                {"id": "m2", "text": PAYLOADS[3]},
            ],
        },
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("xss-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False},
        [
            {
                "name": "xss",
                "title": "Injection corpus <script>alert(30)</script>",
                "kinds": ["pairwise"],
                "guidelines": CORPUS,
                "policy": {"blind": False},
                "members": {"alice": "rater"},
                "items": xss_items(),
            },
            {
                "name": "xss-steps",
                "kinds": ["steps"],
                "policy": {"blind": False},
                "members": {"alice": "rater"},
                "items": [
                    {
                        "id": "xss-steps-1",
                        "prompt": "p",
                        "candidates": [{"id": "s", "text": CORPUS}],
                    }
                ],
            },
        ],
    )
    yield s
    s.server.stop()


def assert_inert(page) -> None:
    """Nothing ran, nothing foreign loaded, no active markup survived in rendered output."""
    page.wait_for_timeout(300)
    page.guard.assert_clean()
    assert page.evaluate("window.__xss") is None
    bad = page.evaluate("""() => {
        const out = [];
        for (const el of document.querySelectorAll('*')) {
            for (const a of el.attributes) {
                if (a.name.startsWith('on')) out.push(el.tagName + ' ' + a.name);
                if (['href', 'src', 'action', 'formaction', 'xlink:href', 'data'].includes(a.name)
                    && /^\\s*(javascript|data|vbscript):/i.test(a.value)) out.push(el.tagName + ' ' + a.name + '=' + a.value);
            }
        }
        const scripts = [...document.scripts].filter(s => !(s.src.endsWith('/static/app.js') || s.type === 'application/json'));
        scripts.forEach(s => out.push('script: ' + s.outerHTML.slice(0, 80)));
        const scope = document.querySelectorAll('.md img, .md iframe, .md svg, .md object, .md style, .md math, .md base, .md meta, img, iframe, object, embed, base');
        scope.forEach(e => out.push('element: ' + e.tagName));
        document.querySelectorAll('.md a[href]').forEach(a => {
            if (!/^https?:\\/\\//.test(a.getAttribute('href'))) out.push('link: ' + a.getAttribute('href'));
            if (a.rel !== 'noopener noreferrer nofollow') out.push('rel: ' + a.rel);
        });
        return out;
    }""")
    assert bad == [], bad
    # the payloads are there, as text
    assert "<script>" in page.locator("main").inner_text()


def test_payloads_in_answers_tool_output_and_rationales_stay_inert(site, new_page):
    page = new_page(site)
    login(page, "alice")
    page.goto("/p/xss")
    assert_inert(page)
    for n in range(2):
        page.goto("/p/xss/label")
        if page.locator('[data-action="get-task"]').count():
            with page.expect_navigation():
                page.locator('[data-action="get-task"]').click()
        page.locator("#label-app").wait_for()
        for d in page.locator("details").all():  # open every collapsible part
            d.evaluate("el => el.open = true")
        page.locator("#help").evaluate("el => el.showModal()")
        page.keyboard.press("Escape")
        assert_inert(page)
        if n == 0:
            shot(page, "20-xss-label")
        page.keyboard.press("4")
        page.locator("#rationale").fill(PAYLOADS[7] + " " + PAYLOADS[1])
        with page.expect_navigation():
            page.keyboard.press("Control+Enter")
    page.goto("/p/xss-steps/label")
    with page.expect_navigation():
        page.locator('[data-action="get-task"]').click()
    assert page.locator(".step").count() >= len(PAYLOADS)
    assert_inert(page)
    page.locator(".step").first.focus()
    page.keyboard.press("e")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    stored = [j for j in site.judgments("xss-steps")]
    assert stored[0]["body"]["steps"][0] == PAYLOADS[0], "step text is stored verbatim"


def test_reviewer_and_admin_pages_render_payloads_inert(site, new_page):
    page = new_page(site)
    login(page, "root")
    for path in (
        "/",
        "/p/xss",
        "/p/xss/review",
        "/p/xss/review/item/xss-answers",
        "/p/xss/review/item/xss-agent",
        "/admin",
        "/admin/p/xss",
        "/admin/p/xss/dashboard",
    ):
        page.goto(path)
        expect(page.locator("main")).to_be_visible()
        for d in page.locator("details").all():
            d.evaluate("el => el.open = true")
        assert_inert(
            page
        ) if "review/item" in path or path == "/p/xss" else page.guard.assert_clean()
    page.goto("/p/xss/review/item/xss-answers")
    assert PAYLOADS[7] in page.locator(".rationale-text").first.inner_text()
    shot(page, "21-xss-review-item")


def test_csp_header_is_strict(site):
    import httpx

    r = httpx.get(site.base + "/login")
    csp = r.headers["content-security-policy"]
    for part in (
        "default-src 'self'",
        "script-src 'self'",
        "object-src 'none'",
        "img-src 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ):
        assert part in csp
    assert "unsafe-inline" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"

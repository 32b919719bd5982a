"""Browser tests: Python Playwright drives Debian's Chromium against a real ``preflab serve``
process on loopback.

Chromium comes from the system (``apt-get install chromium``); Playwright never downloads one.
Without it the tests skip on a laptop and *fail* in CI (``CI`` set). Screenshots of every page
land in ``test-artifacts/screens/`` (gitignored) at 1366 px and 390 px wide.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
for p in (str(SRC), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from webui_helpers import PageGuard, Site  # noqa: E402


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)  # a real server and Chromium: not for the inner loop


def _require_or_skip(what: str, how: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} is required in CI but missing: {how}")
    pytest.skip(f"{what} not available ({how})")


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def browser():
    exe = chromium_path()
    if exe is None:
        _require_or_skip("Chromium", "apt-get install -y chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _require_or_skip("playwright (Python package)", "pip install playwright")
    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=exe,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-dev-shm-usage",
            ],
        )
        yield b
        b.close()


@pytest.fixture
def new_page(browser):
    """A fresh browser context (own cookies) per call, with a guard; closed at the end."""
    contexts = []

    def _new(site: Site, *, width: int = 1400, height: int = 1000):
        ctx = browser.new_context(viewport={"width": width, "height": height}, base_url=site.base)
        ctx.set_default_timeout(15_000)
        contexts.append(ctx)
        page = ctx.new_page()
        page.guard = PageGuard(page, site.base)
        return page

    yield _new
    for ctx in contexts:
        ctx.close()

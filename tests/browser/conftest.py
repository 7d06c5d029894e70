"""What every browser test shares, started once per session (per pytest worker): one
Chromium (pytest-playwright's session browser, launched with these arguments), one throw-away
JupyterLab serving a copy of the lessons, one JupyterLite site (built only when missing or
stale) and its static server. Each test opens its own page and leaves no kernel running."""
from __future__ import annotations

import pytest

import browser_util as B


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": B.CHROMIUM, "args": B.ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1400, "height": 1000}}


@pytest.fixture
def page(page):
    """pytest-playwright's page, whose actions (click, fill, locate) wait for their element
    up to browser_util.STEP_MS, not Playwright's 30 s: a loaded machine never fails a test."""
    page.set_default_timeout(B.STEP_MS)
    return page


@pytest.fixture(scope="session")
def lab():
    """A throw-away JupyterLab on 127.0.0.1 serving a copy of notebooks/ (browser_util)."""
    with B.jupyter_lab(B.ROOT / "notebooks") as url:
        yield url


@pytest.fixture(scope="session")
def site():
    """The JupyterLite site, built once per session (when missing or stale)."""
    return B.ensure_site(B.ROOT / "site")


@pytest.fixture(scope="session")
def site_url(site):
    with B.static_server(site) as url:
        yield url

"""Shared by the dashboard's browser tests (test_dashboard.py, test_dashboard_owner.py): a live ``privfit serve``
with keys of every role, a headless Chromium that fails its test on any console error, and the helpers that find,
read and photograph the page.

Chromium and chromedriver are Debian's (``/usr/bin/chromium``, ``/usr/bin/chromedriver``; Selenium Manager never
downloads anything). Without them the tests are skipped, except under ``CI=true`` where that is a failure.
Screenshots go to ``$PRIVFIT_TEST_ARTIFACTS/screenshots`` (default ``<repo>/test-artifacts/screenshots``).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_helpers import bearer
from process_helpers import keys_for, register, server

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("PRIVFIT_TEST_ARTIFACTS", REPO / "test-artifacts")) / "screenshots"
#: How long a browser or a poll waits for what it expects (a wait bound, generous for a busy machine: every wait ends
#: as soon as its condition holds).
WAIT = 120.0
#: How long a test waits for a fit to finish.
FIT_WAIT = 300.0

#: The one kind of SEVERE console entry a test may cause on purpose: Chromium logs every 4xx answer of a fetch as
#: "<url> - Failed to load resource: the server responded with a status of 4xx". Those are the API's problem+json
#: answers the tests provoke (a refused key, a 404, a 422) and then assert on the page. Anything else at SEVERE
#: level — an uncaught exception, a CSP violation, a missing asset (not under /v1/), a 5xx — fails the test.
EXPECTED_API_REFUSAL = re.compile(
    r"^\S+/v1/\S* - Failed to load resource: the server responded with a status of 4\d\d\b"
)


@dataclass
class Live:
    """A running server with keys of every role and two datasets."""

    base: str
    owner: str
    admin: str
    analyst: str
    stranger: str
    dataset_id: str
    small_dataset_id: str
    warmup_fit_id: str
    analyst_key_id: str
    stranger_key_id: str

    def get(self, path: str, key: str | None = None) -> Any:
        response = httpx.get(f"{self.base}{path}", headers=bearer(key or self.owner), timeout=30)
        assert response.status_code == 200, response.text
        return response.json()


def wait_fit(base: str, key: str, fit_id: str, timeout: float = FIT_WAIT) -> dict[str, Any]:
    """Poll a fit until it is no longer queued or running; its JSON."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = httpx.get(f"{base}/v1/fits/{fit_id}", headers=bearer(key), timeout=30).json()
        if body["status"] not in ("queued", "running"):
            return body
        time.sleep(0.1)
    raise AssertionError(f"fit {fit_id} did not finish in {timeout:.0f} s: {body}")


def fit_with_validation_rows(live: Live, name: str) -> str:
    """A succeeded dp_gd fit (ε = 0.5), by the owner, on a new dataset with a 25 % validation split (its
    evaluations can run); the fit's id."""
    dataset_id = register(live.base, live.owner, 3.0, name, validation_fraction=0.25)
    created = httpx.post(f"{live.base}/v1/fits", headers=bearer(live.owner), timeout=30, json={
        "dataset_id": dataset_id, "solver": "dp_gd", "model": "logistic", "privacy": {"epsilon": 0.5},
    })  # fmt: skip
    assert created.status_code == 202, created.text
    fit_id = str(created.json()["id"])
    assert wait_fit(live.base, live.owner, fit_id)["status"] == "succeeded"
    return fit_id


def start_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """``privfit serve`` on a fresh SQLite database, with an owner's dataset (one small fit already done) granted
    to an analyst, a second dataset with a small budget, and an analyst key without any grant (the body of each
    module's ``live`` fixture)."""
    tmp_path = tmp_path_factory.mktemp("dashboard")
    database_url = f"sqlite:///{tmp_path / 'ui.db'}"
    owner, admin = keys_for(database_url)
    env = {"PRIVFIT_HEARTBEAT_SECONDS": "0.2", "PRIVFIT_POLL_SECONDS": "0.1"}
    with server(database_url, tmp_path, **env) as base:
        keys = {}
        for name in ("analyst", "stranger"):
            created = httpx.post(f"{base}/v1/keys", headers=bearer(admin), json={"role": "analyst", "name": name})
            assert created.status_code == 201, created.text
            keys[name] = created.json()
        dataset_id = register(base, owner, 3.0, "credit-scoring (synthetic)")
        small_id = register(base, owner, 1.0, "small-budget sample")
        for target in (dataset_id, small_id):
            granted = httpx.post(f"{base}/v1/datasets/{target}/grants", headers=bearer(owner),
                                 json={"api_key_id": keys["analyst"]["key_id"]})  # fmt: skip
            assert granted.status_code == 201, granted.text
        warmup = httpx.post(f"{base}/v1/fits", headers=bearer(owner), json={
            "dataset_id": dataset_id, "solver": "output_perturbation", "model": "logistic", "privacy": {"epsilon": 0.4},
        })  # fmt: skip
        assert warmup.status_code == 202, warmup.text
        assert wait_fit(base, owner, warmup.json()["id"])["status"] == "succeeded"
        yield Live(base, owner, admin, keys["analyst"]["key"], keys["stranger"]["key"], dataset_id, small_id,
                   warmup.json()["id"], keys["analyst"]["key_id"], keys["stranger"]["key_id"])  # fmt: skip


def _browser_paths() -> None:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not (Path(path).exists() and os.access(path, os.X_OK))]
    if missing:
        reason = f"headless browser tests need Debian's chromium and chromedriver; missing: {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true installs them: apt-get install chromium chromium-driver)")
        pytest.skip(reason)


@contextmanager
def chromium(tmp_path: Path, *extra_arguments: str) -> Iterator[WebDriver]:
    """A fresh headless Chromium (its own profile and download folder under tmp_path), with the console log at
    level ALL; on leaving, the console entries not yet checked are checked (:func:`assert_no_console_errors`), so
    every test fails on a console error even if it never asks, and the browser is always quit."""
    _browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    arguments = [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1280,900", f"--user-data-dir={tmp_path / 'chromium-profile'}", *extra_arguments,
    ]  # fmt: skip
    for argument in arguments:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield browser
        assert_no_console_errors(browser)
    finally:
        browser.quit()


def assert_no_console_errors(browser: WebDriver) -> None:
    """No SEVERE console entry since the last check but the API's 4xx answers (:data:`EXPECTED_API_REFUSAL`), and no
    CSP violation or uncaught exception at any level. Reading the log empties it."""
    problems = [
        f"{entry['level']}: {entry['message']}"
        for entry in browser.get_log("browser")
        if "Content Security Policy" in entry["message"] or "Uncaught" in entry["message"]
        or (entry["level"] == "SEVERE" and not EXPECTED_API_REFUSAL.match(entry["message"]))
    ]  # fmt: skip
    assert not problems, problems


def screenshot(browser: WebDriver, name: str, *, full_page: bool = False) -> Path:
    """Save a PNG of the viewport (or of the whole page) under the artefacts directory."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    if full_page:  # grow the window to the page's height (plus the window's own chrome), then restore it
        size = browser.get_window_size()
        height, chrome = browser.execute_script(
            "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight]"
        )
        browser.set_window_size(size["width"], min(max(int(height) + int(chrome), size["height"]), 4000))
        browser.execute_script("window.scrollTo(0, 0)")
        try:
            browser.save_screenshot(str(path))
        finally:
            browser.set_window_size(size["width"], size["height"])
    else:
        browser.save_screenshot(str(path))
    assert path.stat().st_size > 0
    return path


def wait(browser: WebDriver, condition: Callable[[WebDriver], Any], message: str, timeout: float = WAIT) -> Any:
    """Wait until ``condition`` is truthy (stale elements of a re-rendered view count as "not yet")."""

    def check(b: WebDriver) -> Any:
        try:
            return condition(b)
        except StaleElementReferenceException:
            return False

    return WebDriverWait(browser, timeout, poll_frequency=0.1).until(check, message)


def by_testid(name: str) -> tuple[str, str]:
    """A locator for ``[data-testid=name]``."""
    return By.CSS_SELECTOR, f'[data-testid="{name}"]'


def visible(browser: WebDriver | WebElement, name: str, timeout: float = WAIT) -> WebElement:
    """The visible element with this data-testid (waits for it)."""
    root = browser

    def find(_: WebDriver) -> WebElement | bool:
        for element in root.find_elements(*by_testid(name)):
            if element.is_displayed():
                return element
        return False

    driver_ = browser if isinstance(browser, WebDriver) else browser.parent
    return wait(driver_, find, f"no visible [data-testid={name}]", timeout)


def data_value(element: WebElement) -> float:
    """The raw number an element carries in data-value (the page's copy of the API's JSON number)."""
    return float(element.get_attribute("data-value"))


def shown(element: WebElement) -> float:
    """The number an element displays."""
    return float(element.text.replace("−", "-").replace(",", ""))


def assert_number(element: WebElement, expected: float, decimals: int = 3) -> None:
    """The element carries exactly the API's number and displays it rounded to ``decimals``."""
    assert data_value(element) == pytest.approx(expected, rel=1e-12, abs=1e-15), (element.get_attribute("data-value"),
                                                                              expected)  # fmt: skip
    assert shown(element) == pytest.approx(expected, abs=0.5 * 10**-decimals + 1e-9), (element.text, expected)


def login(browser: WebDriver, base: str, key: str) -> None:
    """Open the dashboard and log in with ``key``."""
    browser.get(f"{base}/ui")
    field = visible(browser, "login-key")
    field.clear()
    field.send_keys(key)
    visible(browser, "login-submit").click()
    wait(browser, lambda b: b.find_element(*by_testid("session")).is_displayed(), "the session box did not appear")

"""The dashboard at /ui in a real browser: headless Chromium (Selenium 4) against a live ``privfit serve`` on SQLite.

The tests log in with keys of each role, read a dataset's budget, estimate and run a fit from the form, watch it
progress to done, and open its coefficients; every number the page shows is compared with the API's JSON over
httpx. Each step is saved as a screenshot under ``$PRIVFIT_TEST_ARTIFACTS/screenshots`` (default
``<repo>/test-artifacts/screenshots``, gitignored).

Chromium and chromedriver are Debian's (``/usr/bin/chromium``, ``/usr/bin/chromedriver``; Selenium Manager never
downloads anything). Without them the tests are skipped, except under ``CI=true`` where that is a failure.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_helpers import bearer
from process_helpers import keys_for, register, server

from privfit.ui import CONTENT_SECURITY_POLICY, STATIC_DIR

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("PRIVFIT_TEST_ARTIFACTS", REPO / "test-artifacts")) / "screenshots"
WAIT = 20.0
# A dp_gd fit slow enough (a few seconds) that the page shows it queued/running with a progress value.
SLOW_STEPS = 12_000
EXPECTED_HEADERS = {"content-security-policy": CONTENT_SECURITY_POLICY, "x-content-type-options": "nosniff"}

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


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

    def get(self, path: str, key: str | None = None) -> Any:
        response = httpx.get(f"{self.base}{path}", headers=bearer(key or self.owner), timeout=30)
        assert response.status_code == 200, response.text
        return response.json()


def _wait_fit(base: str, key: str, fit_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = httpx.get(f"{base}/v1/fits/{fit_id}", headers=bearer(key), timeout=30).json()
        if body["status"] not in ("queued", "running"):
            return body
        time.sleep(0.1)
    raise AssertionError(f"fit {fit_id} did not finish: {body}")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """``privfit serve`` on a fresh SQLite database, with an owner's dataset (one small fit already done) granted
    to an analyst, a second dataset with a small budget, and an analyst key without any grant."""
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
        assert _wait_fit(base, owner, warmup.json()["id"])["status"] == "succeeded"
        yield Live(base, owner, admin, keys["analyst"]["key"], keys["stranger"]["key"], dataset_id, small_id,
                   warmup.json()["id"])  # fmt: skip


def _browser_paths() -> None:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not (Path(path).exists() and os.access(path, os.X_OK))]
    if missing:
        reason = f"headless browser tests need Debian's chromium and chromedriver; missing: {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true installs them: apt-get install chromium chromium-driver)")
        pytest.skip(reason)


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[WebDriver]:
    """A fresh headless Chromium (its own profile under tmp_path), always quit at the end."""
    _browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    arguments = [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1280,900", f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ]  # fmt: skip
    for argument in arguments:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield browser
    finally:
        browser.quit()


# --- helpers ---------------------------------------------------------------------------------------------------


def _screenshot(browser: WebDriver, name: str, *, full_page: bool = False) -> Path:
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


def _wait(browser: WebDriver, condition: Callable[[WebDriver], Any], message: str, timeout: float = WAIT) -> Any:
    """Wait until ``condition`` is truthy (stale elements of a re-rendered view count as "not yet")."""

    def check(b: WebDriver) -> Any:
        try:
            return condition(b)
        except StaleElementReferenceException:
            return False

    return WebDriverWait(browser, timeout, poll_frequency=0.1).until(check, message)


def _testid(testid: str) -> tuple[str, str]:
    return By.CSS_SELECTOR, f'[data-testid="{testid}"]'


def _visible(browser: WebDriver | WebElement, testid: str, timeout: float = WAIT) -> WebElement:
    """The visible element with this data-testid (waits for it)."""
    root = browser

    def find(_: WebDriver) -> WebElement | bool:
        for element in root.find_elements(*_testid(testid)):
            if element.is_displayed():
                return element
        return False

    driver_ = browser if isinstance(browser, WebDriver) else browser.parent
    return _wait(driver_, find, f"no visible [data-testid={testid}]", timeout)


def _value(element: WebElement) -> float:
    """The raw number an element carries in data-value (the page's copy of the API's JSON number)."""
    return float(element.get_attribute("data-value"))


def _shown(element: WebElement) -> float:
    """The number an element displays."""
    return float(element.text.replace("−", "-").replace(",", ""))


def _assert_number(element: WebElement, expected: float, decimals: int = 3) -> None:
    """The element carries exactly the API's number and displays it rounded to ``decimals``."""
    assert _value(element) == pytest.approx(expected, rel=1e-12, abs=1e-15), (element.get_attribute("data-value"),
                                                                                expected)  # fmt: skip
    assert _shown(element) == pytest.approx(expected, abs=0.5 * 10**-decimals + 1e-9), (element.text, expected)


def _login(browser: WebDriver, base: str, key: str) -> None:
    browser.get(f"{base}/ui")
    field = _visible(browser, "login-key")
    field.clear()
    field.send_keys(key)
    _visible(browser, "login-submit").click()
    _wait(browser, lambda b: b.find_element(*_testid("session")).is_displayed(), "the session box did not appear")


def _burndown_points(browser: WebDriver) -> int:
    chart = _visible(browser, "burndown-chart")
    return len(chart.find_elements(By.CSS_SELECTOR, "circle[data-point]"))


def _assert_no_script_errors(browser: WebDriver) -> None:
    """No CSP violation and no uncaught exception in the console (failed API calls, e.g. a 401, are expected)."""
    problems = [
        entry["message"]
        for entry in browser.get_log("browser")
        if "Content Security Policy" in entry["message"] or "Uncaught" in entry["message"]
        or (entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"])
    ]  # fmt: skip
    assert not problems, problems


# --- tests -----------------------------------------------------------------------------------------------------


def test_ui_is_served_with_csp_and_nosniff_and_kept_out_of_the_openapi_schema(live: Live):
    for path in ("/ui", "/ui/", "/ui/static/app.js", "/ui/static/charts.js", "/ui/static/app.css"):
        response = httpx.get(f"{live.base}{path}", timeout=10)
        assert response.status_code == 200, (path, response.status_code)
        for header, value in EXPECTED_HEADERS.items():
            assert response.headers.get(header) == value, (path, header, response.headers.get(header))
    page = httpx.get(f"{live.base}/ui", timeout=10)
    assert page.headers["content-type"].startswith("text/html")
    assert "<script>" not in page.text and "style=" not in page.text  # no inline script or style (CSP)
    modules = sorted(STATIC_DIR.glob("*.js"))
    assert {module.name for module in modules} >= {"app.js", "api.js", "charts.js", "dom.js"}
    for module in modules:  # served as JavaScript; server strings never parsed as HTML
        script = httpx.get(f"{live.base}/ui/static/{module.name}", timeout=10)
        assert script.status_code == 200 and "javascript" in script.headers["content-type"], module.name
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in script.text, (module.name, sink)
    schema = httpx.get(f"{live.base}/openapi.json", timeout=10).json()
    assert not [path for path in schema["paths"] if path.startswith("/ui")]
    assert httpx.get(f"{live.base}/ui/static/missing.js", timeout=10).status_code == 404


def test_login_budget_estimate_run_fit_and_result(live: Live, driver: WebDriver):
    # --- login: a bad key shows the API's 401 detail, a good one the role and name --------------------------
    driver.get(f"{live.base}/ui")
    _visible(driver, "login-key").send_keys("pf_000000000000_not-a-key")
    _visible(driver, "login-submit").click()
    refused = httpx.get(f"{live.base}/v1/me", headers=bearer("pf_000000000000_not-a-key")).json()
    error = _visible(driver, "login-error")
    _wait(driver, lambda _: refused["detail"] in error.text, "the 401 detail was not shown")
    assert refused["title"] in error.text
    _screenshot(driver, "01-login.png")

    _login(driver, live.base, live.owner)
    me = live.get("/v1/me")
    assert _visible(driver, "session-role").get_attribute("textContent") == me["role"] == "owner"

    # --- datasets list: name, n, d and a budget gauge per dataset -------------------------------------------
    card = _visible(driver, f"dataset-card-{live.dataset_id}")
    dataset = live.get(f"/v1/datasets/{live.dataset_id}")
    budget = live.get(f"/v1/datasets/{live.dataset_id}/budget")
    assert card.find_element(*_testid("dataset-name")).text == dataset["name"]
    assert _value(card.find_element(*_testid("dataset-n"))) == dataset["n"]
    assert _value(card.find_element(*_testid("dataset-d"))) == dataset["d"]
    remaining = _visible(card, "gauge-remaining")
    _assert_number(remaining, budget["remaining_epsilon"], decimals=2)
    _assert_number(card.find_element(*_testid("gauge-max")), budget["epsilon_max"], decimals=2)
    _assert_number(card.find_element(*_testid("gauge-committed")), budget["committed_epsilon"], decimals=2)
    assert len(driver.find_elements(By.CSS_SELECTOR, '[data-testid^="dataset-card-"]')) == 2
    _screenshot(driver, "02-datasets.png")

    # --- dataset page: budget figures match GET /budget; one burn-down point per ledger entry + the start ---
    card.click()
    _assert_number(_visible(driver, "budget-remaining"), budget["remaining_epsilon"])
    figures = {"budget-epsilon-max": "epsilon_max", "budget-charged": "charged_epsilon",
               "budget-reserved": "reserved_epsilon", "budget-committed": "committed_epsilon"}  # fmt: skip
    for testid, key in figures.items():
        _assert_number(_visible(driver, testid), budget[key])
    assert _value(_visible(driver, "budget-delta")) == budget["delta_max"]
    # the page says what "committed ε" measures: the privacy filter's share, not an (ε, δ) statement of its own
    assert "privacy filter" in _visible(driver, "budget-measure").text.lower()
    ledger = live.get(f"/v1/datasets/{live.dataset_id}/ledger?limit=1000")
    points_before = _burndown_points(driver)
    assert points_before == ledger["total"] + 1 == 3  # start, the warm-up fit's reservation and charge
    rdp = _visible(driver, "rdp-chart")
    finite = sum(value is not None for value in budget["committed_rdp"])
    assert int(rdp.get_attribute("data-plotted")) == finite > 0
    assert int(rdp.get_attribute("data-infinite")) == len(budget["committed_rdp"]) - finite
    _visible(driver, f"fit-row-{live.warmup_fit_id}")
    _screenshot(driver, "03-dataset-budget.png", full_page=True)

    # --- estimate: the form shows what POST /v1/fits/estimate returns --------------------------------------
    Select(_visible(driver, "estimate-solver")).select_by_value("dp_gd")
    Select(_visible(driver, "estimate-model")).select_by_value("logistic")
    epsilon_field = _visible(driver, "estimate-epsilon")
    epsilon_field.clear()
    epsilon_field.send_keys("0.6")
    _visible(driver, "estimate-params").send_keys(json.dumps({"steps": SLOW_STEPS}))
    _visible(driver, "estimate-submit").click()
    request = {"dataset_id": live.dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.6},
               "params": {"steps": SLOW_STEPS}}  # fmt: skip
    estimate = httpx.post(f"{live.base}/v1/fits/estimate", headers=bearer(live.owner), json=request).json()
    result = _visible(driver, "estimate-result")
    _wait(driver, lambda _: result.find_elements(*_testid("estimate-facts")), "no estimate shown")
    _assert_number(_visible(result, "estimate-cost-epsilon"), estimate["cost"]["epsilon"])
    assert _value(_visible(result, "estimate-optimal-order")) == estimate["cost"]["optimal_order"]
    _assert_number(_visible(result, "estimate-committed-before"), estimate["committed_epsilon_before"])
    _assert_number(_visible(result, "estimate-committed-after"), estimate["committed_epsilon_after"])
    _assert_number(_visible(result, "estimate-remaining-after"), estimate["remaining_epsilon_after"])
    admissible = _visible(result, "estimate-admissible")
    assert admissible.get_attribute("data-value") == "true" and estimate["admissible"] is True
    assert admissible.text == "yes"
    # the noise outlook: 12,000 noisy steps at ε = 0.6 on 3,000 rows are expected to drown the model (measured: at
    # or below the majority class), so the estimate warns before anything runs
    assert estimate["outlook"]["level"] == "high"
    assert _visible(result, "estimate-outlook-level").get_attribute("data-value") == "high"
    assert _visible(result, "estimate-outlook-warning").text == estimate["outlook"]["warning"]
    _screenshot(driver, "04-estimate.png", full_page=True)

    # --- run the fit and watch it progress to done ----------------------------------------------------------
    _visible(driver, "run-fit").click()
    fit_id = _visible(driver, "run-fit-link").get_attribute("data-fit-id")
    row_testid = f"fit-row-{fit_id}"
    _visible(driver, row_testid)
    observed: list[tuple[str, float]] = []
    shot_running = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # a poll loop recording the statuses the page shows
        try:
            row = driver.find_element(*_testid(row_testid))
            state = (row.get_attribute("data-status"), float(row.get_attribute("data-progress")))
        except StaleElementReferenceException:
            continue
        if not observed or observed[-1] != state:
            observed.append(state)
        if state[0] == "running" and 0 < state[1] < 1 and not shot_running:
            _screenshot(driver, "05-fit-running.png", full_page=True)
            shot_running = True
        if state[0] not in ("queued", "running"):
            break
        time.sleep(0.1)
    assert observed[-1] == ("succeeded", 1.0), observed
    assert any(status in ("queued", "running") for status, _ in observed[:-1]), observed
    assert any(status == "running" and 0 < progress < 1 for status, progress in observed), observed
    assert shot_running
    # the reservation and the charge of the new fit show up in the burn-down (the page refreshes on a status change)
    ledger = live.get(f"/v1/datasets/{live.dataset_id}/ledger?limit=1000")
    assert ledger["total"] == 4
    _wait(driver, lambda _: _burndown_points(driver) == ledger["total"] + 1, "the burn-down did not gain points")
    assert _burndown_points(driver) == points_before + 2
    budget = live.get(f"/v1/datasets/{live.dataset_id}/budget")
    _wait(driver, lambda _: _value(_visible(driver, "budget-remaining")) == budget["remaining_epsilon"],
          "the budget was not refreshed")  # fmt: skip
    assert budget["committed_epsilon"] == pytest.approx(estimate["committed_epsilon_after"], rel=1e-9)
    assert driver.find_element(*_testid("fits-polling")).get_attribute("textContent") == ""  # polling stopped
    kinds = [row.get_attribute("data-kind") for row in driver.find_elements(*_testid("ledger-row"))]
    assert kinds == [entry["kind"] for entry in reversed(ledger["entries"])]  # newest first
    driver.execute_script("window.scrollTo(0, 0)")
    _screenshot(driver, "06-fit-done.png", full_page=True)

    # --- the fit page: status, cost and the coefficients of the succeeded fit -------------------------------
    _visible(driver, row_testid).find_element(*_testid("fit-link")).click()
    fit = live.get(f"/v1/fits/{fit_id}")
    table = _visible(driver, "coefficients-table")
    assert _visible(driver, "fit-status").text == "succeeded"
    assert _visible(driver, "fit-solver").text == "dp_gd" and _visible(driver, "fit-model").text == "logistic"
    _assert_number(_visible(driver, "fit-cost-epsilon"), fit["cost"]["epsilon"])
    assert _value(_visible(driver, "fit-cost-order")) == fit["cost"]["optimal_order"]
    assert _value(_visible(driver, "fit-cost-delta")) == fit["cost"]["delta"]
    assert fit["outlook"] == estimate["outlook"]  # the same public prediction before and after the fit ran
    assert _visible(driver, "fit-outlook-level").get_attribute("data-value") == "high"
    assert _visible(driver, "fit-outlook-warning").text == fit["outlook"]["warning"]
    assert _visible(driver, "fit-finished").text != "—"
    rows = table.find_elements(*_testid("coefficient-row"))
    assert [r.get_attribute("data-feature") for r in rows] == fit["result"]["feature_names"]
    assert [_value(r) for r in rows] == pytest.approx(fit["result"]["coefficients"], rel=1e-12)
    assert _value(table.find_element(*_testid("coefficient-intercept"))) == pytest.approx(fit["result"]["intercept"])
    assert not driver.find_elements(*_testid("fit-cancel"))
    _screenshot(driver, "07-fit-result.png", full_page=True)
    _assert_no_script_errors(driver)


def test_analyst_estimate_errors_over_budget_refusal_and_cancel(live: Live, driver: WebDriver):
    _login(driver, live.base, live.analyst)
    assert _visible(driver, "session-role").get_attribute("textContent") == "analyst"
    _visible(driver, f"dataset-card-{live.small_dataset_id}").click()
    budget = live.get(f"/v1/datasets/{live.small_dataset_id}/budget", live.analyst)
    _assert_number(_visible(driver, "budget-remaining"), budget["remaining_epsilon"])

    # invalid parameters: the 422 problem's detail is shown in the form
    _visible(driver, "estimate-params").send_keys(json.dumps({"steps": 0}))
    _visible(driver, "estimate-submit").click()
    problem = httpx.post(f"{live.base}/v1/fits/estimate", headers=bearer(live.analyst), json={
        "dataset_id": live.small_dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5},
        "params": {"steps": 0},
    })  # fmt: skip
    assert problem.status_code == 422
    detail = _visible(driver, "estimate-error-detail")
    assert detail.text == problem.json()["detail"]
    assert _visible(driver, "estimate-error-title").text == problem.json()["title"]

    # over budget: the estimate says "no" and the fit is refused with the 409 problem in the banner
    params = _visible(driver, "estimate-params")
    params.clear()
    epsilon_field = _visible(driver, "estimate-epsilon")
    epsilon_field.clear()
    epsilon_field.send_keys("2")
    _visible(driver, "estimate-submit").click()
    admissible = _visible(driver, "estimate-admissible")
    assert admissible.get_attribute("data-value") == "false"
    _visible(driver, "run-fit").click()
    banner = _visible(driver, "error-banner")
    assert "Privacy budget exceeded" in _visible(banner, "error-title").text
    assert "privacy filter" in _visible(banner, "error-detail").text
    assert "Privacy budget exceeded" in _visible(driver, "run-error").text
    assert live.get(f"/v1/fits?dataset_id={live.small_dataset_id}", live.analyst) == []
    _visible(driver, "fits-empty")
    _screenshot(driver, "08-over-budget.png", full_page=True)

    # the solver select offers what GET /v1/solvers lists (no experimental solver here); the models follow it
    solvers = {solver["name"]: solver for solver in live.get("/v1/solvers", live.analyst)}
    solver_select = Select(_visible(driver, "estimate-solver"))
    assert [option.get_attribute("value") for option in solver_select.options] == list(solvers)
    assert "resque_localized" not in solvers  # experimental, disabled by default
    solver_select.select_by_value("dp_lazy_oco")
    models = [option.get_attribute("value") for option in Select(_visible(driver, "estimate-model")).options]
    assert models == solvers["dp_lazy_oco"]["models"]

    # a long fit is cancelled from its page
    long_fit = httpx.post(f"{live.base}/v1/fits", headers=bearer(live.analyst), json={
        "dataset_id": live.small_dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5},
        "params": {"steps": 100_000},
    })  # fmt: skip
    assert long_fit.status_code == 202, long_fit.text
    fit_id = long_fit.json()["id"]
    driver.get(f"{live.base}/ui#/fits/{fit_id}")
    _visible(driver, "fit-cancel").click()
    _wait(driver, lambda _: _visible(driver, "fit-status").text == "cancelled", "the fit was not cancelled")
    fit = live.get(f"/v1/fits/{fit_id}", live.analyst)
    assert fit["status"] == "cancelled" and "result" not in fit
    assert _visible(driver, "fit-error-detail").text == fit["error"]["detail"]
    assert not driver.find_elements(*_testid("fit-cancel"))
    _screenshot(driver, "11-fit-cancelled.png")
    _assert_no_script_errors(driver)


def test_analyst_without_grant_sees_no_datasets_and_a_readable_not_found(live: Live, driver: WebDriver):
    _login(driver, live.base, live.stranger)
    assert live.get("/v1/datasets", live.stranger) == []
    empty = _visible(driver, "datasets-empty")
    assert "No dataset has been shared with this analyst key" in empty.text
    _screenshot(driver, "09-no-grant.png")

    driver.get(f"{live.base}/ui#/datasets/{live.dataset_id}")
    problem = httpx.get(f"{live.base}/v1/datasets/{live.dataset_id}", headers=bearer(live.stranger))
    assert problem.status_code == 404
    _wait(driver, lambda _: problem.json()["detail"] in _visible(driver, "view-error-detail").text, "no 404 message")
    assert "HTTP 404" in _visible(driver, "view-error-title").text
    assert problem.json()["detail"] in _visible(driver, "error-detail").text  # the banner too
    _screenshot(driver, "10-not-found.png")

    driver.get(f"{live.base}/ui#/fits/{live.warmup_fit_id}")
    _wait(driver, lambda _: "does not exist" in _visible(driver, "view-error-detail").text, "no 404 for the fit")

    # log out: the key is forgotten (sessionStorage is empty) and the login form is back
    _visible(driver, "logout").click()
    _visible(driver, "login-key")
    assert driver.execute_script("return window.sessionStorage.length") == 0
    assert not driver.find_element(*_testid("session")).is_displayed()
    _assert_no_script_errors(driver)


def test_admin_reads_every_budget_but_gets_no_fit_form(live: Live, driver: WebDriver):
    _login(driver, live.base, live.admin)
    assert _visible(driver, "session-role").get_attribute("textContent") == "admin"
    for dataset_id in (live.dataset_id, live.small_dataset_id):
        card = _visible(driver, f"dataset-card-{dataset_id}")
        budget = live.get(f"/v1/datasets/{dataset_id}/budget", live.admin)
        _wait(driver, lambda _, c=card, b=budget: _value(_visible(c, "gauge-remaining")) == b["remaining_epsilon"],
              "the admin's gauge does not match the API")  # fmt: skip
    _visible(driver, f"dataset-card-{live.dataset_id}").click()
    _visible(driver, "estimate-unavailable")
    assert not driver.find_elements(*_testid("estimate-form"))
    ledger = live.get(f"/v1/datasets/{live.dataset_id}/ledger?limit=1000", live.admin)
    _wait(driver, lambda _: _burndown_points(driver) == ledger["total"] + 1, "the admin's burn-down is incomplete")

    # an RDP curve with null (= +∞) entries: those orders are not plotted, and the note says so
    drawn = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import("/ui/static/charts.js").then((charts) => {
            const drawn = charts.rdpChart([1.5, 2, 4, 8, 16], [0.1, 0.2, 0.4, null, null], 4);
            done({plotted: drawn.plotted, infinite: drawn.infinite, note: drawn.note,
                  lines: drawn.chart.querySelectorAll("polyline").length});
        }, (error) => done({error: String(error)}));
    """)
    assert drawn["plotted"] == 3 and drawn["infinite"] == 2 and drawn["lines"] == 1, drawn
    assert "∞ at 2 of 5 orders" in drawn["note"] and "not plotted" in drawn["note"]
    _assert_no_script_errors(driver)


def test_fit_page_runs_and_lists_private_evaluations(live: Live, driver: WebDriver):
    """A fit on a dataset with validation rows: the fit page's evaluations panel runs one (charged to the budget)
    and lists its noisy metrics as the API does; a fit on a dataset without them says so and offers no form."""
    dataset_id = register(live.base, live.owner, 3.0, "with validation rows", validation_fraction=0.25)
    created = httpx.post(f"{live.base}/v1/fits", headers=bearer(live.owner), timeout=30, json={
        "dataset_id": dataset_id, "solver": "dp_gd", "model": "logistic", "privacy": {"epsilon": 0.5},
    })  # fmt: skip
    assert created.status_code == 202, created.text
    fit_id = created.json()["id"]
    assert _wait_fit(live.base, live.owner, fit_id)["status"] == "succeeded"
    _login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/fits/{fit_id}")
    assert "1000 private validation rows" in _visible(driver, "evaluations-note").text
    _visible(driver, "evaluations-empty")
    field = _visible(driver, "evaluate-epsilon")
    field.clear()
    field.send_keys("0.5")
    _visible(driver, "evaluate-run").click()
    row = _visible(driver, "evaluation-row")
    (evaluation,) = live.get(f"/v1/fits/{fit_id}/evaluations")
    assert row.get_attribute("data-status") == evaluation["status"] == "succeeded"
    shown = {m.get_attribute("data-metric"): float(m.get_attribute("data-value"))
             for m in row.find_elements(*_testid("evaluation-metric"))}  # fmt: skip
    assert shown == {r["metric"]: pytest.approx(r["value"]) for r in evaluation["results"]}
    assert evaluation["cost"]["pure_epsilon"] == pytest.approx(0.5)
    _screenshot(driver, "08-fit-evaluations.png", full_page=True)

    driver.get(f"{live.base}/ui#/fits/{live.warmup_fit_id}")
    assert "no private validation rows" in _visible(driver, "evaluations-note").text
    assert not driver.find_elements(*_testid("evaluate-form"))


def test_a_multiclass_fit_page_shows_the_coefficient_matrix_with_classes_as_columns(live: Live, driver: WebDriver):
    from test_api_multiclass import LEVELS, MULTICLASS_SCHEMA, multiclass_csv

    uploaded = httpx.post(
        f"{live.base}/v1/datasets", headers=bearer(live.owner), files={"file": ("m.csv", multiclass_csv())},
        data={"schema": json.dumps(MULTICLASS_SCHEMA), "name": "wine-like classes", "allow_duplicate": "true"},
        timeout=30,
    )  # fmt: skip
    assert uploaded.status_code == 201, uploaded.text
    created = httpx.post(f"{live.base}/v1/fits", headers=bearer(live.owner), timeout=30, json={
        "dataset_id": uploaded.json()["id"], "solver": "dp_gd", "model": "logistic", "privacy": {"epsilon": 0.5},
    })  # fmt: skip
    assert created.status_code == 202, created.text
    fit = _wait_fit(live.base, live.owner, created.json()["id"])
    assert fit["status"] == "succeeded", fit
    _login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/fits/{fit['id']}")
    matrix = _visible(driver, "coefficients-matrix")
    headers = [th.text for th in matrix.find_elements(By.CSS_SELECTOR, "thead th")]
    assert headers == ["Feature", *LEVELS]
    rows = matrix.find_elements(*_testid("coefficient-matrix-row"))
    assert [r.get_attribute("data-feature") for r in rows] == fit["result"]["feature_names"]
    shown = [float(td.get_attribute("data-value")) for r in rows for td in r.find_elements(By.CSS_SELECTOR, "td")]
    expected = [v for column in zip(*fit["result"]["coefficients"], strict=True) for v in column]  # feature by feature
    assert shown == pytest.approx(expected, rel=1e-12)
    intercept = matrix.find_element(*_testid("coefficient-matrix-intercept"))
    values = [float(td.get_attribute("data-value")) for td in intercept.find_elements(By.CSS_SELECTOR, "td")]
    assert values == pytest.approx(fit["result"]["intercept"], rel=1e-12)
    assert not driver.find_elements(*_testid("coefficients-table"))
    _screenshot(driver, "10-multiclass-fit.png", full_page=True)
    _assert_no_script_errors(driver)


def test_an_auto_fit_page_names_the_selected_candidate(live: Live, driver: WebDriver):
    """``solver: "auto"`` releases which candidate won (result.selected): the fit page shows it beside the solver."""
    from test_api_multiclass import MULTICLASS_SCHEMA, multiclass_csv

    uploaded = httpx.post(
        f"{live.base}/v1/datasets", headers=bearer(live.owner), files={"file": ("m.csv", multiclass_csv())},
        data={"schema": json.dumps(MULTICLASS_SCHEMA), "name": "auto classes", "allow_duplicate": "true"},
        timeout=30,
    )  # fmt: skip
    assert uploaded.status_code == 201, uploaded.text
    created = httpx.post(f"{live.base}/v1/fits", headers=bearer(live.owner), timeout=30, json={
        "dataset_id": uploaded.json()["id"], "solver": "auto", "model": "logistic", "privacy": {"epsilon": 0.5},
        "params": {"mode": "recommended"},
    })  # fmt: skip
    assert created.status_code == 202, created.text
    fit = _wait_fit(live.base, live.owner, created.json()["id"])
    assert fit["status"] == "succeeded" and fit["result"]["selected"]["solver"] == "dp_gd", fit
    _login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/fits/{fit['id']}")
    assert _visible(driver, "selected-candidate").text == "SELECTED: DP_GD"  # the badge's CSS upper-cases it
    _assert_no_script_errors(driver)

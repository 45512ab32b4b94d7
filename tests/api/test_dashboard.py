"""The dashboard at /ui in a real browser: headless Chromium (Selenium 4) against a live ``privfit serve`` on SQLite.

The tests log in with keys of each role, read a dataset's budget, estimate and run a fit from the form, watch it
progress to done, and open its coefficients; every number the page shows is compared with the API's JSON over
httpx. Each step is saved as a screenshot under ``$PRIVFIT_TEST_ARTIFACTS/screenshots`` (default
``<repo>/test-artifacts/screenshots``, gitignored).

Chromium and chromedriver are Debian's (``/usr/bin/chromium``, ``/usr/bin/chromedriver``; Selenium Manager never
downloads anything). Without them the tests are skipped, except under ``CI=true`` where that is a failure. The
server, the browser and the helpers are in ``dashboard_helpers.py``; every test fails on a browser console error.
The owner's flows (upload, grants, keys) and the narrow layout are in ``test_dashboard_owner.py``.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import bearer
from dashboard_helpers import (
    FIT_WAIT,
    Live,
    assert_no_console_errors,
    assert_number,
    by_testid,
    data_value,
    fit_with_validation_rows,
    login,
    screenshot,
    start_live,
    visible,
    wait,
    wait_fit,
)
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from privfit.ui import CONTENT_SECURITY_POLICY, STATIC_DIR

# A dp_gd fit slow enough that the page (polling every second) shows it running with a progress value: several
# seconds on the fastest machine CI has used (12,000 steps finished between two polls there).
SLOW_STEPS = 50_000
EXPECTED_HEADERS = {"content-security-policy": CONTENT_SECURITY_POLICY, "x-content-type-options": "nosniff"}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The module's server (:func:`dashboard_helpers.start_live`)."""
    yield from start_live(tmp_path_factory)


def _burndown_points(browser: WebDriver) -> int:
    chart = visible(browser, "burndown-chart")
    return len(chart.find_elements(By.CSS_SELECTOR, "circle[data-point]"))


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


def test_no_dashboard_file_references_another_host():
    """Everything the page loads comes from the package (an air-gapped machine shows the same dashboard): no URL
    with a host in any static file but the SVG namespace, which names a vocabulary and is never fetched."""
    url = re.compile(r"(?:[a-z][a-z0-9+.-]*:)?//[\w.-]+\.[a-z]{2,}[^\s\"'`)]*", re.IGNORECASE)
    namespaces = {"http://www.w3.org/2000/svg"}
    files = sorted(p for p in STATIC_DIR.iterdir() if p.is_file())
    assert {p.suffix for p in files} >= {".html", ".js", ".css", ".svg"}
    found = {p.name: sorted(set(url.findall(p.read_text())) - namespaces) for p in files}
    assert not {name: urls for name, urls in found.items() if urls}, found
    # the pattern does catch a CDN reference, absolute or protocol-relative
    assert url.findall('<script src="https://cdn.example.org/x.js">') == ["https://cdn.example.org/x.js"]
    assert url.findall("@import url(//fonts.example.com/a.css);") == ["//fonts.example.com/a.css"]


def test_login_budget_estimate_run_fit_and_result(live: Live, driver: WebDriver):
    # --- login: a bad key shows the API's 401 detail, a good one the role and name --------------------------
    driver.get(f"{live.base}/ui")
    visible(driver, "login-key").send_keys("pf_000000000000_not-a-key")
    visible(driver, "login-submit").click()
    refused = httpx.get(f"{live.base}/v1/me", headers=bearer("pf_000000000000_not-a-key")).json()
    error = visible(driver, "login-error")
    wait(driver, lambda _: refused["detail"] in error.text, "the 401 detail was not shown")
    assert refused["title"] in error.text
    screenshot(driver, "01-login.png")

    login(driver, live.base, live.owner)
    me = live.get("/v1/me")
    assert visible(driver, "session-role").get_attribute("textContent") == me["role"] == "owner"

    # --- datasets list: name, n, d and a budget gauge per dataset -------------------------------------------
    card = visible(driver, f"dataset-card-{live.dataset_id}")
    dataset = live.get(f"/v1/datasets/{live.dataset_id}")
    budget = live.get(f"/v1/datasets/{live.dataset_id}/budget?include=rdp")  # the committed curve, for the chart
    assert card.find_element(*by_testid("dataset-name")).text == dataset["name"]
    assert data_value(card.find_element(*by_testid("dataset-n"))) == dataset["n"]
    assert data_value(card.find_element(*by_testid("dataset-d"))) == dataset["d"]
    remaining = visible(card, "gauge-remaining")
    assert_number(remaining, budget["remaining_epsilon"], decimals=2)
    assert_number(card.find_element(*by_testid("gauge-max")), budget["epsilon_max"], decimals=2)
    assert_number(card.find_element(*by_testid("gauge-committed")), budget["committed_epsilon"], decimals=2)
    assert len(driver.find_elements(By.CSS_SELECTOR, '[data-testid^="dataset-card-"]')) == 2
    screenshot(driver, "02-datasets.png")

    # --- dataset page: budget figures match GET /budget; one burn-down point per ledger entry + the start ---
    card.click()
    assert_number(visible(driver, "budget-remaining"), budget["remaining_epsilon"])
    figures = {"budget-epsilon-max": "epsilon_max", "budget-charged": "charged_epsilon",
               "budget-reserved": "reserved_epsilon", "budget-committed": "committed_epsilon"}  # fmt: skip
    for testid, key in figures.items():
        assert_number(visible(driver, testid), budget[key])
    assert data_value(visible(driver, "budget-delta")) == budget["delta_max"]
    # the page says what "committed ε" measures: the privacy filter's share, not an (ε, δ) statement of its own
    assert "privacy filter" in visible(driver, "budget-measure").text.lower()
    ledger = live.get(f"/v1/datasets/{live.dataset_id}/ledger?limit=1000")
    points_before = _burndown_points(driver)
    assert points_before == ledger["total"] + 1 == 3  # start, the warm-up fit's reservation and charge
    rdp = visible(driver, "rdp-chart")
    finite = sum(value is not None for value in budget["committed_rdp"])
    assert int(rdp.get_attribute("data-plotted")) == finite > 0
    assert int(rdp.get_attribute("data-infinite")) == len(budget["committed_rdp"]) - finite
    visible(driver, f"fit-row-{live.warmup_fit_id}")
    screenshot(driver, "03-dataset-budget.png", full_page=True)

    # --- estimate: the form shows what POST /v1/fits/estimate returns --------------------------------------
    Select(visible(driver, "estimate-solver")).select_by_value("dp_gd")
    Select(visible(driver, "estimate-model")).select_by_value("logistic")
    epsilon_field = visible(driver, "estimate-epsilon")
    epsilon_field.clear()
    epsilon_field.send_keys("0.6")
    visible(driver, "estimate-params").send_keys(json.dumps({"steps": SLOW_STEPS}))
    visible(driver, "estimate-submit").click()
    request = {"dataset_id": live.dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.6},
               "params": {"steps": SLOW_STEPS}}  # fmt: skip
    estimate = httpx.post(f"{live.base}/v1/fits/estimate", headers=bearer(live.owner), json=request).json()
    result = visible(driver, "estimate-result")
    wait(driver, lambda _: result.find_elements(*by_testid("estimate-facts")), "no estimate shown")
    assert_number(visible(result, "estimate-cost-epsilon"), estimate["cost"]["epsilon"])
    order = estimate["cost"]["optimal_order"]  # null: the exact Gaussian curve (data-value "inf")
    assert data_value(visible(result, "estimate-optimal-order")) == (math.inf if order is None else order)
    assert order is not None or visible(result, "estimate-optimal-order").text == "the exact Gaussian curve"
    assert_number(visible(result, "estimate-committed-before"), estimate["committed_epsilon_before"])
    assert_number(visible(result, "estimate-committed-after"), estimate["committed_epsilon_after"])
    assert_number(visible(result, "estimate-remaining-after"), estimate["remaining_epsilon_after"])
    admissible = visible(result, "estimate-admissible")
    assert admissible.get_attribute("data-value") == "true" and estimate["admissible"] is True
    assert admissible.text == "yes"
    # the noise outlook: 12,000 noisy steps at ε = 0.6 on 3,000 rows are expected to drown the model (measured: at
    # or below the majority class), so the estimate warns before anything runs
    assert estimate["outlook"]["level"] == "high"
    assert visible(result, "estimate-outlook-level").get_attribute("data-value") == "high"
    assert visible(result, "estimate-outlook-warning").text == estimate["outlook"]["warning"]
    screenshot(driver, "04-estimate.png", full_page=True)

    # --- run the fit and watch it progress to done ----------------------------------------------------------
    visible(driver, "run-fit").click()
    fit_id = visible(driver, "run-fit-link").get_attribute("data-fit-id")
    row_testid = f"fit-row-{fit_id}"
    visible(driver, row_testid)
    observed: list[tuple[str, float]] = []
    shot_running = False
    deadline = time.monotonic() + FIT_WAIT
    while time.monotonic() < deadline:  # a poll loop recording the statuses the page shows
        try:
            row = driver.find_element(*by_testid(row_testid))
            state = (row.get_attribute("data-status"), float(row.get_attribute("data-progress")))
        except StaleElementReferenceException:
            continue
        if not observed or observed[-1] != state:
            observed.append(state)
        if state[0] == "running" and 0 < state[1] < 1 and not shot_running:
            screenshot(driver, "05-fit-running.png", full_page=True)
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
    wait(driver, lambda _: _burndown_points(driver) == ledger["total"] + 1, "the burn-down did not gain points")
    assert _burndown_points(driver) == points_before + 2
    budget = live.get(f"/v1/datasets/{live.dataset_id}/budget")
    wait(driver, lambda _: data_value(visible(driver, "budget-remaining")) == budget["remaining_epsilon"],
          "the budget was not refreshed")  # fmt: skip
    assert budget["committed_epsilon"] == pytest.approx(estimate["committed_epsilon_after"], rel=1e-9)
    assert driver.find_element(*by_testid("fits-polling")).get_attribute("textContent") == ""  # polling stopped
    kinds = [row.get_attribute("data-kind") for row in driver.find_elements(*by_testid("ledger-row"))]
    assert kinds == [entry["kind"] for entry in reversed(ledger["entries"])]  # newest first
    driver.execute_script("window.scrollTo(0, 0)")
    screenshot(driver, "06-fit-done.png", full_page=True)

    # --- the fit page: status, cost and the coefficients of the succeeded fit -------------------------------
    visible(driver, row_testid).find_element(*by_testid("fit-link")).click()
    fit = live.get(f"/v1/fits/{fit_id}")
    table = visible(driver, "coefficients-table")
    assert visible(driver, "fit-status").text == "succeeded"
    assert visible(driver, "fit-solver").text == "dp_gd" and visible(driver, "fit-model").text == "logistic"
    assert_number(visible(driver, "fit-cost-epsilon"), fit["cost"]["epsilon"])
    order = fit["cost"]["optimal_order"]
    assert data_value(visible(driver, "fit-cost-order")) == (math.inf if order is None else order)
    assert data_value(visible(driver, "fit-cost-delta")) == fit["cost"]["delta"]
    assert fit["outlook"] == estimate["outlook"]  # the same public prediction before and after the fit ran
    assert visible(driver, "fit-outlook-level").get_attribute("data-value") == "high"
    assert visible(driver, "fit-outlook-warning").text == fit["outlook"]["warning"]
    assert visible(driver, "fit-finished").text != "—"
    rows = table.find_elements(*by_testid("coefficient-row"))
    assert [r.get_attribute("data-feature") for r in rows] == fit["result"]["feature_names"]
    assert [data_value(r) for r in rows] == pytest.approx(fit["result"]["coefficients"], rel=1e-12)
    intercept = table.find_element(*by_testid("coefficient-intercept"))
    assert data_value(intercept) == pytest.approx(fit["result"]["intercept"])
    assert not driver.find_elements(*by_testid("fit-cancel"))
    screenshot(driver, "07-fit-result.png", full_page=True)
    assert_no_console_errors(driver)


def test_analyst_estimate_errors_over_budget_refusal_and_cancel(live: Live, driver: WebDriver):
    login(driver, live.base, live.analyst)
    assert visible(driver, "session-role").get_attribute("textContent") == "analyst"
    visible(driver, f"dataset-card-{live.small_dataset_id}").click()
    budget = live.get(f"/v1/datasets/{live.small_dataset_id}/budget", live.analyst)
    assert_number(visible(driver, "budget-remaining"), budget["remaining_epsilon"])

    # invalid parameters: the 422 problem's detail is shown in the form
    visible(driver, "estimate-params").send_keys(json.dumps({"steps": 0}))
    visible(driver, "estimate-submit").click()
    problem = httpx.post(f"{live.base}/v1/fits/estimate", headers=bearer(live.analyst), json={
        "dataset_id": live.small_dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5},
        "params": {"steps": 0},
    })  # fmt: skip
    assert problem.status_code == 422
    detail = visible(driver, "estimate-error-detail")
    assert detail.text == problem.json()["detail"]
    assert visible(driver, "estimate-error-title").text == problem.json()["title"]

    # over budget: the estimate says "no" and the fit is refused with the 409 problem in the banner
    params = visible(driver, "estimate-params")
    params.clear()
    epsilon_field = visible(driver, "estimate-epsilon")
    epsilon_field.clear()
    epsilon_field.send_keys("2")
    visible(driver, "estimate-submit").click()
    admissible = visible(driver, "estimate-admissible")
    assert admissible.get_attribute("data-value") == "false"
    visible(driver, "run-fit").click()
    run_error = visible(driver, "run-error")
    assert "Privacy budget exceeded" in run_error.text and "privacy filter" in run_error.text
    assert not driver.find_element(*by_testid("error-banner")).is_displayed()  # shown once, next to the button
    assert live.get(f"/v1/fits?dataset_id={live.small_dataset_id}", live.analyst) == []
    visible(driver, "fits-empty")
    screenshot(driver, "08-over-budget.png", full_page=True)

    # the solver select offers what GET /v1/solvers lists (no experimental solver here); the models follow it
    solvers = {solver["name"]: solver for solver in live.get("/v1/solvers", live.analyst)}
    solver_select = Select(visible(driver, "estimate-solver"))
    assert [option.get_attribute("value") for option in solver_select.options] == list(solvers)
    assert "resque_localized" not in solvers  # experimental, disabled by default
    solver_select.select_by_value("resque_dpsgd")  # (dp_lazy_oco is listed disabled here: the exact sampler)
    models = [option.get_attribute("value") for option in Select(visible(driver, "estimate-model")).options]
    assert models == solvers["resque_dpsgd"]["models"]

    # a long fit is cancelled from its page
    long_fit = httpx.post(f"{live.base}/v1/fits", headers=bearer(live.analyst), json={
        "dataset_id": live.small_dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5},
        "params": {"steps": 100_000},
    })  # fmt: skip
    assert long_fit.status_code == 202, long_fit.text
    fit_id = long_fit.json()["id"]
    # the page's earlier requests must not fill the browser's resource-timing buffer (250 entries) before this fit's
    driver.execute_script("performance.clearResourceTimings(); performance.setResourceTimingBufferSize(10000)")
    driver.get(f"{live.base}/ui#/fits/{fit_id}")
    visible(driver, "fit-cancel").click()
    wait(driver, lambda _: visible(driver, "fit-status").text == "cancelled", "the fit was not cancelled")
    fit = live.get(f"/v1/fits/{fit_id}", live.analyst)
    assert fit["status"] == "cancelled" and "result" not in fit
    assert visible(driver, "fit-error-detail").text == fit["error"]["detail"]
    assert not driver.find_elements(*by_testid("fit-cancel"))

    # the page followed the fit's event stream (issue 38), not a poll of the fit every second. A stream's resource
    # entry is recorded when its response ends, which can come a moment after the page shows the cancellation (the
    # cancel request's own answer may update the page first): wait for it
    def fetched() -> list[str]:
        return driver.execute_script("return performance.getEntriesByType('resource').map((entry) => entry.name)")

    wait(driver, lambda _: any(f"/v1/fits/{fit_id}/events" in name for name in fetched()), "no event stream fetched")
    assert sum(name.endswith(f"/v1/fits/{fit_id}?include=metadata") for name in fetched()) == 1, fetched()
    screenshot(driver, "11-fit-cancelled.png")
    assert_no_console_errors(driver)


def test_analyst_without_grant_sees_no_datasets_and_a_readable_not_found(live: Live, driver: WebDriver):
    login(driver, live.base, live.stranger)
    assert live.get("/v1/datasets", live.stranger) == []
    empty = visible(driver, "datasets-empty")
    assert "No dataset has been shared with this analyst key" in empty.text
    screenshot(driver, "09-no-grant.png")

    driver.get(f"{live.base}/ui#/datasets/{live.dataset_id}")
    problem = httpx.get(f"{live.base}/v1/datasets/{live.dataset_id}", headers=bearer(live.stranger))
    assert problem.status_code == 404
    wait(driver, lambda _: problem.json()["detail"] in visible(driver, "view-error-detail").text, "no 404 message")
    assert "HTTP 404" in visible(driver, "view-error-title").text
    # the message is shown once: in the view, not repeated by the banner
    assert not driver.find_element(*by_testid("error-banner")).is_displayed()
    assert driver.find_element(By.TAG_NAME, "body").text.count(problem.json()["detail"]) == 1
    screenshot(driver, "10-not-found.png")

    driver.get(f"{live.base}/ui#/fits/{live.warmup_fit_id}")
    wait(driver, lambda _: "does not exist" in visible(driver, "view-error-detail").text, "no 404 for the fit")

    # log out: the key is forgotten (sessionStorage is empty) and the login form is back
    visible(driver, "logout").click()
    visible(driver, "login-key")
    assert driver.execute_script("return window.sessionStorage.length") == 0
    assert not driver.find_element(*by_testid("session")).is_displayed()
    assert_no_console_errors(driver)


def test_admin_reads_every_budget_but_gets_no_fit_form(live: Live, driver: WebDriver):
    login(driver, live.base, live.admin)
    assert visible(driver, "session-role").get_attribute("textContent") == "admin"
    for dataset_id in (live.dataset_id, live.small_dataset_id):
        card = visible(driver, f"dataset-card-{dataset_id}")
        budget = live.get(f"/v1/datasets/{dataset_id}/budget", live.admin)
        wait(driver, lambda _, c=card, b=budget: data_value(visible(c, "gauge-remaining")) == b["remaining_epsilon"],
              "the admin's gauge does not match the API")  # fmt: skip
    visible(driver, f"dataset-card-{live.dataset_id}").click()
    visible(driver, "estimate-unavailable")
    assert not driver.find_elements(*by_testid("estimate-form"))
    ledger = live.get(f"/v1/datasets/{live.dataset_id}/ledger?limit=1000", live.admin)
    wait(driver, lambda _: _burndown_points(driver) == ledger["total"] + 1, "the admin's burn-down is incomplete")

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
    assert_no_console_errors(driver)


def test_fit_page_runs_and_lists_private_evaluations(live: Live, driver: WebDriver):
    """A fit on a dataset with validation rows: the fit page's evaluations panel runs one (charged to the budget)
    and lists its noisy metrics as the API does; a fit on a dataset without them says so and offers no form."""
    fit_id = fit_with_validation_rows(live, "with validation rows")
    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/fits/{fit_id}")
    assert "1000 private validation rows" in visible(driver, "evaluations-note").text
    visible(driver, "evaluations-empty")
    field = visible(driver, "evaluate-epsilon")
    field.clear()
    field.send_keys("0.5")
    visible(driver, "evaluate-run").click()
    row = visible(driver, "evaluation-row")
    (evaluation,) = live.get(f"/v1/fits/{fit_id}/evaluations")
    assert row.get_attribute("data-status") == evaluation["status"] == "succeeded"
    shown = {m.get_attribute("data-metric"): float(m.get_attribute("data-value"))
             for m in row.find_elements(*by_testid("evaluation-metric"))}  # fmt: skip
    assert shown == {r["metric"]: pytest.approx(r["value"]) for r in evaluation["results"]}
    assert evaluation["cost"]["pure_epsilon"] == pytest.approx(0.5)
    screenshot(driver, "08-fit-evaluations.png", full_page=True)

    driver.get(f"{live.base}/ui#/fits/{live.warmup_fit_id}")
    assert "no private validation rows" in visible(driver, "evaluations-note").text
    assert not driver.find_elements(*by_testid("evaluate-form"))


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
    fit = wait_fit(live.base, live.owner, created.json()["id"])
    assert fit["status"] == "succeeded", fit
    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/fits/{fit['id']}")
    matrix = visible(driver, "coefficients-matrix")
    headers = [th.text for th in matrix.find_elements(By.CSS_SELECTOR, "thead th")]
    assert headers == ["Feature", *LEVELS]
    rows = matrix.find_elements(*by_testid("coefficient-matrix-row"))
    assert [r.get_attribute("data-feature") for r in rows] == fit["result"]["feature_names"]
    shown = [float(td.get_attribute("data-value")) for r in rows for td in r.find_elements(By.CSS_SELECTOR, "td")]
    expected = [v for column in zip(*fit["result"]["coefficients"], strict=True) for v in column]  # feature by feature
    assert shown == pytest.approx(expected, rel=1e-12)
    intercept = matrix.find_element(*by_testid("coefficient-matrix-intercept"))
    values = [float(td.get_attribute("data-value")) for td in intercept.find_elements(By.CSS_SELECTOR, "td")]
    assert values == pytest.approx(fit["result"]["intercept"], rel=1e-12)
    assert not driver.find_elements(*by_testid("coefficients-table"))
    screenshot(driver, "10-multiclass-fit.png", full_page=True)
    assert_no_console_errors(driver)


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
    fit = wait_fit(live.base, live.owner, created.json()["id"])
    assert fit["status"] == "succeeded" and fit["result"]["selected"]["solver"] == "dp_gd", fit
    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/fits/{fit['id']}")
    assert visible(driver, "selected-candidate").text == "SELECTED: DP_GD"  # the badge's CSS upper-cases it
    assert_no_console_errors(driver)


def test_a_preprocessed_dataset_shows_its_derived_encodings_and_its_ledger_entry(live: Live, driver: WebDriver):
    """An upload with the default private preprocessing: the dataset page lists each measured column with the
    encoding derived from its noisy histogram, as the API has it, and the ledger names the preprocessing entry."""
    from test_api_preprocessing import WIDE_SCHEMA, wide_csv

    answer = httpx.post(f"{live.base}/v1/datasets", headers=bearer(live.owner), timeout=60,
                        files={"file": ("wide.csv", wide_csv(2000))},
                        data={"schema": json.dumps(WIDE_SCHEMA), "name": "preprocessed"})  # fmt: skip
    assert answer.status_code == 201, answer.text
    dataset = answer.json()
    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/datasets/{dataset['id']}")
    summary = visible(driver, "preprocessing-summary").text
    assert "5 % of the budget" in summary and "committed ε" in summary, summary
    rows = driver.find_elements(*by_testid("preprocessing-row"))
    assert [row.find_element(By.CSS_SELECTOR, "td").text for row in rows] == ["income", "age"]
    income = dataset["preprocessing"]["columns"][0]["derived"]
    assert rows[0].text.endswith("then log1p") == income["log"] and "clip to [" in rows[0].text
    kinds = wait(driver, lambda d: [e.text for e in d.find_elements(*by_testid("ledger-row"))], "no ledger rows")
    assert any("preprocessing" in kind for kind in kinds), kinds
    assert_no_console_errors(driver)

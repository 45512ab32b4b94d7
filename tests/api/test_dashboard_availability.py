"""Issue 36 in the dashboard (headless Chromium against a live ``privfit serve``, :mod:`dashboard_helpers`):

* the estimate form lists a solver this server does not run (``available: false`` in ``GET /v1/solvers``; the
  live server runs the default exact sampler, so ``objective_perturbation`` and ``dp_lazy_oco``) as a disabled
  option that cannot be chosen, with the server's reason and the setting that enables it;
* a fit page's private-evaluation form sits above the result's coefficient table (it was ~3,500 px down);
* the Access panel names each granted key, with its id in the tooltip.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dashboard_helpers import Live, by_testid, fit_with_validation_rows, login, screenshot, start_live, visible, wait
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The module's server (:func:`dashboard_helpers.start_live`)."""
    yield from start_live(tmp_path_factory)


def _page_top(browser: WebDriver, testid: str) -> float:
    """The element's distance from the top of the page (not of the viewport), in CSS pixels."""
    return float(browser.execute_script(
        "const e = document.querySelector(`[data-testid='${arguments[0]}']`);"
        "return e.getBoundingClientRect().top + window.scrollY;", testid,
    ))  # fmt: skip


def test_an_unavailable_solver_is_listed_disabled_with_its_reason(live: Live, driver: WebDriver):
    catalogue = {s["name"]: s for s in live.get("/v1/solvers", live.analyst)}
    refused = {name for name, entry in catalogue.items() if not entry["available"]}
    assert {"objective_perturbation", "dp_lazy_oco"} <= refused  # the default server: exact sampler
    login(driver, live.base, live.analyst)
    driver.get(f"{live.base}/ui#/datasets/{live.dataset_id}")
    select_element = visible(driver, "estimate-solver")
    options = {o.get_attribute("value"): o for o in select_element.find_elements("css selector", "option")}
    assert set(options) == set(catalogue)
    for name, option in options.items():
        if name in refused:
            assert option.get_attribute("disabled") is not None and not option.is_enabled(), name
            assert catalogue[name]["enabled_by"] in option.get_attribute("title")
            assert catalogue[name]["unavailable_reason"] in option.get_attribute("title")
            assert "not on this server" in option.text
        else:
            assert option.is_enabled(), name
    chooser = Select(select_element)
    assert chooser.first_selected_option.get_attribute("value") == "dp_gd"
    with pytest.raises(NotImplementedError, match="disabled"):  # Selenium refuses, as a user's click does nothing
        chooser.select_by_value("objective_perturbation")
    assert chooser.first_selected_option.get_attribute("value") == "dp_gd"
    note = visible(driver, "unavailable-solvers")
    assert all(name in note.text for name in refused)
    reasons = {r.get_attribute("data-solver"): r.get_attribute("textContent")
               for r in note.find_elements(*by_testid("unavailable-reason"))}  # fmt: skip
    assert reasons == {name: catalogue[name]["unavailable_reason"] for name in refused}
    # auto's reference (the About panel) names the candidates this server uses: not objective_perturbation
    chooser.select_by_value("auto")
    about = visible(driver, "solver-about")
    about.click()
    wait(driver, lambda _: "on this server" in about.text, "auto's description did not show")
    assert "objective_perturbation" not in about.text and "output_perturbation" in about.text
    screenshot(driver, "36-unavailable-solvers.png")


def test_the_evaluation_form_sits_above_the_result(live: Live, driver: WebDriver):
    fit_id = fit_with_validation_rows(live, "evaluation form position")
    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/fits/{fit_id}")
    visible(driver, "evaluate-form")
    visible(driver, "coefficients-table")
    form, table = _page_top(driver, "evaluate-form"), _page_top(driver, "coefficients-table")
    summary = _page_top(driver, "fit-summary")
    assert summary < form < table, (summary, form, table)
    height = driver.execute_script("return window.innerHeight")
    assert form < 2 * height, (form, height)  # within the first two screens, not 3,500 px down
    screenshot(driver, "36-evaluation-form-position.png")


def test_grants_show_the_key_name_with_its_id_in_the_tooltip(live: Live, driver: WebDriver):
    (grant,) = live.get(f"/v1/datasets/{live.dataset_id}/grants")
    assert grant["api_key_name"] == "analyst" and grant["api_key_id"] == live.analyst_key_id
    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/datasets/{live.dataset_id}")
    row = visible(driver, "grant-row")
    name = visible(row, "grant-key-name")
    assert name.text == "analyst"
    assert live.analyst_key_id in name.get_attribute("title")
    assert row.get_attribute("data-key-id") == live.analyst_key_id

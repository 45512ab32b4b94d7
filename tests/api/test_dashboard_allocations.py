"""Allocations in the dashboard (issue 37, item 1), in headless Chromium against a live server: the owner sets an
analyst's allocation from the dataset page (a share over the budget first: the API's 422 shown with its field),
sees it listed with the API's numbers and removes it; the analyst sees its own allocation in the budget panel and in
an estimate. Browser set-up and skips as in ``dashboard_helpers.py``; every number is compared with the API's JSON."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from api_helpers import bearer
from dashboard_helpers import (
    Live,
    assert_number,
    by_testid,
    login,
    screenshot,
    start_live,
    visible,
    wait,
    wait_fit,
)
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    yield from start_live(tmp_path_factory)


def _fill(driver: WebDriver, testid: str, text: str) -> None:
    field = visible(driver, testid)
    field.clear()
    field.send_keys(text)


def test_the_owner_sets_lists_and_removes_an_allocation(live: Live, driver: WebDriver):
    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/datasets/{live.dataset_id}")
    section = visible(driver, "allocations-section")
    assert "Allocations" in section.text
    visible(driver, "allocations-empty")
    options = Select(visible(driver, "allocation-key")).options
    assert [o.get_attribute("value") for o in options] == [live.analyst_key_id]  # the granted key, not the stranger
    assert options[0].text.startswith("analyst (")

    _fill(driver, "allocation-epsilon", "5")  # over the dataset's budget ε = 3: the API's 422 names the field
    _fill(driver, "allocation-delta", "1e-7")
    visible(driver, "allocation-submit").click()
    assert "(HTTP 422)" in visible(driver, "allocation-error-title").text
    assert [f.text for f in driver.find_elements(*by_testid("allocation-error-field"))] == ["epsilon"]

    _fill(driver, "allocation-epsilon", "0.5")
    visible(driver, "allocation-submit").click()
    visible(driver, "allocation-ok")
    (allocation,) = live.get(f"/v1/datasets/{live.dataset_id}/allocations")
    assert (allocation["api_key_id"], allocation["epsilon_max"], allocation["delta_max"]) == (
        live.analyst_key_id, 0.5, 1e-7,
    )  # fmt: skip
    row = visible(driver, "allocation-row")
    assert row.get_attribute("data-key-id") == live.analyst_key_id
    assert visible(row, "allocation-key-name").text == "analyst"
    assert_number(visible(row, "allocation-epsilon-max"), 0.5)
    assert visible(row, "allocation-delta-max").text == "1e−7"
    assert_number(visible(row, "allocation-committed"), allocation["committed_epsilon"])
    assert_number(visible(row, "allocation-remaining"), allocation["remaining_epsilon"])
    assert allocation["closed_reason"] is None and not row.find_elements(*by_testid("allocation-closed"))
    assert not driver.find_elements(*by_testid("budget-allocation"))  # the owner has no allocation of its own
    select = visible(driver, "allocation-key")  # the analyst has one now: no key left to offer
    assert not select.is_enabled() and not visible(driver, "allocation-submit").is_enabled()
    screenshot(driver, "allocations-owner.png", full_page=True)

    visible(row, "allocation-remove").click()
    visible(driver, "allocation-remove-confirm").click()
    visible(driver, "allocations-empty")
    assert live.get(f"/v1/datasets/{live.dataset_id}/allocations") == []
    wait(driver, lambda _: visible(driver, "allocation-key").is_enabled(), "the key is not offered again")


def test_the_analyst_sees_its_own_allocation(live: Live, driver: WebDriver):
    dataset = live.small_dataset_id
    put = httpx.put(f"{live.base}/v1/datasets/{dataset}/allocations/{live.analyst_key_id}", headers=bearer(live.owner),
                    json={"epsilon": 0.6, "delta": 1e-7}, timeout=30)  # fmt: skip
    assert put.status_code == 201, put.text
    fit = httpx.post(f"{live.base}/v1/fits", headers=bearer(live.analyst), timeout=30, json={
        "dataset_id": dataset, "solver": "output_perturbation", "model": "logistic", "privacy": {"epsilon": 0.2},
    })  # fmt: skip
    assert fit.status_code == 202, fit.text
    assert wait_fit(live.base, live.analyst, fit.json()["id"])["status"] == "succeeded"
    own = live.get(f"/v1/datasets/{dataset}/budget", live.analyst)["allocation"]
    assert own["committed_epsilon"] > 0.0 and own["remaining_epsilon"] < 0.6

    login(driver, live.base, live.analyst)
    driver.get(f"{live.base}/ui#/datasets/{dataset}")
    note = visible(driver, "budget-allocation")
    assert note.text.startswith("Your allocation: ε 0.600 (δ 1e−7) of which ") and " remaining" in note.text
    assert_number(visible(note, "budget-allocation-epsilon"), 0.6)
    assert_number(visible(note, "budget-allocation-remaining"), own["remaining_epsilon"])
    assert_number(visible(note, "budget-allocation-committed"), own["committed_epsilon"])
    assert not driver.find_elements(*by_testid("allocations-section"))  # no owner control for an analyst

    Select(visible(driver, "estimate-solver")).select_by_value("output_perturbation")
    _fill(driver, "estimate-epsilon", "0.2")
    visible(driver, "estimate-submit").click()
    request = {"dataset_id": dataset, "model": "logistic", "solver": "output_perturbation", "privacy": {"epsilon": 0.2}}
    estimate = httpx.post(f"{live.base}/v1/fits/estimate", headers=bearer(live.analyst), json=request).json()
    assert_number(visible(driver, "estimate-allocation-before"), estimate["allocation"]["committed_epsilon_before"])
    assert_number(visible(driver, "estimate-allocation-remaining"), estimate["allocation"]["remaining_epsilon_after"])
    screenshot(driver, "allocations-analyst.png", full_page=True)

"""The largest admissible ε in the dashboard (issue 36, item 4), in headless Chromium against a live server: the
estimate shows the value the API states, a refused fit shows a button that puts it in the target ε field, and the
fit at that ε is admitted. Browser set-up and skips as in ``dashboard_helpers.py``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from api_helpers import bearer
from dashboard_helpers import Live, by_testid, login, screenshot, start_live, visible, wait
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    yield from start_live(tmp_path_factory)


def test_the_estimate_and_the_refusal_offer_the_largest_admissible_epsilon(live: Live, driver: WebDriver):
    login(driver, live.base, live.analyst)
    visible(driver, f"dataset-card-{live.small_dataset_id}").click()
    Select(visible(driver, "estimate-solver")).select_by_value("dp_gd")
    Select(visible(driver, "estimate-model")).select_by_value("logistic")
    epsilon_field = visible(driver, "estimate-epsilon")
    epsilon_field.clear()
    epsilon_field.send_keys("2")
    visible(driver, "estimate-submit").click()
    request = {"dataset_id": live.small_dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 2}}
    estimate = httpx.post(f"{live.base}/v1/fits/estimate", headers=bearer(live.analyst), json=request).json()
    largest = estimate["max_admissible_epsilon"]
    assert not estimate["admissible"] and 0.0 < largest < 1.0
    shown = visible(driver, "estimate-max-epsilon")
    assert float(shown.get_attribute("data-value")) == largest and shown.text == str(largest)

    visible(driver, "run-fit").click()  # refused: the 409 names the value and offers it
    assert "Privacy budget exceeded" in visible(driver, "run-error").text
    use = visible(driver, "use-max-epsilon")
    assert use.text == f"Use ε = {largest}"
    screenshot(driver, "headroom-refusal.png", full_page=True)
    use.click()
    assert visible(driver, "estimate-epsilon").get_attribute("value") == str(largest)

    visible(driver, "run-fit").click()  # exactly that ε is admitted
    fit_id = visible(driver, "run-fit-link").get_attribute("data-fit-id")
    fit = httpx.get(f"{live.base}/v1/fits/{fit_id}", headers=bearer(live.analyst)).json()
    assert fit["settings"]["target_epsilon"] == largest
    wait(driver, lambda d: d.find_elements(*by_testid(f"fit-row-{fit_id}")), "the admitted fit is not listed")

"""Issue 24: on a machine with no route to the internet the API reference renders and the front door's links work:
headless Chromium resolves no host name but 127.0.0.1 (every other host fails, as on an air-gapped machine), so any
asset loaded from elsewhere is a console error, and every test fails on a console error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_helpers import Live, chromium, screenshot, start_live, wait
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

AIR_GAPPED = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    yield from start_live(tmp_path_factory)


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[WebDriver]:
    with chromium(tmp_path, AIR_GAPPED) as browser:
        yield browser


def test_the_api_reference_renders_with_no_route_to_the_internet(live: Live, driver: WebDriver) -> None:
    driver.get(f"{live.base}/docs")
    title = wait(driver, lambda b: b.find_elements(By.CSS_SELECTOR, ".swagger-ui .info .title"), "Swagger UI's title")
    assert "privfit" in title[0].text
    operations = wait(driver, lambda b: b.find_elements(By.CSS_SELECTOR, ".opblock"), "the operations")
    assert len(operations) > 20
    loaded = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded and all(url.startswith(live.base) for url in loaded), loaded
    screenshot(driver, "30-api-reference-offline.png")


def test_redoc_renders_with_no_route_to_the_internet_and_fetches_nothing_else(live: Live, driver: WebDriver) -> None:
    """Issue 36: ReDoc's page renders air-gapped, every resource it loads is the service's own (its bundle's credit
    logo, fetched from cdn.redoc.ly as shipped, is an inline image in the bundle served), and nothing fails."""
    driver.get(f"{live.base}/redoc")
    title = wait(driver, lambda b: b.find_elements(By.CSS_SELECTOR, ".api-info h1"), "ReDoc's title")
    assert "privfit" in title[0].text
    operations = wait(driver, lambda b: b.find_elements(By.CSS_SELECTOR, "[data-section-id^='operation/']"),
                      "the operations")  # fmt: skip
    assert len(operations) > 20
    logo = wait(driver, lambda b: b.find_elements(By.CSS_SELECTOR, "img[alt='redocly logo']"), "the credit's logo")
    assert logo[0].get_attribute("src").startswith("data:image/svg+xml,")
    loaded = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded and all(url.startswith((live.base, "data:")) for url in loaded), loaded
    screenshot(driver, "31-redoc-offline.png")


def test_the_front_door_links_where_things_are(live: Live, driver: WebDriver) -> None:
    driver.get(f"{live.base}/")
    links = {a.get_attribute("href").removeprefix(live.base) for a in driver.find_elements(By.TAG_NAME, "a")}
    assert {"/ui", "/docs", "/redoc", "/openapi.json", "/healthz", "/readyz"} <= links
    driver.find_element(By.CSS_SELECTOR, 'a[href="/ui"]').click()
    wait(driver, lambda b: b.find_elements(By.TAG_NAME, "form"), "the dashboard's login form")

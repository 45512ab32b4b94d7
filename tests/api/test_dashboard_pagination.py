"""Issue 38, item 4, in the browser: the dashboard follows the lists' pages (``Link: <…>; rel="next"``). A dataset
with 1,001 fits — one more than the API's largest page, bulk-inserted through the ORM into the live server's database
(finished fits: the server's workers have nothing to run) — shows all of them on its page."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from api_helpers import bearer
from dashboard_helpers import login, visible, wait
from process_helpers import LiveServer, register, sqlite_server
from selenium.webdriver.remote.webdriver import WebDriver
from test_api_pagination import insert_fits

from privfit.api.pagination import MAX_PAGE_SIZE
from privfit.db import make_database


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with sqlite_server(tmp_path_factory.mktemp("dashboard-pages")) as live:
        yield live


def test_a_dataset_page_shows_every_fit_across_pages(running: LiveServer, driver: WebDriver):
    dataset_id = register(running.base, running.owner, 2.0, "many fits")
    owner_id = httpx.get(f"{running.base}/v1/me", headers=bearer(running.owner)).json()["key_id"]
    db = make_database(running.database_url)
    try:
        rows = insert_fits(db, dataset_id, owner_id, MAX_PAGE_SIZE + 1)
    finally:
        db.dispose()
    first = httpx.get(f"{running.base}/v1/fits", params={"dataset_id": dataset_id, "limit": MAX_PAGE_SIZE},
                      headers=bearer(running.owner))  # fmt: skip
    assert len(first.json()) == MAX_PAGE_SIZE and "next" in first.links  # two pages
    login(driver, running.base, running.owner)
    driver.get(f"{running.base}/ui#/datasets/{dataset_id}")
    visible(driver, "fits-table")
    shown = wait(driver, lambda d: d.execute_script(
        "const n = document.querySelectorAll('[data-fit-id]').length; return n > 1000 ? n : null;"),
        "the dataset page did not show the fits of the second page")  # fmt: skip
    assert shown == len(rows) == MAX_PAGE_SIZE + 1
    last = max(rows, key=lambda row: (row["created_at"], row["id"]))["id"]  # the second page's one fit
    visible(driver, f"fit-row-{last}")

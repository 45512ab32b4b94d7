"""Privacy domains in the dashboard (issue 37, item 2), in headless Chromium against a live server: the owner's
upload form offers the owner's datasets as a privacy domain (the note shows the budget its schema must declare and
puts it in the schema), a duplicate's 409 offers to choose the existing dataset's domain, and the dataset page names
the domain a dataset shares (on a member) or the datasets that share its budget (on the domain's first dataset).
Browser set-up and skips as in ``dashboard_helpers.py``; names, ids and numbers are compared with the API's JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_helpers import SMALL_SCHEMA, bearer, small_csv
from dashboard_helpers import assert_number, by_testid, login, screenshot, visible, wait
from process_helpers import LiveServer, register, sqlite_server
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A bare server with an owner key (the test uploads its first dataset over the API; no fit runs)."""
    with sqlite_server(tmp_path_factory.mktemp("domains")) as server:
        yield server


def _get(live: LiveServer, path: str) -> Any:
    response = httpx.get(f"{live.base}{path}", headers=bearer(live.owner), timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _set_schema(driver: WebDriver, schema: dict[str, Any]) -> None:
    """Replace the schema's JSON (and fire the input event the column editor listens to)."""
    driver.execute_script(
        "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input', {bubbles: true}))",
        visible(driver, "upload-schema"), json.dumps(schema),
    )  # fmt: skip


def _offered(driver: WebDriver) -> list[str]:
    """The values of the upload form's privacy domain options ("" is "its own budget")."""
    return [o.get_attribute("value") for o in Select(visible(driver, "upload-privacy-domain")).options]


def test_upload_into_a_privacy_domain_and_the_pages_that_show_it(live: LiveServer, driver: WebDriver, tmp_path: Path):
    first_id = register(live.base, live.owner, 3.0, "people 2024")
    first = _get(live, f"/v1/datasets/{first_id}")
    budget = _get(live, f"/v1/datasets/{first_id}/budget")
    assert first["privacy_domain"] == first_id

    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/datasets/{first_id}")
    visible(driver, "budget-epsilon-max")
    assert not driver.find_elements(*by_testid("dataset-domain"))  # its own budget, nobody shares it: nothing extra

    # the upload form offers "its own budget" (the default) and the owner's datasets
    visible(driver, "nav-upload").click()
    select = visible(driver, "upload-privacy-domain")
    wait(driver, lambda _: _offered(driver) == ["", first_id], "the owner's dataset is not offered")
    options = [(o.get_attribute("value"), o.text) for o in Select(select).options]
    assert options == [("", "its own budget"), (first_id, f"people 2024 ({first_id.split('-')[0]})")]
    assert Select(select).first_selected_option.get_attribute("value") == ""

    # the same rows with a budget of its own: the API's 409, shown as the form's error, and an offer to join
    other_budget = json.loads(json.dumps(SMALL_SCHEMA))
    other_budget["budget"]["epsilon"] = 1.0
    _set_schema(driver, other_budget)
    csv_path = tmp_path / "people-cleaned.csv"
    csv_path.write_bytes(small_csv())
    visible(driver, "upload-file").send_keys(str(csv_path))
    name = visible(driver, "upload-name")
    name.send_keys("people 2024 (cleaned)")
    visible(driver, "upload-submit").click()
    title = visible(driver, "upload-error-title")
    direct = httpx.post(f"{live.base}/v1/datasets", headers=bearer(live.owner), timeout=30,
                        files={"file": ("s.csv", small_csv())}, data={"schema": json.dumps(other_budget)})  # fmt: skip
    assert direct.status_code == 409, direct.text
    problem = direct.json()
    assert problem["privacy_domain"] == first_id
    assert title.text == f"{problem['title']} (HTTP 409)"
    detail = visible(driver, "upload-error-detail").text
    assert detail == problem["detail"] and f"privacy_domain={first_id}" in detail
    assert "people 2024" in visible(driver, "upload-join-offer").text
    visible(driver, "upload-join-domain").click()
    assert Select(visible(driver, "upload-privacy-domain")).first_selected_option.get_attribute("value") == first_id

    # the note states the domain's budget (the API's numbers) that the schema must declare
    note = visible(driver, "upload-domain-budget")
    assert "people 2024" in note.text and "must declare" in note.text
    assert_number(visible(note, "upload-domain-epsilon"), budget["epsilon_max"])
    assert float(visible(note, "upload-domain-delta").get_attribute("data-value")) == budget["delta_max"]
    visible(driver, "upload-submit").click()  # the schema still declares ε = 1: the API's 422 names schema.budget
    wait(driver, lambda _: "422" in visible(driver, "upload-error-title").text, "no 422 shown")
    assert [f.text for f in driver.find_elements(*by_testid("upload-error-field"))] == ["schema.budget"]
    screenshot(driver, "domains-upload-note.png", full_page=True)

    visible(driver, "upload-domain-use-budget").click()
    declared = json.loads(visible(driver, "upload-schema").get_attribute("value"))
    wanted = {**SMALL_SCHEMA["budget"], "epsilon": budget["epsilon_max"], "delta": budget["delta_max"]}
    assert declared["budget"] == wanted
    assert visible(driver, "builder-epsilon").get_attribute("value") == "3"  # the column editor follows
    visible(driver, "upload-submit").click()
    ok = visible(driver, "upload-ok")
    second_id = ok.get_attribute("data-dataset-id")
    second = _get(live, f"/v1/datasets/{second_id}")
    assert (second["name"], second["privacy_domain"]) == ("people 2024 (cleaned)", first_id)
    wait(driver, lambda _: _offered(driver) == ["", first_id, second_id], "the new dataset is not offered as a domain")
    shared = _get(live, f"/v1/datasets/{second_id}/budget")
    assert (shared["epsilon_max"], shared["committed_epsilon"]) == (budget["epsilon_max"], budget["committed_epsilon"])

    # the member's page names the domain's dataset; its budget is the domain's
    visible(driver, "upload-dataset-link").click()
    assert visible(driver, "dataset-title").text == second["name"]
    domain = visible(driver, "dataset-domain")
    assert domain.get_attribute("data-domain-id") == first_id
    assert domain.text.startswith(f"Privacy domain: shares the budget of {first['name']} ({first_id.split('-')[0]})")
    link = visible(domain, "domain-dataset")
    assert (link.text, link.get_attribute("data-dataset-id")) == (first["name"], first_id)
    assert_number(visible(driver, "budget-epsilon-max"), shared["epsilon_max"])
    assert_number(visible(driver, "budget-remaining"), shared["remaining_epsilon"])
    screenshot(driver, "domains-member.png", full_page=True)

    # the domain's first dataset lists the datasets that share its budget (the datasets list's privacy_domain)
    link.click()
    wait(driver, lambda _: visible(driver, "dataset-title").text == first["name"], "the domain's page did not open")
    domain = visible(driver, "dataset-domain")
    short = second_id.split("-")[0]
    assert domain.text.startswith(f"Privacy domain: its budget is shared with {second['name']} ({short})")
    members = [m.get_attribute("data-dataset-id") for m in driver.find_elements(*by_testid("domain-member"))]
    listed = [d["id"] for d in _get(live, "/v1/datasets") if d["privacy_domain"] == first_id and d["id"] != first_id]
    assert members == listed == [second_id]
    assert visible(domain, "domain-member-link").text == second["name"]
    screenshot(driver, "domains-first.png", full_page=True)


def test_a_user_level_dataset_shows_its_units(live: LiveServer, driver: WebDriver):
    """Issue 37, item 3: a dataset with a privacy unit shows its public size as units of that column, with the bound
    on rows per unit (the API's numbers); its row count is not shown anywhere."""
    declared = {**json.loads(json.dumps(SMALL_SCHEMA)), "privacy_unit": {"column": "person", "max_rows": 2}}
    lines = small_csv().decode().splitlines()
    rows = [f"{lines[0]},person"] + [f"{line},p{i // 3}" for i, line in enumerate(lines[1:])]  # three rows each
    form = {"schema": json.dumps(declared), "name": "visits", "allow_duplicate": "true"}
    created = httpx.post(f"{live.base}/v1/datasets", headers=bearer(live.owner), timeout=30,
                         files={"file": ("people.csv", "\n".join(rows).encode())}, data=form)  # fmt: skip
    assert created.status_code == 201, created.text
    dataset = created.json()
    assert dataset["privacy_unit"]["units"] == dataset["n"] == -(-(len(rows) - 1) // 3)

    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/datasets/{dataset['id']}")
    size = visible(driver, "dataset-n")
    assert_number(size, dataset["n"])
    line = size.find_element("xpath", "..").text
    assert "units of “person” (≤ 2 rows each)" in line and " rows · " not in line, line
    screenshot(driver, "user-level-dataset.png", full_page=True)

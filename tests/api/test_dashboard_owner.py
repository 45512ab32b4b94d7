"""The dashboard's owner and admin flows, its fixes of issue 24, and its narrow layout, in headless Chromium.

- An owner uploads a dataset from the page: the schema built column by column (kept in step with its JSON),
  "Validate" naming a wrong field in the browser, the API's 4xx answers shown with the fields they name (a
  duplicate: ``allow_duplicate``; a cell outside its declared levels: the column and line), then a success.
- An owner grants an analyst key on a dataset (the analyst then sees it), revokes it (then it does not); a
  refused grant names ``api_key_id``; analysts are offered no owner control; admins manage keys.
- Fixes: an analyst's ledger shows its own entries only, without running totals (issue 37); the coefficient
  table sorts by column and downloads as CSV (the file's numbers are the API's), the release metadata does not
  repeat the resolved settings, the datasets list searches by name and sorts.
- At 420 px width no element sticks out of the page: tables scroll inside their containers.

Every number is compared with the API's JSON over httpx; screenshots go where test_dashboard.py puts them; every
test fails on a browser console error (``dashboard_helpers.chromium``).
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_helpers import SMALL_SCHEMA, bearer, small_csv
from dashboard_helpers import (
    WAIT,
    Live,
    by_testid,
    login,
    screenshot,
    start_live,
    visible,
    wait,
    wait_fit,
)
from process_helpers import register
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select

NARROW = 420


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """This module's own server (:func:`dashboard_helpers.start_live`): its tests add and delete datasets."""
    yield from start_live(tmp_path_factory)


def _type(element: WebElement, text: str) -> None:
    """Replace a field's text (select all, then type: fires the input events the editor listens to)."""
    element.parent.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)  # not under the top bar
    element.click()
    element.send_keys("\ue009a")  # Ctrl+A
    element.send_keys("\ue003")  # Backspace
    element.send_keys(text)


def _logout(browser: WebDriver) -> None:
    visible(browser, "logout").click()
    visible(browser, "login-key")


def _upload_file(tmp_path: Path, content: bytes, name: str = "small.csv") -> str:
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def _displayed_cards(browser: WebDriver) -> list[str]:
    cards = browser.find_elements(By.CSS_SELECTOR, '[data-testid^="dataset-card-"]')
    return [card.get_attribute("data-dataset-id") for card in cards if card.is_displayed()]


# --- upload ----------------------------------------------------------------------------------------------------


def test_owner_uploads_a_dataset_built_column_by_column(live: Live, driver: WebDriver, tmp_path: Path):
    login(driver, live.base, live.owner)
    visible(driver, "nav-upload").click()
    visible(driver, "upload-form")
    assert not driver.find_element(*by_testid("nav-keys")).is_displayed()  # admins only

    # the column editor starts from a starter schema; rebuild it into SMALL_SCHEMA's declaration
    _type(visible(driver, "builder-label-name"), "y")
    names = driver.find_elements(*by_testid("builder-feature-name"))
    _type(names[0], "x1")
    _type(driver.find_elements(*by_testid("builder-feature-upper"))[0], "1")
    _type(driver.find_elements(*by_testid("builder-feature-lower"))[0], "5")  # a mistake: lower > upper
    _type(names[1], "x2")
    Select(driver.find_elements(*by_testid("builder-feature-type"))[1]).select_by_value("numeric")
    _type(driver.find_elements(*by_testid("builder-feature-lower"))[1], "-1")
    visible(driver, "builder-add").click()
    wait(driver, lambda d: len(d.find_elements(*by_testid("builder-feature"))) == 3, "no third column")
    _type(driver.find_elements(*by_testid("builder-feature-name"))[2], "color")
    Select(driver.find_elements(*by_testid("builder-feature-type"))[2]).select_by_value("categorical")
    _type(visible(driver, "builder-feature-levels"), "red, green, blue")
    Select(visible(driver, "builder-preprocessing")).select_by_value("share")  # private preprocessing: a share…
    _type(visible(driver, "builder-preprocessing-share"), "0.2")
    assert json.loads(visible(driver, "upload-schema").get_attribute("value"))["preprocessing"] == {"share": 0.2}
    Select(visible(driver, "builder-preprocessing")).select_by_value("none")  # …or none, as SMALL_SCHEMA declares

    # "Validate" names the wrong field the way the API spells it, and uploading is refused before sending
    visible(driver, "schema-validate").click()
    problems = driver.find_elements(*by_testid("schema-problem"))
    assert [p.get_attribute("data-field") for p in problems] == ["schema.features.0.lower"], [p.text for p in problems]
    assert "strictly less than upper" in problems[0].text
    screenshot(driver, "12-upload-schema-problem.png", full_page=True)
    _type(driver.find_elements(*by_testid("builder-feature-lower"))[0], "-1")
    visible(driver, "schema-validate").click()
    visible(driver, "schema-valid")
    declared = json.loads(visible(driver, "upload-schema").get_attribute("value"))
    assert declared == SMALL_SCHEMA  # the editor wrote exactly the declaration the API tests upload

    # JSON the column editor cannot show (not parsed, or a column that is not an object) leaves it unavailable
    text = visible(driver, "upload-schema")
    for broken, problem_field in (('{"label": ', "schema"), ('{"features": [1]}', "schema.features.0")):
        text.clear()
        text.send_keys(broken)
        visible(driver, "builder-unavailable")
        visible(driver, "schema-validate").click()
        fields = [p.get_attribute("data-field") for p in driver.find_elements(*by_testid("schema-problem"))]
        assert problem_field in fields, fields

    # editing the JSON redraws the columns
    edited = dict(declared, budget={"epsilon": 1.5, "delta": 1e-6})
    text.clear()
    text.send_keys(json.dumps(edited))
    wait(driver, lambda _: visible(driver, "builder-epsilon").get_attribute("value") == "1.5", "the builder lagged")

    # a first upload: the same content the owner already has (the fixture's datasets) is a 409 naming the field
    visible(driver, "upload-file").send_keys(_upload_file(tmp_path, small_csv()))
    _type(visible(driver, "upload-name"), "uploaded from the dashboard")
    visible(driver, "upload-submit").click()
    title = visible(driver, "upload-error-title")
    direct = httpx.post(f"{live.base}/v1/datasets", headers=bearer(live.owner), files={"file": ("s.csv", small_csv())},
                        data={"schema": json.dumps(edited)}, timeout=30)  # fmt: skip
    assert direct.status_code == 409, direct.text
    assert title.text == f"{direct.json()['title']} (HTTP 409)"
    assert visible(driver, "upload-error-detail").text == direct.json()["detail"]
    assert [f.text for f in driver.find_elements(*by_testid("upload-error-field"))] == ["allow_duplicate"]

    # a level missing from the schema: the API's 422 names the column and the line of the first bad cell
    _type(visible(driver, "builder-feature-levels"), "red, green")
    visible(driver, "upload-allow-duplicate").click()
    visible(driver, "upload-submit").click()
    wait(driver, lambda _: "422" in visible(driver, "upload-error-title").text, "no 422 shown")
    narrowed = json.loads(visible(driver, "upload-schema").get_attribute("value"))
    direct = httpx.post(f"{live.base}/v1/datasets", headers=bearer(live.owner), files={"file": ("s.csv", small_csv())},
                        data={"schema": json.dumps(narrowed), "allow_duplicate": "true"}, timeout=30)  # fmt: skip
    assert direct.status_code == 422, direct.text
    problem = direct.json()
    assert problem["column"] == "color"
    assert visible(driver, "upload-error-detail").text == problem["detail"]
    fields = [f.text for f in driver.find_elements(*by_testid("upload-error-field"))]
    assert fields == [f"column color, line {problem['line']}"]
    screenshot(driver, "13-upload-api-problem.png", full_page=True)

    # fixed: the upload succeeds and links to the new dataset
    _type(visible(driver, "builder-feature-levels"), "red, green, blue")
    visible(driver, "upload-submit").click()
    ok = visible(driver, "upload-ok")
    dataset_id = ok.get_attribute("data-dataset-id")
    dataset = live.get(f"/v1/datasets/{dataset_id}")
    assert dataset["name"] == "uploaded from the dashboard" and dataset["n"] == 4000
    assert dataset["feature_names"] == ["x1", "x2", "color=red", "color=green", "color=blue"]
    assert live.get(f"/v1/datasets/{dataset_id}/budget")["epsilon_max"] == 1.5
    screenshot(driver, "14-upload-ok.png", full_page=True)
    visible(driver, "upload-dataset-link").click()
    assert visible(driver, "dataset-title").text == "uploaded from the dashboard"


def _variant(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    schema = json.loads(json.dumps(SMALL_SCHEMA))
    change(schema)
    return schema


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change that sets ``schema[a][b]…`` (dotted path, list indices as numbers)."""

    def change(schema: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = schema
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[int(last) if isinstance(node, list) else last] = value

    return change


def _impute(fills: bool) -> Callable[[dict[str, Any]], None]:
    def change(schema: dict[str, Any]) -> None:
        schema["missing"] = "impute"
        if fills:
            schema["features"][0]["fill"] = 0
            schema["features"][1]["fill"] = 0

    return change


#: Schemas around SMALL_SCHEMA (whose CSV every upload below sends): the browser's check must refuse exactly those
#: the API refuses, and name the field the API's problem names.
SCHEMA_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str | None]] = {
    "valid": (lambda s: None, None),
    "valid-impute-with-fills": (_impute(True), None),
    "valid-transform": (
        _set("features.0.transform", {"clip": [-0.5, 0.5], "standardize": {"mean": 0, "std": 0.3}}),
        None,
    ),
    "valid-approximate-delta-0": (_set("budget.approximate_delta", 0), None),
    "bounds": (_set("features.0.lower", 2), "schema.features.0.lower"),
    "unknown-key": (_set("extra", 1), "schema.extra"),
    "delta-1": (_set("budget.delta", 1), "schema.budget.delta"),
    "epsilon-0": (_set("budget.epsilon", 0), "schema.budget.epsilon"),
    "same-classes": (_set("label.negative", "yes"), "schema.label"),
    "duplicate-levels": (_set("features.2.levels", ["red", "red", "green", "blue"]), "schema.features.2.levels"),
    "feature-named-like-label": (_set("features.1.name", "y"), "schema.features.1.name"),
    "impute-without-fill": (_impute(False), "schema.features.0.fill"),
    "fill-under-reject": (_set("features.0.fill", 0), "schema.features.0.fill"),
    "only-ignored": (_set("features", [{"name": "x1", "type": "ignore"}]), "schema.features"),
    "two-level-categorical-label": (
        _set("label", {"name": "y", "type": "categorical", "levels": ["yes", "no"]}),
        "schema.label.levels",
    ),
    "validation-fraction": (_set("validation_fraction", 0.7), "schema.validation_fraction"),
    "valid-preprocessing-share": (_set("preprocessing", {"share": 0.2}), None),
    "valid-preprocessing-default": (lambda s: s.pop("preprocessing"), None),
    "preprocessing-share-too-big": (_set("preprocessing", {"share": 0.6}), "schema.preprocessing.share"),
    "preprocessing-unknown-key": (_set("preprocessing", {"fraction": 0.1}), "schema.preprocessing.fraction"),
    "preprocessing-word": (_set("preprocessing", "auto"), "schema.preprocessing"),
    "header-false-without-columns": (_set("csv", {"header": False}), "schema.csv.columns"),
    "name-with-space": (_set("features.0.name", "x1 "), "schema.features.0.name"),
    "log-on-negative-range": (_set("features.0.transform", {"log": True}), "schema.features.0.transform.log"),
    "clip-outside-bounds": (_set("features.0.transform", {"clip": [-2, 0]}), "schema.features.0.transform.clip"),
    "approximate-delta-too-big": (_set("budget.approximate_delta", 1e-5), "schema.budget.approximate_delta"),
    "level-is-a-missing-marker": (
        _set("features.2.levels", ["red", "green", "blue", "NA"]),
        "schema.features.2.levels",
    ),
    "missing-budget": (lambda s: s.pop("budget"), "schema.budget"),
    "wrong-type": (_set("features.1.type", "float"), "schema.features.1.type"),
}


def test_the_browser_schema_check_agrees_with_the_api(live: Live, driver: WebDriver):
    """schema.js mirrors the API's schema rules: on each case it finds a problem iff the upload of that schema with
    SMALL_SCHEMA's CSV is refused (422), and its first problem names the field the API's error points at."""
    login(driver, live.base, live.owner)
    schemas = {name: _variant(change) for name, (change, _) in SCHEMA_CASES.items()}
    checked = driver.execute_async_script(
        """
        const [schemas, done] = arguments;
        import("/ui/static/schema.js").then((m) => done(Object.fromEntries(
            Object.entries(schemas).map(([name, schema]) => [name, m.validateSchema(schema)]))),
            (error) => done({error: String(error)}));
        """,
        schemas,
    )
    assert "error" not in checked, checked
    for name, (_, field) in SCHEMA_CASES.items():
        answer = httpx.post(f"{live.base}/v1/datasets", headers=bearer(live.owner), timeout=30,
                            files={"file": ("s.csv", small_csv())},
                            data={"schema": json.dumps(schemas[name]), "allow_duplicate": "true"})  # fmt: skip
        problems = checked[name]
        if field is None:
            assert answer.status_code == 201, (name, answer.text)
            assert problems == [], (name, problems)
        else:
            assert answer.status_code == 422, (name, answer.status_code, answer.text)
            assert problems and problems[0]["field"] == field, (name, problems, answer.json()["detail"])
            api_fields = [".".join(str(p) for p in e["loc"]) for e in answer.json().get("errors", [])]
            api_text = " ".join([answer.json()["detail"], *api_fields])
            leaf = field.removeprefix("schema.").split(".")[-1]
            assert leaf in api_text, (name, field, api_text)  # the API's error points at the same field


# --- grants, deletion, roles -----------------------------------------------------------------------------------


def test_owner_grants_then_revokes_an_analyst_and_deletes_a_dataset(live: Live, driver: WebDriver):
    dataset_id = register(live.base, live.owner, 2.0, "shared on request")
    assert live.get("/v1/datasets", live.stranger) == []

    # the analyst finds its key id on its (empty) datasets page, to give to the owner
    login(driver, live.base, live.stranger)
    assert live.stranger_key_id in visible(driver, "analyst-key-id").text
    assert not driver.find_element(*by_testid("nav-upload")).is_displayed()
    _logout(driver)

    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/datasets/{dataset_id}")
    panel = visible(driver, "manage-panel")
    visible(panel, "grants-empty")
    # a key that is not an analyst's: the API's 422 names api_key_id
    owner_id = live.get("/v1/me")["key_id"]
    _type(visible(panel, "grant-key-id"), owner_id)
    visible(panel, "grant-submit").click()
    wait(driver, lambda _: visible(panel, "grant-error-field").text == "api_key_id", "the 422 did not name the field")
    _type(visible(panel, "grant-key-id"), live.stranger_key_id)
    visible(panel, "grant-submit").click()
    row = visible(panel, "grant-row")
    assert row.get_attribute("data-key-id") == live.stranger_key_id
    grants = live.get(f"/v1/datasets/{dataset_id}/grants")
    assert [g["api_key_id"] for g in grants] == [live.stranger_key_id]
    screenshot(driver, "15-grant.png", full_page=True)
    _logout(driver)

    # the analyst now sees the dataset, and no owner control on it
    login(driver, live.base, live.stranger)
    visible(driver, f"dataset-card-{dataset_id}").click()
    visible(driver, "estimate-form")
    assert not driver.find_elements(*by_testid("manage-panel"))
    assert not driver.find_elements(*by_testid("dataset-delete"))
    _logout(driver)

    # revoke (asked twice): the grant is gone, and so is the analyst's access
    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/datasets/{dataset_id}")
    panel = visible(driver, "manage-panel")
    visible(panel, "grant-revoke").click()
    assert "Revoke key" in visible(panel, "grant-revoke-question").text
    assert live.get(f"/v1/datasets/{dataset_id}/grants") != []  # nothing happens before the confirmation
    visible(panel, "grant-revoke-confirm").click()
    visible(panel, "grants-empty")
    assert live.get(f"/v1/datasets/{dataset_id}/grants") == []
    _logout(driver)
    login(driver, live.base, live.stranger)
    visible(driver, "datasets-empty")
    assert httpx.get(f"{live.base}/v1/datasets/{dataset_id}", headers=bearer(live.stranger)).status_code == 404
    _logout(driver)

    # delete (asked twice; "Keep" backs out)
    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/datasets/{dataset_id}")
    visible(driver, "dataset-delete").click()
    visible(driver, "dataset-delete-keep").click()
    visible(driver, "dataset-delete").click()
    screenshot(driver, "16-delete-confirm.png", full_page=True)
    live.get(f"/v1/datasets/{dataset_id}")  # still there
    visible(driver, "dataset-delete-confirm").click()
    wait(driver, lambda d: d.execute_script("return location.hash") == "#/datasets", "not back on the list")
    visible(driver, "dataset-list")
    assert dataset_id not in _displayed_cards(driver)
    assert httpx.get(f"{live.base}/v1/datasets/{dataset_id}", headers=bearer(live.owner)).status_code == 404


def test_admin_creates_and_revokes_keys_but_gets_no_upload(live: Live, driver: WebDriver):
    login(driver, live.base, live.admin)
    assert not driver.find_element(*by_testid("nav-upload")).is_displayed()
    visible(driver, "nav-keys").click()
    rows = wait(driver, lambda d: d.find_elements(*by_testid("key-row")), "no keys listed")
    keys = live.get("/v1/keys", live.admin)
    assert [r.get_attribute("data-key-id") for r in rows] == [k["key_id"] for k in keys]
    me = live.get("/v1/me", live.admin)
    mine = driver.find_element(By.CSS_SELECTOR, f'[data-key-id="{me["key_id"]}"]')
    assert not mine.find_elements(*by_testid("key-revoke"))  # a key cannot revoke itself

    Select(visible(driver, "key-role")).select_by_value("analyst")
    _type(visible(driver, "key-name"), "carol")
    visible(driver, "key-create").click()
    secret = visible(driver, "key-secret").text
    key_id = visible(driver, "key-created-id").text
    assert httpx.get(f"{live.base}/v1/me", headers=bearer(secret)).json() == {
        "key_id": key_id, "role": "analyst", "name": "carol"
    }  # fmt: skip
    screenshot(driver, "17-keys.png", full_page=True)
    row = visible(driver, "keys-table").find_element(By.CSS_SELECTOR, f'[data-key-id="{key_id}"]')
    row.find_element(*by_testid("key-revoke")).click()
    visible(driver, "key-revoke-confirm").click()
    wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, f'[data-key-id="{key_id}"]').get_attribute("data-revoked")
         == "true", "the key was not shown revoked")  # fmt: skip
    assert httpx.get(f"{live.base}/v1/me", headers=bearer(secret)).status_code == 401

    # an admin may manage any dataset's grants (the API's rule), but uploads are for owners
    driver.get(f"{live.base}/ui#/datasets/{live.dataset_id}")
    visible(driver, "grant-row")
    driver.get(f"{live.base}/ui#/upload")
    assert "HTTP 403" in visible(driver, "view-error-title").text


# --- fixes -----------------------------------------------------------------------------------------------------


def test_an_analyst_sees_only_its_own_ledger_entries_and_no_running_totals(live: Live, driver: WebDriver):
    """Issue 37: an analyst's ledger view is its own fits' entries (and the preprocessing's), without entry numbers
    or the remaining ε after each — those cells show "—" and the burn-down gives way to a note; the owner still sees
    every fit, linked, and the burn-down."""
    created = httpx.post(f"{live.base}/v1/fits", headers=bearer(live.analyst), timeout=30, json={
        "dataset_id": live.dataset_id, "solver": "output_perturbation", "model": "logistic",
        "privacy": {"epsilon": 0.2},
    })  # fmt: skip
    assert created.status_code == 202, created.text
    own = created.json()["id"]
    assert wait_fit(live.base, live.analyst, own)["status"] == "succeeded"
    ledger = live.get(f"/v1/datasets/{live.dataset_id}/ledger?limit=1000", live.analyst)
    assert ledger["view"] == "own" and own in {e["job_id"] for e in ledger["entries"]}
    assert live.warmup_fit_id not in {e["job_id"] for e in ledger["entries"]}  # the owner's fit is not the analyst's

    login(driver, live.base, live.analyst)
    driver.get(f"{live.base}/ui#/datasets/{live.dataset_id}")
    visible(driver, "ledger-table")
    assert own.split("-")[0] in {a.text for a in driver.find_elements(*by_testid("ledger-fit-link"))}
    assert not driver.find_elements(*by_testid("ledger-fit-id"))
    assert not driver.find_elements(By.CSS_SELECTOR, f'a[href="#/fits/{live.warmup_fit_id}"]')
    assert {cell.text for cell in driver.find_elements(*by_testid("ledger-id"))} == {"—"}
    assert {cell.text for cell in driver.find_elements(*by_testid("ledger-remaining"))} == {"—"}
    assert "of your ledger entries" in visible(driver, "ledger-note").text
    visible(driver, "burndown-own-view")
    assert not driver.find_elements(*by_testid("burndown-chart"))
    _logout(driver)

    login(driver, live.base, live.owner)  # the owner may open every fit of its dataset: all links
    driver.get(f"{live.base}/ui#/datasets/{live.dataset_id}")
    visible(driver, "burndown-chart")
    links = {a.text for a in driver.find_elements(*by_testid("ledger-fit-link"))}
    assert {own.split("-")[0], live.warmup_fit_id.split("-")[0]} <= links
    assert not driver.find_elements(*by_testid("ledger-fit-id"))
    assert "—" not in {cell.text for cell in driver.find_elements(*by_testid("ledger-id"))}


def _coefficient_order(driver: WebDriver) -> list[str]:
    return [r.get_attribute("data-feature") for r in driver.find_elements(*by_testid("coefficient-row"))]


def _wait_download(folder: Path, timeout: float = WAIT) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [p for p in folder.glob("*.csv") if p.stat().st_size > 0]
        if done:
            return done[0]
        time.sleep(0.1)
    raise AssertionError(f"nothing downloaded into {folder}: {list(folder.iterdir())}")


def test_coefficients_sort_by_column_and_download_as_csv_and_settings_show_once(
    live: Live, driver: WebDriver, tmp_path: Path
):
    fit: dict[str, Any] = live.get(f"/v1/fits/{live.warmup_fit_id}?include=metadata")  # the whole release metadata
    names, values = fit["result"]["feature_names"], fit["result"]["coefficients"]
    login(driver, live.base, live.owner)
    driver.get(f"{live.base}/ui#/fits/{live.warmup_fit_id}")
    table = visible(driver, "coefficients-table")
    assert _coefficient_order(driver) == names

    def sort_by(label: str) -> None:
        table.find_element(By.CSS_SELECTOR, f'[data-testid="sort-column"][data-column="{label}"]').click()

    by_value = [n for _, n in sorted(zip(values, names, strict=True))]
    sort_by("Coefficient")
    assert _coefficient_order(driver) == by_value
    sort_by("Coefficient")
    assert _coefficient_order(driver) == by_value[::-1]
    sort_by("Coefficient")
    assert _coefficient_order(driver) == names  # a third click restores the API's order
    sort_by("|Coefficient|")
    assert _coefficient_order(driver) == [n for _, n in sorted(zip(map(abs, values), names, strict=True))]
    sort_by("Feature")
    assert _coefficient_order(driver) == sorted(names)
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert rows[-1].get_attribute("data-testid") == "coefficient-intercept"  # the intercept stays last

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    visible(driver, "coefficients-csv").click()
    path = _wait_download(downloads)
    assert path.name == f"fit-{live.warmup_fit_id.split('-')[0]}-coefficients.csv"
    records = list(csv.reader(io.StringIO(path.read_text())))
    assert records[0] == ["feature", "coefficient"]
    assert [r[0] for r in records[1:]] == [*names, "(intercept)"]
    assert [float(r[1]) for r in records[1:]] == [*values, fit["result"]["intercept"]]  # exact, not as displayed

    # "Release metadata" lists only what "Resolved settings" does not already say
    visible(driver, "release-metadata").find_element(By.TAG_NAME, "summary").click()
    visible(driver, "fit-settings").find_element(By.TAG_NAME, "summary").click()
    settings = {r.get_attribute("data-key"): r for r in visible(driver, "settings-table").find_elements(
        *by_testid("setting-row"))}  # fmt: skip
    metadata_rows = driver.find_elements(
        By.CSS_SELECTOR, '[data-testid="release-metadata-table"] [data-testid="setting-row"]'
    )
    for row in metadata_rows:
        key = row.get_attribute("data-key")
        assert key not in settings or settings[key].text != row.text, key
    metadata = fit["result"]["metadata"]
    repeated = sum(1 for k, v in metadata.items() if k in fit["settings"] and v == fit["settings"][k])
    assert repeated > 0 and len(metadata_rows) == len(metadata) - repeated
    assert f"{repeated} more values are the same" in visible(driver, "release-metadata-note").text
    screenshot(driver, "18-coefficients-sorted.png", full_page=True)


def test_datasets_list_searches_by_name_and_sorts(live: Live, driver: WebDriver):
    login(driver, live.base, live.owner)
    visible(driver, "dataset-list")
    datasets = live.get("/v1/datasets")
    budgets = {d["id"]: live.get(f"/v1/datasets/{d['id']}/budget")["remaining_epsilon"] for d in datasets}
    wait(driver, lambda d: len(d.find_elements(*by_testid("gauge-remaining"))) == len(datasets), "budgets not loaded")
    newest_first = [d["id"] for d in sorted(datasets, key=lambda d: d["created_at"], reverse=True)]
    assert _displayed_cards(driver) == newest_first

    _type(visible(driver, "datasets-search"), "SMALL")  # case-insensitive, by name
    wait(driver, lambda d: _displayed_cards(d) == [live.small_dataset_id], "the search did not filter")
    assert visible(driver, "datasets-count").text == f"1 of {len(datasets)} datasets match “SMALL”"
    _type(visible(driver, "datasets-search"), "no such name")
    visible(driver, "datasets-no-match")
    _type(visible(driver, "datasets-search"), "")
    wait(driver, lambda d: len(_displayed_cards(d)) == len(datasets), "clearing the search did not restore the list")

    select = Select(visible(driver, "datasets-sort"))
    select.select_by_value("name-asc")
    assert _displayed_cards(driver) == [d["id"] for d in sorted(datasets, key=lambda d: d["name"].lower())]
    select.select_by_value("remaining-asc")
    assert [budgets[i] for i in _displayed_cards(driver)] == sorted(budgets.values())
    select.select_by_value("n-desc")
    assert [d["n"] for d in datasets if d["id"] in _displayed_cards(driver)] == [d["n"] for d in datasets]
    screenshot(driver, "19-datasets-search.png")


# --- narrow layout ---------------------------------------------------------------------------------------------

OVERFLOW_SCRIPT = """
const width = document.documentElement.clientWidth;
const scrolls = (node) => {
  for (let p = node.parentElement; p && p !== document.body; p = p.parentElement) {
    const overflow = getComputedStyle(p).overflowX;
    if (overflow === "auto" || overflow === "scroll" || overflow === "hidden" || overflow === "clip") return p;
  }
  return null;
};
const name = (node) => node.tagName.toLowerCase() + (node.dataset.testid ? `[${node.dataset.testid}]` : "")
  + (node.className && typeof node.className === "string" ? `.${node.className.split(" ").join(".")}` : "");
const sticking = [];
for (const node of document.body.querySelectorAll("*")) {
  const box = node.getBoundingClientRect();
  if (box.width === 0 && box.height === 0) continue;
  if ((box.right > width + 0.5 || box.left < -0.5) && !scrolls(node)) {
    sticking.push(`${name(node)} ${box.left}..${box.right}`);
  }
}
const tables = [...document.querySelectorAll("table")].filter((t) => t.getBoundingClientRect().width > 0);
return {
  width, innerWidth: window.innerWidth,
  pageScroll: document.documentElement.scrollWidth, bodyScroll: document.body.scrollWidth,
  sticking: sticking.slice(0, 20),
  tables: tables.length,
  tablesOutsideScroll: tables.filter((t) => !scrolls(t) && t.scrollWidth > t.parentElement.clientWidth + 0.5)
    .map(name),
};
"""


def _assert_fits(driver: WebDriver, page: str) -> int:
    """Nothing on the page is wider than the 420 px viewport except inside a scroll container; the number of
    tables checked."""
    report = driver.execute_script(OVERFLOW_SCRIPT)
    assert report["innerWidth"] == NARROW, report
    assert report["pageScroll"] <= report["width"] and report["bodyScroll"] <= report["width"], (page, report)
    assert not report["sticking"], (page, report)
    assert not report["tablesOutsideScroll"], (page, report)
    return int(report["tables"])


def _narrow(driver: WebDriver, height: int = 900) -> None:
    """Emulate a viewport NARROW px wide (Chromium's own window has a minimum width)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": NARROW, "height": height, "deviceScaleFactor": 1, "mobile": False,
    })  # fmt: skip


def _narrow_screenshot(driver: WebDriver, name: str) -> None:
    """The whole page at NARROW px: the emulated viewport grows to the page's height for the picture."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    _narrow(driver, min(max(height, 900), 6000))
    try:
        screenshot(driver, name)
    finally:
        _narrow(driver)


def test_narrow_layout_at_420_px_cuts_nothing_off(live: Live, driver: WebDriver):
    _narrow(driver)
    login(driver, live.base, live.owner)
    visible(driver, "dataset-list")
    wait(driver, lambda d: d.find_elements(*by_testid("gauge-remaining")), "no gauge")
    assert visible(driver, "nav-upload").is_displayed() and visible(driver, "logout").is_displayed()
    _assert_fits(driver, "datasets")
    _narrow_screenshot(driver, "20-narrow-datasets.png")

    driver.get(f"{live.base}/ui#/datasets/{live.dataset_id}")
    visible(driver, "ledger-table")
    visible(driver, "grants-table")
    tables = _assert_fits(driver, "dataset")
    assert tables >= 3  # fits, ledger, grants
    _narrow_screenshot(driver, "21-narrow-dataset.png")

    driver.get(f"{live.base}/ui#/fits/{live.warmup_fit_id}")
    visible(driver, "coefficients-table")
    visible(driver, "fit-settings").find_element(By.TAG_NAME, "summary").click()
    visible(driver, "settings-table")
    _assert_fits(driver, "fit")
    _narrow_screenshot(driver, "22-narrow-fit.png")

    visible(driver, "nav-upload").click()
    visible(driver, "schema-builder")
    _assert_fits(driver, "upload")
    _narrow_screenshot(driver, "23-narrow-upload.png")
    _logout(driver)

    login(driver, live.base, live.admin)
    visible(driver, "nav-keys").click()
    visible(driver, "keys-table")
    _assert_fits(driver, "keys")
    _narrow_screenshot(driver, "24-narrow-keys.png")

"""User-level privacy through the API (issue 37, item 3), on SQLite and PostgreSQL: an upload that names a privacy
unit is bounded to max_rows per unit, its public size is the number of units, the owner alone learns how many rows
were dropped; dp_gd and dp_sgd fit it (the ledger charges their usual curves with n = U), every other solver and
`auto` answer 422 naming the ones that can; bad declarations and rows without a unit are 422s naming the field."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from api_helpers import Keys, fit_and_wait, make_client, make_keys
from fastapi.testclient import TestClient

from privfit.client import Client
from privfit.client.cli import Output, _dataset_fields
from privfit.db import Dataset
from privfit.solvers.registry import list_solvers

UNITS, MAX_ROWS = 1500, 3
SCHEMA = {
    "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
    "features": [
        {"name": "x1", "type": "numeric", "lower": -1, "upper": 1},
        {"name": "x2", "type": "numeric", "lower": -1, "upper": 1},
    ],
    "budget": {"epsilon": 4.0, "delta": 1e-6},
    "preprocessing": "none",
    "privacy_unit": {"column": "customer", "max_rows": MAX_ROWS},
}


def rows_per_customer(seed: int = 0) -> list[tuple[float, float, str, str]]:
    """Customers with 1 to 6 rows each (a public synthetic table): y = sign(2·x1 − x2 + noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    for customer in range(UNITS):
        for _ in range(int(rng.integers(1, 7))):
            x1, x2 = rng.uniform(-1, 1, size=2)
            label = "yes" if 2 * x1 - x2 + 0.3 * rng.standard_normal() > 0 else "no"
            rows.append((x1, x2, label, f"c{customer:05d}"))
    return rows


ROWS = rows_per_customer()
EXPECTED_DROPPED = sum(max(0, count - MAX_ROWS) for count in np.unique([r[3] for r in ROWS], return_counts=True)[1])


def csv_bytes(rows=ROWS) -> bytes:
    return ("x1,x2,y,customer\n" + "".join(f"{a:.4f},{b:.4f},{y},{c}\n" for a, b, y, c in rows)).encode()


def post(client: TestClient, keys: Keys, body: bytes, schema=SCHEMA, kind: str = "text/csv", name: str = "t.csv"):
    return client.post("/v1/datasets", headers=keys.owner, files={"file": (name, body, kind)},
                       data={"schema": json.dumps(schema), "allow_duplicate": "true"})  # fmt: skip


@pytest.fixture
def app(database_url: str, tmp_path) -> tuple[TestClient, Keys]:
    with make_client(database_url, tmp_path, store="database") as client:
        yield client, make_keys(client)


def test_an_upload_is_bounded_per_unit_and_its_public_size_is_the_number_of_units(app):
    client, keys = app
    created = post(client, keys, csv_bytes())
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["n"] == UNITS
    assert body["privacy_unit"] == {"column": "customer", "max_rows": MAX_ROWS, "units": UNITS,
                                    "rows_dropped": int(EXPECTED_DROPPED)}  # fmt: skip
    assert "customer" not in body["feature_names"] and body["d"] == 2
    dataset = body["id"]
    client.post(f"/v1/datasets/{dataset}/grants", headers=keys.owner, json={"api_key_id": keys.analyst_id})
    for headers in (keys.owner, keys.analyst):  # rows_dropped is in the upload's answer only
        shown = client.get(f"/v1/datasets/{dataset}", headers=headers).json()
        assert shown["n"] == UNITS and shown["privacy_unit"] == {"column": "customer", "max_rows": MAX_ROWS,
                                                                   "units": UNITS, "rows_dropped": None}  # fmt: skip

    # The stored matrix holds at most MAX_ROWS rows per unit, with its unit index (database store: any worker reads it)
    with client.app.state.db.read() as session:
        stored = client.app.state.store.read(session.get_one(Dataset, dataset).storage_key)
    assert np.bincount(stored.units).max() <= MAX_ROWS and stored.units.max() + 1 == UNITS
    assert stored.X.shape[0] == len(ROWS) - EXPECTED_DROPPED


def test_dp_gd_and_dp_sgd_fit_it_and_are_charged_their_curves_with_n_the_number_of_units(app):
    client, keys = app
    dataset = post(client, keys, csv_bytes()).json()["id"]
    client.post(f"/v1/datasets/{dataset}/grants", headers=keys.owner, json={"api_key_id": keys.analyst_id})
    row_level = {k: v for k, v in SCHEMA.items() if k != "privacy_unit"}
    one_per_unit = {}  # a row-level dataset of U rows: the same public inputs, hence the same charged curve
    for row in ROWS:
        one_per_unit.setdefault(row[3], row)
    twin_csv = ("x1,x2,y\n" + "".join(f"{a:.4f},{b:.4f},{y}\n" for a, b, y, _ in one_per_unit.values())).encode()
    twin = post(client, keys, twin_csv, schema=row_level).json()
    assert twin["n"] == UNITS
    client.post(f"/v1/datasets/{twin['id']}/grants", headers=keys.owner, json={"api_key_id": keys.analyst_id})
    for solver in ("dp_gd", "dp_sgd"):
        request = {"model": "logistic", "solver": solver, "privacy": {"epsilon": 1.0}}
        cost, done = fit_and_wait(client, keys, {**request, "dataset_id": dataset})
        twin_cost = client.post("/v1/fits/estimate?include=rdp", headers=keys.analyst,
                                json={**request, "dataset_id": twin["id"]}).json()["cost"]  # fmt: skip
        assert cost["rdp"] == twin_cost["rdp"] and cost["epsilon"] <= 1.0
        theta = np.array(done["result"]["coefficients"])
        assert theta[0] > 0 > theta[1], done["result"]  # the public signal: y ≈ sign(2·x1 − x2)
        predicted = client.post(f"/v1/fits/{done['id']}/predict", headers=keys.analyst,
                                json={"rows": [{"x1": 0.9, "x2": -0.9}, {"x1": -0.9, "x2": 0.9}]})  # fmt: skip
        assert predicted.json()["predictions"] == ["yes", "no"], predicted.text


def test_other_solvers_and_auto_answer_422_naming_the_ones_that_can(app):
    client, keys = app
    dataset = post(client, keys, csv_bytes()).json()["id"]
    client.post(f"/v1/datasets/{dataset}/grants", headers=keys.owner, json={"api_key_id": keys.analyst_id})
    others = {s.name: "logistic" if "logistic" in s.models else s.models[0] for s in list_solvers()}
    for solver, model in {**others, "auto": "logistic"}.items():
        if solver in ("dp_gd", "dp_sgd"):
            continue
        for path in ("/v1/fits/estimate", "/v1/fits"):
            refused = client.post(path, headers=keys.analyst, json={
                "dataset_id": dataset, "model": model, "solver": solver, "privacy": {"epsilon": 1.0}})  # fmt: skip
            assert refused.status_code == 422, (solver, refused.text)
            problem = refused.json()
            assert problem["parameter"] == "solver", problem
            if "is not available on this server" in problem["detail"]:
                continue  # resque_localized is experimental and off by default: refused before its data is looked at
            assert "privacy unit" in problem["detail"] and "dp_gd, dp_sgd" in problem["detail"], problem
    assert client.get(f"/v1/datasets/{dataset}/ledger", headers=keys.owner).json()["total"] == 0


def test_a_parquet_upload_with_integer_unit_ids_is_the_same_dataset(app):
    client, keys = app
    table = pa.table({"x1": [r[0] for r in ROWS], "x2": [r[1] for r in ROWS], "y": [r[2] for r in ROWS],
                      "customer": [int(r[3][1:]) for r in ROWS]})  # fmt: skip
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    created = post(client, keys, buffer.getvalue(), kind="application/vnd.apache.parquet", name="t.parquet")
    assert created.status_code == 201, created.text
    assert created.json()["n"] == UNITS and created.json()["privacy_unit"]["rows_dropped"] == EXPECTED_DROPPED


@pytest.mark.parametrize(
    ("schema_change", "field_part"),
    [
        ({"privacy_unit": {"column": "x1", "max_rows": 3}}, "privacy_unit"),
        ({"privacy_unit": {"column": "customer", "max_rows": 0}}, "max_rows"),
        ({"validation_fraction": 0.2}, "validation_fraction"),
    ],
)
def test_bad_declarations_are_422s_naming_the_field_and_store_nothing(app, schema_change, field_part):
    client, keys = app
    refused = post(client, keys, csv_bytes(), schema={**SCHEMA, **schema_change})
    assert refused.status_code == 422 and field_part in refused.text, refused.text
    assert client.get("/v1/datasets", headers=keys.owner).json() == []
    assert client.app.state.store.stored_keys() == []


def test_a_row_without_its_unit_is_a_422_naming_the_column_and_line(app):
    client, keys = app
    rows = list(ROWS[:10])
    rows[4] = (*rows[4][:3], "NA")
    refused = post(client, keys, csv_bytes(rows))
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert problem["column"] == "customer" and problem["line"] == 6, problem
    assert client.app.state.store.stored_keys() == []


def test_the_client_and_the_cli_show_the_privacy_unit(app, capsys):
    client, keys = app
    with Client("http://testserver", keys.owner["Authorization"].removeprefix("Bearer "),
                transport=client._transport) as owner:  # fmt: skip
        uploaded = owner.upload_dataset(csv_bytes(), SCHEMA, name="visits", allow_duplicate=True)
        assert uploaded.n == UNITS and uploaded.privacy_unit["rows_dropped"] == EXPECTED_DROPPED
        shown = owner.dataset(uploaded.id)
    assert shown.privacy_unit == {"column": "customer", "max_rows": MAX_ROWS, "units": UNITS, "rows_dropped": None}
    _dataset_fields(Output(as_json=False, quiet=False), uploaded)
    printed = capsys.readouterr().out
    cells = {tuple(part.strip() for part in line.strip("│ ").split("│")) for line in printed.splitlines()}
    assert ("privacy units (n)", str(UNITS)) in cells and "rows (n)" not in printed
    assert f"customer, at most {MAX_ROWS} rows each ({EXPECTED_DROPPED} rows dropped at upload)" in printed

"""Bad input: every case is a 4xx problem+json with a clear message, nothing is stored, and there is no 500."""

from __future__ import annotations

import json

import pytest
from api_helpers import SMALL_SCHEMA, small_csv, upload

from privfit.datasets.store import LocalDatasetStore
from privfit.db import Dataset, Job, LedgerEntry
from privfit.db.models import DatasetUpload

GOOD_CSV = small_csv(50)


def schema_with(**changes) -> str:
    declared = json.loads(json.dumps(SMALL_SCHEMA))
    declared.update(changes)
    return json.dumps(declared)


UPLOADS = {
    "malformed csv": (b'x1,x2,color,y\n0.1,"0.2,red,yes\n', json.dumps(SMALL_SCHEMA), 422, "line"),
    "wrong column count": (b"x1,x2,color,y\n0.1,0.2,red\n", json.dumps(SMALL_SCHEMA), 422, "line 2"),
    "unknown category": (b"x1,x2,color,y\n0.1,0.2,purple,yes\n", json.dumps(SMALL_SCHEMA), 422, "color"),
    "label not a declared class": (b"x1,x2,color,y\n0.1,0.2,red,maybe\n", json.dumps(SMALL_SCHEMA), 422, "y"),
    "nan": (b"x1,x2,color,y\nnan,0.2,red,yes\n", json.dumps(SMALL_SCHEMA), 422, "x1"),
    "inf": (b"x1,x2,color,y\n0.1,inf,red,yes\n", json.dumps(SMALL_SCHEMA), 422, "x2"),
    "missing value": (b"x1,x2,color,y\n,0.2,red,yes\n", json.dumps(SMALL_SCHEMA), 422, "x1"),
    "schema not json": (GOOD_CSV, "{not json", 422, "JSON"),
    "schema bad bounds": (
        GOOD_CSV,
        schema_with(features=[{"name": "x1", "type": "numeric", "lower": 1, "upper": 0}]),
        422,
        "features",
    ),
    "negative budget": (GOOD_CSV, schema_with(budget={"epsilon": -1, "delta": 1e-6}), 422, "epsilon"),
    "delta out of range": (GOOD_CSV, schema_with(budget={"epsilon": 1, "delta": 2}), 422, "delta"),
    "empty file": (b"", json.dumps(SMALL_SCHEMA), 422, ""),
    "not utf-8": (b"x1,x2,color,y\n\xff\xfe,0.2,red,yes\n", json.dumps(SMALL_SCHEMA), 422, ""),
}


def assert_nothing_stored(client) -> None:
    with client.app.state.db.read() as session:
        assert session.query(Dataset).count() == 0
        assert session.query(Job).count() == 0
        assert session.query(LedgerEntry).count() == 0
        assert session.query(DatasetUpload).count() == 0  # no pending upload left behind either
    # nothing but the store's identity marker (written with the first matrix, it holds no data)
    assert [p.name for p in client.app.state.store.root.glob("*") if p.name != LocalDatasetStore.MARKER] == []


def assert_problem(response, status: int, needle: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"]
    assert needle in json.dumps(body)


@pytest.mark.parametrize("case", sorted(UPLOADS))
def test_bad_upload_is_a_clear_4xx_and_stores_nothing(client, keys, case):
    content, schema, status, needle = UPLOADS[case]
    response = client.post("/v1/datasets", headers=keys.owner, files={"file": ("d.csv", content)},
                           data={"schema": schema})  # fmt: skip
    assert_problem(response, status, needle)
    assert "purple" not in response.text and "maybe" not in response.text  # no private cell value is quoted
    assert_nothing_stored(client)


def test_oversize_body_is_413_before_parsing(client, keys):
    limit = client.app.state.settings.max_upload_bytes
    response = client.post("/v1/datasets", headers=keys.owner, files={"file": ("d.csv", b"x" * (limit + 10))},
                           data={"schema": json.dumps(SMALL_SCHEMA)})  # fmt: skip
    assert_problem(response, 413, "limit")
    assert_nothing_stored(client)


def test_missing_multipart_fields_are_422(client, keys):
    assert_problem(client.post("/v1/datasets", headers=keys.owner, data={"schema": "{}"}), 422, "file")


@pytest.mark.parametrize(
    ("change", "status", "needle"),
    [
        ({"solver": "no_such_solver"}, 422, "dp_gd"),
        ({"model": "poisson"}, 422, "model"),
        ({"privacy": {"epsilon": -1}}, 422, "epsilon"),
        ({"privacy": {"epsilon": 0}}, 422, "epsilon"),
        ({"params": {"steps": 0}}, 422, "steps"),
        ({"params": {"unknown": 1}}, 422, "unknown"),
        ({"privacy": {}}, 422, "noise"),
        ({"dataset_id": "nope"}, 422, "dataset_id"),  # not an id at all: a 422 naming the field
        ({"dataset_id": "nope\u0000"}, 422, "dataset_id"),  # NUL never reaches PostgreSQL
        ({"dataset_id": "00000000-0000-4000-8000-000000000000"}, 404, "dataset_not_found"),
        ({"extra": True}, 422, "extra"),
        ({"privacy": {"epsilon": 0.2, "delta": 1e-3}}, 422, "not chosen per request"),  # issue 24: say why
    ],
)
def test_bad_fit_requests_are_clear_4xx_and_write_nothing(client, keys, change, status, needle):
    dataset_id = upload(client, keys)
    request = {"dataset_id": dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}, **change}
    response = client.post("/v1/fits", headers=keys.analyst, json=request)
    assert_problem(response, status, needle)
    with client.app.state.db.read() as session:
        assert session.query(Job).count() == 0 and session.query(LedgerEntry).count() == 0


def test_predict_rejects_bad_rows_and_unfinished_fits(idle_client, idle_keys):
    dataset_id = upload(idle_client, idle_keys)
    fit = idle_client.post("/v1/fits", headers=idle_keys.analyst,
                           json={"dataset_id": dataset_id, "privacy": {"epsilon": 0.5}}).json()  # fmt: skip
    response = idle_client.post(f"/v1/fits/{fit['id']}/predict", headers=idle_keys.analyst,
                                json={"rows": [{"x1": 0, "x2": 0, "color": "red"}]})  # fmt: skip
    assert_problem(response, 409, "queued")
    assert_problem(idle_client.post(f"/v1/fits/{fit['id']}/predict", headers=idle_keys.analyst, json={"rows": []}),
                   422, "rows")  # fmt: skip


def test_upload_that_fails_after_storing_the_matrix_leaves_no_orphan_file(client, keys, monkeypatch):
    """A database failure after the encoded matrix reached the store must not leave the file behind."""
    from privfit.api.routers import datasets as datasets_router

    def broken_budget(*_args, **_kwargs):
        raise RuntimeError("database unavailable")

    monkeypatch.setattr(datasets_router, "create_budget", broken_budget)
    with pytest.raises(RuntimeError, match="database unavailable"):
        client.post("/v1/datasets", headers=keys.owner, files={"file": ("d.csv", GOOD_CSV)},
                    data={"schema": json.dumps(SMALL_SCHEMA)})  # fmt: skip
    assert_nothing_stored(client)


def test_an_empty_schema_field_is_a_422_that_says_what_to_send(client, keys):
    """An empty form field is what FastAPI calls missing ("Field required"): the answer names ``schema`` and says
    what it must hold."""
    response = client.post("/v1/datasets", headers=keys.owner, files={"file": ("d.csv", GOOD_CSV)},
                           data={"schema": ""})  # fmt: skip
    assert_problem(response, 422, "schema")
    (error,) = response.json()["errors"]
    assert error["loc"] == ["body", "schema"]
    assert "missing or empty" in error["msg"] and "public schema as JSON" in error["msg"]
    assert_nothing_stored(client)


@pytest.mark.parametrize("name", ["a\x00b", "tab\there", "\x1b[2J", "\x9b"])
def test_a_dataset_name_with_control_characters_is_a_422_naming_it(client, keys, name):
    response = client.post("/v1/datasets", headers=keys.owner, files={"file": ("d.csv", GOOD_CSV)},
                           data={"schema": json.dumps(SMALL_SCHEMA), "name": name})  # fmt: skip
    assert_problem(response, 422, "control characters")
    assert response.json()["errors"][0]["loc"] == ["body", "name"]
    assert_nothing_stored(client)


@pytest.mark.parametrize(("rows", "delta", "refused"), [(50, 0.02, True), (50, 0.5, True), (50, 0.019, False)])
def test_a_budget_delta_not_below_1_over_n_is_a_422_citing_the_guidance(client, keys, rows, delta, refused):
    """Issue 24: δ_max = 0.5 was accepted. δ ≥ 1/n (n = 50: 1/n = 0.02) is refused naming schema.budget.delta
    and the usual guidance; nothing is stored. Just below 1/n is accepted."""
    declared = json.loads(json.dumps(SMALL_SCHEMA))
    declared["budget"] = {"epsilon": 1.0, "delta": delta}
    response = client.post("/v1/datasets", headers=keys.owner, files={"file": ("d.csv", small_csv(rows))},
                           data={"schema": json.dumps(declared)})  # fmt: skip
    if not refused:
        assert response.status_code == 201, response.text
        return
    assert_problem(response, 422, "schema.budget.delta")
    detail = response.json()["detail"]
    assert f"for this dataset's n = {rows} rows" in detail and "well below 1/n" in detail
    with client.app.state.db.read() as session:
        assert session.query(Dataset).count() == 0


CLIPPING_CSV = (
    "x1,x2,color,y\n5,0.2,red,yes\n-3,0.1,blue,no\n0.5,1,green,yes\n1,-1.5,red,no\n"
    + "".join(f"{i / 100:.2f},0,red,yes\n" for i in range(60))
).encode()


@pytest.mark.parametrize("path", ["columnar", "exact", "parquet"])
def test_the_owners_upload_answer_counts_clipped_cells_per_column(client, keys, path):
    """Issue 24: values beyond a numeric column's bounds were clipped silently. The upload's answer (to its owner)
    counts them per column; GET never shows the counts (analysts must not see a function of the rows)."""
    if path == "parquet":
        import io

        import pyarrow as pa
        import pyarrow.csv as pa_csv
        import pyarrow.parquet as pq

        table = pa_csv.read_csv(io.BytesIO(CLIPPING_CSV))
        buffer = io.BytesIO()
        pq.write_table(table.cast(pa.schema([(c, pa.float64() if c in ("x1", "x2") else pa.string())
                                             for c in table.column_names])), buffer)  # fmt: skip
        files = {"file": ("d.parquet", buffer.getvalue(), "application/vnd.apache.parquet")}
    else:  # a quoted cell sends the file down the exact, cell-by-cell path
        content = CLIPPING_CSV if path == "columnar" else CLIPPING_CSV.replace(b"5,0.2,red", b'5,0.2,"red"')
        files = {"file": ("d.csv", content)}
    response = client.post("/v1/datasets", headers=keys.owner, files=files, data={"schema": json.dumps(SMALL_SCHEMA)})
    assert response.status_code == 201, response.text
    assert response.json()["clipped_cells"] == {"x1": 2, "x2": 1}
    dataset_id = response.json()["id"]
    for headers in (keys.owner, keys.admin):
        assert client.get(f"/v1/datasets/{dataset_id}", headers=headers).json()["clipped_cells"] is None


def test_a_schema_is_checked_without_uploading(client, keys):
    """Issue 24: the dashboard's schema editor validates against the API — POST /v1/datasets/schema-check answers
    what the schema encodes to, or the upload's own 422 naming the field; nothing is stored."""
    good = client.post("/v1/datasets/schema-check", headers=keys.owner, content=json.dumps(SMALL_SCHEMA))
    assert good.status_code == 200, good.text
    answer = good.json()
    assert answer["valid"] is True and answer["d"] == 5 and answer["label_bound"] == 1.0
    assert answer["feature_names"] == ["x1", "x2", "color=red", "color=green", "color=blue"]
    assert answer["row_norm_bound"] == pytest.approx(3**0.5) and answer["row_norm_bound"] >= 3**0.5
    bad = json.loads(json.dumps(SMALL_SCHEMA))
    bad["features"][0]["lower"] = 2
    assert_problem(client.post("/v1/datasets/schema-check", headers=keys.owner, content=json.dumps(bad)), 422,
                   "features.0")  # fmt: skip
    assert_problem(client.post("/v1/datasets/schema-check", headers=keys.owner, content="[" * 100_000), 422, "schema")
    assert client.post("/v1/datasets/schema-check", headers=keys.analyst, content="{}").status_code == 403
    with client.app.state.db.read() as session:
        assert session.query(Dataset).count() == 0

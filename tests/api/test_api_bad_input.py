"""Bad input: every case is a 4xx problem+json with a clear message, nothing is stored, and there is no 500."""

from __future__ import annotations

import json

import pytest
from api_helpers import SMALL_SCHEMA, small_csv, upload, wait_for

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


# --------------------------------------------------------------------------------------------------
# text rules (issue 35): hidden characters in names, NFC levels, the Idempotency-Key
# --------------------------------------------------------------------------------------------------

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "report\u202efdp.exe" displays as "reportexe.pdf"


@pytest.mark.parametrize("key", ["", " ", "\t", "x" * 201, "caf\u00e9".encode()])  # UTF-8 bytes: read as Latin-1
def test_an_empty_or_malformed_idempotency_key_is_a_422_naming_the_header(idle_client, idle_keys, key):
    """Issue 35: an empty Idempotency-Key was used as a key (every client sending it shared one). Empty, blank (HTTP
    strips it to empty), over 200 characters or not printable ASCII: a 422 naming the header; nothing is written."""
    dataset_id = upload(idle_client, idle_keys)
    headers = {**idle_keys.analyst, "Idempotency-Key": key}
    request = {"dataset_id": dataset_id, "privacy": {"epsilon": 0.5}}
    for response in (
        idle_client.post("/v1/fits", headers=headers, json=request),
        idle_client.post("/v1/fits/00000000-0000-4000-8000-000000000000/evaluate", headers=headers,
                         json={"privacy": {"epsilon": 0.5}}),
    ):  # fmt: skip
        assert_problem(response, 422, "idempotency-key")
        (error,) = response.json()["errors"]
        assert error["loc"] == ["header", "idempotency-key"]
        assert any(word in error["msg"] for word in ("empty", "at most 200", "printable ASCII")), error
    with idle_client.app.state.db.read() as session:
        assert session.query(Job).count() == 0 and session.query(LedgerEntry).count() == 0
    accepted = idle_client.post("/v1/fits", headers={**idle_keys.analyst, "Idempotency-Key": "fit 1"}, json=request)
    assert accepted.status_code == 202, accepted.text


def test_names_with_a_bidirectional_control_are_a_422_naming_field_and_character(client, keys):
    """Issue 35: names with U+202E were stored as is. A dataset name, an API key name and a schema's column name
    are each refused with a 422 naming the field and the character; nothing is stored."""
    named = client.post("/v1/datasets", headers=keys.owner, files={"file": ("d.csv", GOOD_CSV)},
                        data={"schema": json.dumps(SMALL_SCHEMA), "name": f"report{RLO}fdp.exe"})  # fmt: skip
    declared = json.loads(json.dumps(SMALL_SCHEMA))
    declared["features"][2]["name"] = f"co{RLO}lor"
    column = client.post("/v1/datasets", headers=keys.owner, files={"file": ("d.csv", GOOD_CSV)},
                         data={"schema": json.dumps(declared)})  # fmt: skip
    key = client.post("/v1/keys", headers=keys.admin, json={"role": "analyst", "name": f"bob{RLO}"})
    for response, loc in (
        (named, ["body", "name"]),
        (column, ["features", "2", "categorical", "name"]),
        (key, ["body", "name"]),
    ):
        assert_problem(response, 422, "U+202E RIGHT-TO-LEFT OVERRIDE")
        assert response.json()["errors"][0]["loc"] == loc
        assert RLO not in response.text  # named, not echoed
    assert_nothing_stored(client)


def test_a_dataset_name_is_stored_in_nfc_and_a_file_name_default_drops_hidden_characters(client, keys):
    named = client.post("/v1/datasets", headers=keys.owner, files={"file": ("d.csv", GOOD_CSV)},
                        data={"schema": json.dumps(SMALL_SCHEMA), "name": "cafe\u0301"})  # fmt: skip
    assert named.status_code == 201, named.text
    assert named.json()["name"] == "caf\u00e9"
    assert client.get(f"/v1/datasets/{named.json()['id']}", headers=keys.owner).json()["name"] == "caf\u00e9"
    default = client.post("/v1/datasets", headers=keys.owner, data={"schema": json.dumps(SMALL_SCHEMA),
                          "allow_duplicate": "true"}, files={"file": (f"the\u200b{RLO}vsc.csv", GOOD_CSV)})  # fmt: skip
    assert default.status_code == 201, default.text
    assert default.json()["name"] == "thevsc.csv"


def test_predictions_match_nfd_levels_and_column_names_to_the_nfc_declaration(client, keys):
    """Issue 35: a prediction row with "e\\u0301" (NFD) predicts like one with "é" (NFC), in cells and in column
    names — through the API and through the Python client — and a schema stored before the text rules still
    predicts (it is read back as it was stored)."""
    from privfit.client import Client
    from privfit.db import Dataset

    e_nfc, e_nfd = "\u00e9", "e\u0301"
    declared = json.loads(json.dumps(SMALL_SCHEMA))
    declared["features"][2] = {"name": f"c{e_nfd}t{e_nfd}", "type": "categorical",
                               "levels": ["red", f"verd{e_nfd}", "blue"]}  # fmt: skip
    csv = GOOD_CSV.replace(b"color", f"c{e_nfc}t{e_nfc}".encode()).replace(b"green", f"verd{e_nfc}".encode())
    dataset_id = upload(client, keys, csv=csv, schema=declared)
    fit = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, "privacy": {"epsilon": 0.5}})
    assert fit.status_code == 202, fit.text
    fit_id = fit.json()["id"]
    assert wait_for(client, fit_id, keys.analyst)["status"] == "succeeded"

    def scores(name: str, level: str) -> list[float]:
        rows = [{"x1": 0.3, "x2": -0.2, name: level}, {"x1": -0.5, "x2": 0.1, name: "red"}]
        response = client.post(f"/v1/fits/{fit_id}/predict", headers=keys.analyst, json={"rows": rows})
        assert response.status_code == 200, response.text
        return response.json()["scores"]

    nfc_scores = scores(f"c{e_nfc}t{e_nfc}", f"verd{e_nfc}")
    assert scores(f"c{e_nfd}t{e_nfd}", f"verd{e_nfd}") == nfc_scores
    assert nfc_scores != scores(f"c{e_nfc}t{e_nfc}", "blue")  # the level matters: it was matched, not dropped
    with Client("http://testserver", keys.analyst["Authorization"].removeprefix("Bearer "), retries=0,
                transport=client._transport) as analyst:  # fmt: skip
        rows = [{"x1": 0.3, "x2": -0.2, f"c{e_nfd}t{e_nfd}": f"verd{e_nfd}"}, {"x1": -0.5, "x2": 0.1,
                f"c{e_nfd}t{e_nfd}": "red"}]  # fmt: skip
        assert analyst.predict(fit_id, rows).scores == nfc_scores

    with client.app.state.db.write() as session:  # as stored before the rules: an NFD level, a hidden character
        dataset = session.get(Dataset, dataset_id)
        legacy = json.loads(json.dumps(dataset.schema_json))
        legacy["features"][2]["levels"] = ["red", f"verd{e_nfd}", f"bl{RLO}ue"]
        dataset.schema_json = legacy
    assert scores(f"c{e_nfc}t{e_nfc}", f"verd{e_nfc}") == nfc_scores

"""Validation splits and private evaluation over HTTP, on SQLite and PostgreSQL (issue #22 §2).

* an upload declaring ``validation_fraction`` f stores two matrices: fits see n − ⌊f·n⌋ rows (``n``), evaluations
  the ⌊f·n⌋ others (``n_validation``); deleting the dataset purges both;
* ``POST /v1/fits/{id}/evaluate`` is admitted by the ledger like a fit (reservation and charge of the evaluation,
  or a 409 that charges nothing), releases the noisy metrics with intervals, and is idempotent under a key;
* evaluations are listed to whoever may see the fit; misuse is a 4xx naming the field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from api_helpers import NUMERIC_LABEL_SCHEMA, SMALL_SCHEMA, Keys, fit_and_wait, small_csv, upload
from fastapi.testclient import TestClient

from privfit.db import Budget
from privfit.ledger import committed_cost_from_entries
from privfit.privacy import curve_from_json

SPLIT_SCHEMA = {**SMALL_SCHEMA, "validation_fraction": 0.25}
FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}


def split_dataset(client: TestClient, keys: Keys, epsilon: float = 5.0, schema: dict | None = None,
                  csv: bytes | None = None) -> str:  # fmt: skip
    return upload(client, keys, schema=schema or SPLIT_SCHEMA, csv=csv, epsilon=epsilon)


def fitted(client: TestClient, keys: Keys, dataset_id: str, request: dict | None = None) -> str:
    return fit_and_wait(client, keys, {"dataset_id": dataset_id, **(request or FIT)})[1]["id"]


def ledger(client: TestClient, dataset_id: str, keys: Keys) -> list[dict]:
    response = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner)
    assert response.status_code == 200, response.text
    return response.json()["entries"]


def test_a_split_upload_shows_public_sizes_and_deleting_purges_both_matrices(
    client: TestClient, keys: Keys, tmp_path: Path
):
    dataset_id = split_dataset(client, keys)
    body = client.get(f"/v1/datasets/{dataset_id}", headers=keys.analyst).json()
    assert (body["n"], body["n_validation"], body["validation_fraction"]) == (3000, 1000, 0.25)
    assert body["schema"]["validation_fraction"] == 0.25
    plain = client.get(f"/v1/datasets/{upload(client, keys)}", headers=keys.owner).json()
    assert (plain["n"], plain["n_validation"], plain["validation_fraction"]) == (4000, 0, None)
    assert len(list((tmp_path / "store").glob("*.npz"))) == 3
    fitted(client, keys, dataset_id)  # fits read the training matrix
    assert client.delete(f"/v1/datasets/{dataset_id}", headers=keys.owner).status_code == 204
    assert len(list((tmp_path / "store").glob("*.npz"))) == 1  # only the plain dataset's matrix is left


def test_a_second_split_upload_of_the_same_content_is_a_duplicate(client: TestClient, keys: Keys):
    """The split is random, so the stored matrices differ between two uploads; the content hash (of all the rows)
    does not, and the duplicate is refused like any other."""
    first = upload(client, keys, schema=SPLIT_SCHEMA, allow_duplicate=False)
    again = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("d.csv", small_csv(), "text/csv")},
        data={"schema": json.dumps(SPLIT_SCHEMA)},
    )  # fmt: skip
    assert again.status_code == 409 and again.json()["existing_dataset_id"] == first
    content = client.get(f"/v1/datasets/{first}", headers=keys.owner).json()["content_hash"]
    plain = client.get(f"/v1/datasets/{upload(client, keys)}", headers=keys.owner).json()["content_hash"]
    assert content != plain  # the declared fraction is part of the schema, hence of the content hash


@pytest.mark.parametrize(("fraction", "rows"), [(0.6, 4000), (0.0, 4000), (0.25, 3)])
def test_an_invalid_validation_fraction_is_a_422_naming_the_field(
    client: TestClient, keys: Keys, fraction: float, rows: int
):
    response = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("d.csv", small_csv(n=rows), "text/csv")},
        data={"schema": json.dumps({**SMALL_SCHEMA, "validation_fraction": fraction})},
    )  # fmt: skip
    assert response.status_code == 422, response.text
    assert "validation_fraction" in response.text


def test_evaluate_charges_the_ledger_before_reading_and_releases_metrics(client: TestClient, keys: Keys):
    dataset_id = split_dataset(client, keys)
    fit_id = fitted(client, keys, dataset_id)
    before = client.get(f"/v1/datasets/{dataset_id}/budget?include=rdp", headers=keys.owner).json()
    response = client.post(f"/v1/fits/{fit_id}/evaluate?include=rdp", headers=keys.analyst,
                           json={"privacy": {"epsilon": 1.0}})  # fmt: skip
    assert response.status_code == 201, response.text
    evaluation = response.json()
    assert evaluation["status"] == "succeeded" and evaluation["n_validation"] == 1000
    assert evaluation["metrics"] == ["accuracy", "roc_auc", "log_loss"]
    assert evaluation["cost"]["pure_epsilon"] == pytest.approx(1.0)
    results = {r["metric"]: r for r in evaluation["results"]}
    assert results["accuracy"]["epsilon"] == pytest.approx(0.7) and results["accuracy"]["noise"] == "laplace"
    assert results["accuracy"]["scale"] == pytest.approx(1 / 0.7)
    assert results["accuracy"]["value"] > 0.8  # the synthetic task is easy; noise sd 0.002 at n_val = 1000
    for r in results.values():
        assert r["interval"][0] <= r["value"] <= r["interval"][1] and r["confidence"] == 0.95
    entries = ledger(client, dataset_id, keys)
    assert [(e["kind"], e["job_id"], e["evaluation_id"]) for e in entries[-2:]] == [
        ("reservation", None, evaluation["id"]), ("charge", None, evaluation["id"])
    ]  # fmt: skip
    after = client.get(f"/v1/datasets/{dataset_id}/budget?include=rdp", headers=keys.owner).json()
    added = curve_from_json(after["committed_rdp"]) - curve_from_json(before["committed_rdp"])
    assert list(added) == pytest.approx(list(curve_from_json(evaluation["cost"]["rdp"])), rel=1e-9, abs=1e-15)
    assert after["charged_epsilon"] > before["charged_epsilon"] and after["reserved_epsilon"] == 0.0
    db = client.app.state.db
    with db.read() as session:  # the budget's cache agrees with the entries (evaluations included)
        budget = session.get_one(Budget, dataset_id)
        recomputed = committed_cost_from_entries(session, budget)
        assert list(recomputed.rdp) == pytest.approx(list(curve_from_json(budget.committed_rdp)))
    listed = client.get(f"/v1/fits/{fit_id}/evaluations", headers=keys.owner)
    assert listed.status_code == 200 and [e["id"] for e in listed.json()] == [evaluation["id"]]
    assert client.get(f"/v1/fits/{fit_id}/evaluations", headers=keys.admin).status_code == 200
    assert client.get(f"/v1/fits/{fit_id}/evaluations", headers=keys.stranger_analyst).status_code == 404
    stranger = client.post(f"/v1/fits/{fit_id}/evaluate", headers=keys.stranger_analyst,
                           json={"privacy": {"epsilon": 1.0}})  # fmt: skip
    assert stranger.status_code == 404


def test_evaluate_is_idempotent_under_a_key_and_refused_over_budget(client: TestClient, keys: Keys):
    dataset_id = split_dataset(client, keys, epsilon=2.0)
    fit_id = fitted(client, keys, dataset_id)
    request = {"privacy": {"epsilon": 0.5}, "metrics": ["accuracy"]}
    headers = {**keys.analyst, "Idempotency-Key": "eval-1"}
    first = client.post(f"/v1/fits/{fit_id}/evaluate", headers=headers, json=request)
    again = client.post(f"/v1/fits/{fit_id}/evaluate", headers=headers, json=request)
    assert first.status_code == again.status_code == 201 and first.json() == again.json()
    other = client.post(f"/v1/fits/{fit_id}/evaluate", headers=headers, json={**request, "confidence": 0.9})
    assert other.status_code == 409 and "Idempotency-Key" in other.text
    count = len(ledger(client, dataset_id, keys))
    refused = client.post(f"/v1/fits/{fit_id}/evaluate", headers=keys.analyst, json={"privacy": {"epsilon": 5.0}})
    assert refused.status_code == 409, refused.text
    assert refused.json()["title"] == "Privacy budget exceeded"
    assert len(ledger(client, dataset_id, keys)) == count  # nothing charged
    assert len(client.get(f"/v1/fits/{fit_id}/evaluations", headers=keys.analyst).json()) == 1


def test_evaluate_refuses_what_cannot_be_evaluated(client: TestClient, keys: Keys):
    plain_fit = fitted(client, keys, upload(client, keys))
    no_rows = client.post(f"/v1/fits/{plain_fit}/evaluate", headers=keys.analyst, json={"privacy": {"epsilon": 1}})
    assert no_rows.status_code == 409 and "validation_fraction" in no_rows.text
    dataset_id = split_dataset(client, keys)
    svm = fitted(client, keys, dataset_id, {"model": "svm", "solver": "dp_gd", "privacy": {"epsilon": 0.5}})
    for body, field in [
        ({"privacy": {"epsilon": 1}, "metrics": ["rmse"]}, "metrics"),
        ({"privacy": {"epsilon": 1}, "metrics": ["log_loss"]}, "metrics"),
        ({"privacy": {"epsilon": 0}}, "epsilon"),
        ({"privacy": {"epsilon": 1}, "confidence": 1.0}, "confidence"),
        ({"privacy": {"epsilon": 1}, "extra": 1}, "extra"),
    ]:
        response = client.post(f"/v1/fits/{svm}/evaluate", headers=keys.analyst, json=body)
        assert response.status_code == 422 and field in response.text, response.text
    svm_default = client.post(f"/v1/fits/{svm}/evaluate", headers=keys.analyst, json={"privacy": {"epsilon": 1}})
    assert svm_default.status_code == 201 and svm_default.json()["metrics"] == ["accuracy", "roc_auc"]


def test_a_queued_fit_cannot_be_evaluated(idle_client: TestClient, idle_keys: Keys):
    dataset_id = upload(idle_client, idle_keys, schema=SPLIT_SCHEMA, epsilon=5.0)
    queued = idle_client.post("/v1/fits", headers=idle_keys.analyst, json={"dataset_id": dataset_id, **FIT}).json()
    response = idle_client.post(f"/v1/fits/{queued['id']}/evaluate", headers=idle_keys.analyst,
                                json={"privacy": {"epsilon": 1}})  # fmt: skip
    assert response.status_code == 409 and "succeeded fit" in response.text


def test_a_regression_fit_gets_rmse_and_mae_in_the_labels_units(client: TestClient, keys: Keys):
    schema = {**NUMERIC_LABEL_SCHEMA, "validation_fraction": 0.25}
    dataset_id = split_dataset(client, keys, schema=schema, csv=small_csv(label="numeric"))
    fit_id = fitted(client, keys, dataset_id, {"model": "linear", "solver": "dp_gd", "privacy": {"epsilon": 1.0}})
    response = client.post(f"/v1/fits/{fit_id}/evaluate", headers=keys.analyst, json={"privacy": {"epsilon": 2}})
    assert response.status_code == 201, response.text
    results = {r["metric"]: r for r in response.json()["results"]}
    assert set(results) == {"rmse", "mae"}
    # label range [−4, 4]: scale 4 per encoded unit; sums of |e| ≤ 2 and e² ≤ 4 per row at ε = 1 each
    assert results["mae"]["scale"] == pytest.approx(2.0) and results["rmse"]["scale"] == pytest.approx(4.0)
    assert 0.0 <= results["mae"]["value"] <= 8.0 and results["mae"]["value"] <= results["rmse"]["value"] + 0.5


def test_a_failure_after_the_charge_is_a_failed_evaluation_that_keeps_the_charge(
    client: TestClient, keys: Keys, monkeypatch
):
    """Whatever breaks once rows may have been read: no 500, no half-written result, no value quoted, no refund."""
    import privfit.api.routers.evaluations as evaluations_module

    def broken_release(*args, **kwargs):
        raise FloatingPointError("secret row value 0.1234")

    dataset_id = split_dataset(client, keys)
    fit_id = fitted(client, keys, dataset_id)
    monkeypatch.setattr(evaluations_module, "release", broken_release)
    response = client.post(f"/v1/fits/{fit_id}/evaluate", headers=keys.analyst, json={"privacy": {"epsilon": 1.0}})
    assert response.status_code == 201, response.text
    evaluation = response.json()
    assert evaluation["status"] == "failed" and "results" not in evaluation
    assert evaluation["error"]["type"] == "internal_error" and "0.1234" not in response.text
    assert [e["kind"] for e in ledger(client, dataset_id, keys)][-2:] == ["reservation", "charge"]


def test_an_evaluation_estimate_shows_the_cost_and_the_filter_and_charges_nothing(client: TestClient, keys: Keys):
    dataset_id = split_dataset(client, keys, epsilon=2.0)
    fit_id = fitted(client, keys, dataset_id)
    before = ledger(client, dataset_id, keys)
    request = {"privacy": {"epsilon": 0.5}, "metrics": ["accuracy", "log_loss"]}
    response = client.post(f"/v1/fits/{fit_id}/evaluate/estimate?include=rdp", headers=keys.analyst, json=request)
    assert response.status_code == 200, response.text
    estimate = response.json()
    assert estimate["admissible"] and estimate["n_validation"] == 1000 and estimate["epsilon_max"] == 2.0
    shares = {m["metric"]: m for m in estimate["metrics"]}
    assert shares["accuracy"]["epsilon"] == pytest.approx(0.5 * 0.7 / 0.8)
    assert shares["accuracy"]["scale"] == pytest.approx(0.8 / (0.5 * 0.7)) and shares["accuracy"]["noise"] == "laplace"
    assert estimate["cost"]["pure_epsilon"] == pytest.approx(0.5)
    assert estimate["committed_epsilon_after"] > estimate["committed_epsilon_before"]
    assert ledger(client, dataset_id, keys) == before  # nothing written
    charged = client.post(f"/v1/fits/{fit_id}/evaluate?include=rdp", headers=keys.analyst, json=request).json()
    assert charged["cost"]["rdp"] == estimate["cost"]["rdp"]  # the estimate is the charge
    too_much = client.post(f"/v1/fits/{fit_id}/evaluate/estimate", headers=keys.analyst,
                           json={"privacy": {"epsilon": 50.0}})  # fmt: skip
    assert too_much.status_code == 200 and too_much.json()["admissible"] is False
    assert too_much.json()["refusal_reason"] is not None
    stranger = client.post(f"/v1/fits/{fit_id}/evaluate/estimate", headers=keys.stranger_analyst, json=request)
    assert stranger.status_code == 404


def test_an_evaluation_left_running_by_a_dead_process_is_failed_by_the_sweep_with_its_charge_kept(
    client: TestClient, keys: Keys
):
    """A process that dies between the charge and the result leaves the evaluation running; the API's periodic sweep
    fails it an hour later (an evaluation takes seconds), keeps the charge, and leaves recent ones alone."""
    from datetime import timedelta

    from privfit.db import Evaluation
    from privfit.db.models import utcnow
    from privfit.jobs.states import ABANDONED_EVALUATION_SECONDS, fail_abandoned_evaluations

    dataset_id = split_dataset(client, keys)
    fit_id = fitted(client, keys, dataset_id)
    ids = [client.post(f"/v1/fits/{fit_id}/evaluate", headers=keys.analyst,
                       json={"privacy": {"epsilon": 0.2}}).json()["id"] for _ in range(2)]  # fmt: skip
    db = client.app.state.db
    with db.write() as session:  # as a dead process would have left them: charged, no result
        for evaluation_id, age in zip(ids, (ABANDONED_EVALUATION_SECONDS + 60, 60), strict=True):
            row = session.get_one(Evaluation, evaluation_id)
            row.status, row.result, row.finished_at = "running", None, None
            row.created_at = utcnow() - timedelta(seconds=age)
    before = ledger(client, dataset_id, keys)
    assert fail_abandoned_evaluations(db) == [ids[0]]
    listed = {e["id"]: e for e in client.get(f"/v1/fits/{fit_id}/evaluations", headers=keys.owner).json()}
    assert listed[ids[0]]["status"] == "failed" and listed[ids[0]]["error"]["type"] == "server_stopped"
    assert listed[ids[1]]["status"] == "running"
    assert ledger(client, dataset_id, keys) == before  # the charges stay
    assert fail_abandoned_evaluations(db) == []

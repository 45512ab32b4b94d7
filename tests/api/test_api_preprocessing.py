"""Private preprocessing at upload through the API (issue 34): on by default, charged as its own ledger entry,
its statistics public to owners and granted analysts, the derived encoding used by fits and /predict, opt-out and
share, duplicates, and what does not depend on the rows (privfit.datasets.preprocessing)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from api_helpers import fit_and_wait, upload

from privfit.datasets import DatasetSchema, encode_rows

WIDE_SCHEMA: dict[str, Any] = {  # what an owner without DP knowledge declares: codebook-wide bounds, no transforms
    "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
    "features": [
        {"name": "income", "type": "numeric", "lower": 0, "upper": 10_000_000},
        {"name": "age", "type": "numeric", "lower": 0, "upper": 120},
        {"name": "score", "type": "numeric", "lower": -1, "upper": 1, "transform": {"clip": [-0.5, 0.5]}},
        {"name": "color", "type": "categorical", "levels": ["red", "green", "blue"]},
    ],
    "missing": "reject",
    "budget": {"epsilon": 2.0, "delta": 1e-6},
}
EPSILON_MAX = 2.0


def wide_csv(n: int = 4000, seed: int = 0) -> bytes:
    """Log-normal incomes (median ≈ 22,000), ages ≈ N(45, 12), a uniform score; y depends on log(income) and age."""
    rng = np.random.default_rng(seed)
    income = np.exp(rng.normal(10.0, 1.0, n))
    age = np.clip(rng.normal(45.0, 12.0, n), 18, 90)
    score = rng.uniform(-1, 1, n)
    colors = rng.choice(["red", "green", "blue"], size=n)
    logit = 1.5 * (np.log(income) - 10.0) + 0.05 * (age - 45.0) + 0.5 * score
    y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    lines = ["income,age,score,color,y"] + [
        f"{a:.2f},{b:.1f},{c:.4f},{d},{e}" for a, b, c, d, e in zip(income, age, score, colors, y, strict=True)
    ]
    return ("\n".join(lines) + "\n").encode()


def _upload(client, keys, schema: dict[str, Any] | None = None, **options: Any) -> str:
    return upload(client, keys, csv=options.pop("csv", None) or wide_csv(), schema=schema or WIDE_SCHEMA,
                  epsilon=EPSILON_MAX, **options)  # fmt: skip


def _with(**changes: Any) -> dict[str, Any]:
    schema = json.loads(json.dumps(WIDE_SCHEMA))
    schema.update(changes)
    return schema


def test_upload_runs_private_preprocessing_by_default(client, keys, monkeypatch):
    # Seeded noise (a fresh PCG64DXSM stream per draw site, as the OS-seeded one would be): the release's rules are
    # what this test checks, and with OS-seeded noise its decisions failed once in the suite's runs (age modelled
    # log1p) while 1,400 seeded and OS-seeded uploads of the same rows, on both databases, held every assertion.
    streams = (np.random.Generator(np.random.PCG64DXSM(seed)) for seed in range(1_000_000))
    monkeypatch.setattr("privfit.api.routers.datasets.secure_generator", lambda: next(streams))
    dataset_id = _upload(client, keys)
    dataset = client.get(f"/v1/datasets/{dataset_id}", headers=keys.owner).json()
    pre = dataset["preprocessing"]
    declared_bounds = {f["name"]: (f["lower"], f["upper"]) for f in WIDE_SCHEMA["features"] if f["type"] == "numeric"}
    assert pre["share"] == 0.05 and pre["bins"] == 32 and "discrete Gaussian" in pre["mechanism"]
    # committed ε = ε_max × the share the filter measures: the release was calibrated to at most 5 %
    assert 0.049 * EPSILON_MAX <= pre["committed_epsilon"] <= 0.05 * EPSILON_MAX * (1 + 1e-9)
    assert pre["epsilon"] > pre["committed_epsilon"]  # its own (ε, δ) statement is larger (sublinear composition)
    assert [c["name"] for c in pre["columns"]] == ["income", "age"]  # "score" declares a transform: kept
    for column in pre["columns"]:
        assert column["role"] == "feature" and len(column["noisy_counts"]) == 32
        lower, upper = declared_bounds[column["name"]]
        assert column["grid"] == {"scale": "symlog", "lower": lower, "upper": upper, "bins": 32}
        assert all(isinstance(count, int) for count in column["noisy_counts"])
    # Only what no single noise-only bin can change is asserted (the seed above is one draw of the noise, not a
    # tuned one): such a bin survives the 3.5σ threshold with probability < 2.4e-4 and may stretch a range to a
    # declared bound, but the bulk (incomes ≈ 22,000 · e^{±2.3}, ages 18–90 around 45) stays inside.
    income, age = (c["derived"] for c in pre["columns"])
    assert income["log"] is True and income["clip"][0] <= 10_000 and 100_000 <= income["clip"][1] <= 10_000_000
    assert age["log"] is False and 0 <= age["clip"][0] <= 32 and 60 <= age["clip"][1] <= 120
    features = {f["name"]: f for f in dataset["schema"]["features"]}
    assert features["income"]["transform"]["clip"] == income["clip"] and features["income"]["transform"]["log"]
    assert features["score"]["transform"] == {"clip": [-0.5, 0.5], "log": False, "standardize": None}

    budget = client.get(f"/v1/datasets/{dataset_id}/budget", headers=keys.owner).json()
    assert budget["committed_epsilon"] == pytest.approx(pre["committed_epsilon"], rel=1e-12)
    assert budget["charged_epsilon"] == pytest.approx(pre["committed_epsilon"], rel=1e-12)
    ledger = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()
    assert [(e["kind"], e["preprocessing_dataset_id"], e["job_id"]) for e in ledger["entries"]] == [
        ("reservation", dataset_id, None), ("charge", dataset_id, None)
    ]  # fmt: skip
    assert ledger["entries"][1]["epsilon"] == pytest.approx(pre["epsilon"], rel=1e-12)


def test_granted_analysts_see_the_statistics_strangers_do_not(client, keys):
    dataset_id = _upload(client, keys)
    owner_view = client.get(f"/v1/datasets/{dataset_id}", headers=keys.owner).json()
    analyst_view = client.get(f"/v1/datasets/{dataset_id}", headers=keys.analyst).json()
    assert analyst_view["preprocessing"] == owner_view["preprocessing"]
    assert analyst_view["schema"] == owner_view["schema"]
    assert client.get(f"/v1/datasets/{dataset_id}", headers=keys.stranger_analyst).status_code == 404


def test_fits_and_predictions_use_the_derived_encoding(client, keys):
    dataset_id = _upload(client, keys)
    schema = DatasetSchema.model_validate(client.get(f"/v1/datasets/{dataset_id}", headers=keys.owner).json()["schema"])
    request = {"dataset_id": dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 1.0}}
    _, fit = fit_and_wait(client, keys, request)
    rows = [{"income": 150_000.0, "age": 61.0, "score": 0.3, "color": "red"},
            {"income": 900.0, "age": 23.0, "score": -0.9, "color": "blue"},
            {"income": 9_999_999.0, "age": 119.0, "score": 1.0, "color": "green"}]  # fmt: skip
    answer = client.post(f"/v1/fits/{fit['id']}/predict", headers=keys.analyst, json={"rows": rows})
    assert answer.status_code == 200, answer.text
    X = encode_rows(rows, schema).X
    result = fit["result"]
    expected = X @ np.asarray(result["coefficients"]) + result["intercept"]
    assert np.allclose(answer.json()["scores"], expected, rtol=0, atol=1e-9)
    assert X[0, 0] > X[1, 0] and X[2, 0] == pytest.approx(1.0)  # log1p of the clipped income, scaled to [−1, 1]
    assert answer.json()["scores"][0] > answer.json()["scores"][1]  # the model uses the signal of log(income)


def test_opting_out_and_choosing_the_share(client, keys):
    none = _upload(client, keys, _with(preprocessing="none"))
    assert client.get(f"/v1/datasets/{none}", headers=keys.owner).json()["preprocessing"] is None
    assert client.get(f"/v1/datasets/{none}/budget", headers=keys.owner).json()["committed_epsilon"] == 0.0
    assert client.get(f"/v1/datasets/{none}/ledger", headers=keys.owner).json()["total"] == 0
    larger = _upload(client, keys, _with(preprocessing={"share": 0.2}))
    pre = client.get(f"/v1/datasets/{larger}", headers=keys.owner).json()["preprocessing"]
    assert pre["share"] == 0.2 and 0.19 * EPSILON_MAX <= pre["committed_epsilon"] <= 0.2 * EPSILON_MAX * (1 + 1e-9)


def test_nothing_to_measure_charges_nothing(client, keys):
    schema = _with(features=[f for f in WIDE_SCHEMA["features"] if f["name"] in ("score", "color")] + [
        {"name": "income", "type": "ignore"}, {"name": "age", "type": "ignore"}])  # fmt: skip
    dataset_id = _upload(client, keys, schema)
    assert client.get(f"/v1/datasets/{dataset_id}", headers=keys.owner).json()["preprocessing"] is None
    assert client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()["total"] == 0


@pytest.mark.parametrize("value", [{"share": 0}, {"share": 0.6}, "auto", {"share": "0.1"}, {"fraction": 0.1}])
def test_an_invalid_declaration_is_a_422_naming_the_field(client, keys, value):
    response = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("data.csv", wide_csv(200), "text/csv")},
        data={"schema": json.dumps(_with(preprocessing=value)), "name": "bad"},
    )  # fmt: skip
    assert response.status_code == 422, response.text
    assert "preprocessing" in response.json()["detail"]
    assert client.get("/v1/datasets", headers=keys.owner).json() == []  # nothing half-written


def test_a_duplicate_is_still_recognised(client, keys):
    first = _upload(client, keys, allow_duplicate=False, grant=False)
    response = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("data.csv", wide_csv(), "text/csv")},
        data={"schema": json.dumps(WIDE_SCHEMA), "name": "again"},
    )  # fmt: skip
    assert response.status_code == 409, response.text
    assert response.json()["existing_dataset_id"] == first


def test_with_a_validation_split_both_parts_use_the_derived_encoding(client, keys):
    dataset_id = _upload(client, keys, _with(validation_fraction=0.25))
    dataset = client.get(f"/v1/datasets/{dataset_id}", headers=keys.owner).json()
    assert (dataset["n"], dataset["n_validation"]) == (3000, 1000) and dataset["preprocessing"] is not None
    request = {"dataset_id": dataset_id, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}
    _, fit = fit_and_wait(client, keys, request)
    evaluation = client.post(f"/v1/fits/{fit['id']}/evaluate", headers=keys.analyst,
                             json={"privacy": {"epsilon": 0.2}, "metrics": ["accuracy"]})  # fmt: skip
    assert evaluation.status_code in (200, 201), evaluation.text
    assert evaluation.json()["results"][0]["value"] > 0.6


def test_what_an_analyst_sees_of_the_release_beyond_the_noisy_statistics_does_not_depend_on_the_rows(client, keys):
    """Two different datasets of the same size under the same schema: the same cost, grid, noise variance, share,
    ledger curves and answer shape; only the released counts and what is derived from them differ."""
    views = []
    for seed in (1, 2):
        dataset_id = _upload(client, keys, csv=wide_csv(seed=seed))
        dataset = client.get(f"/v1/datasets/{dataset_id}", headers=keys.analyst).json()
        ledger = client.get(f"/v1/datasets/{dataset_id}/ledger?include=rdp", headers=keys.analyst).json()["entries"]
        views.append((dataset, ledger))
    (a, ledger_a), (b, ledger_b) = views
    for key in ("share", "epsilon", "committed_epsilon", "noise_variance", "bins", "mechanism"):
        assert a["preprocessing"][key] == b["preprocessing"][key], key
    for column_a, column_b in zip(a["preprocessing"]["columns"], b["preprocessing"]["columns"], strict=True):
        assert column_a["grid"] == column_b["grid"] and column_a["noisy_counts"] != column_b["noisy_counts"]
    assert [(e["kind"], e["rdp"], e["epsilon"]) for e in ledger_a] == [
        (e["kind"], e["rdp"], e["epsilon"]) for e in ledger_b
    ]
    assert set(a) == set(b)


def test_a_machine_short_of_memory_during_preprocessing_is_a_503_with_nothing_written(client, keys, monkeypatch):
    """preprocess re-encodes a copy of the matrix: a MemoryError there is a retryable 503, never a 500, and nothing
    (dataset, budget, ledger entry, stored data) is written."""
    import privfit.api.routers.datasets as router

    def short_of_memory(*args: Any, **kwargs: Any) -> None:
        raise MemoryError

    monkeypatch.setattr(router, "preprocess", short_of_memory)
    response = client.post(
        "/v1/datasets", headers=keys.owner, files={"file": ("data.csv", wide_csv(200), "text/csv")},
        data={"schema": json.dumps(WIDE_SCHEMA), "name": "short"},
    )  # fmt: skip
    assert response.status_code == 503 and response.headers["Retry-After"] == "30", response.text
    assert client.get("/v1/datasets", headers=keys.owner).json() == []
    assert not any(path.is_file() for path in client.app.state.settings.data_dir.rglob("*"))

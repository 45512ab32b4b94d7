"""Released fits of every model family and label type, and raw rows to predict with (issue 38): what
``test_client_sklearn.py`` (the scikit-learn export) and ``test_api_onnx.py`` (the ONNX export) compare with
``/predict``.

* :data:`FITS` — logistic, svm, linear_loss on a binary label; linear, huber, absolute, quantile on a numeric one;
  multinomial logistic on a categorical one — on the three datasets of :data:`DATASETS`: declared transforms (clip,
  log, standardize) with missing values imputed, transforms derived by private preprocessing with missing values
  refused, a categorical label; :func:`fit_all` uploads them and runs the fits (cheap: dp_gd with 20 steps on a few
  thousand rows).
* :func:`frames` — hypothesis DataFrames of raw rows for a dataset's schema: numbers inside and outside the declared
  bounds and at their edges, decimal texts, padded and decomposed (NFD) levels, every level, missing values under
  "impute".
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from api_helpers import SMALL_SCHEMA, Keys, small_csv, upload, wait_for
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from privfit.cli import main
from privfit.client import _client

#: The hypothesis settings of the property tests: 20 generated frames, reproducible.
EXAMPLES = settings(max_examples=20, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip

# --- datasets ---------------------------------------------------------------------------------------

#: Declared transforms, missing values imputed, a level with an accent, an ignored column; no preprocessing.
BINARY_SCHEMA: dict[str, Any] = {
    "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
    "features": [
        {"name": "x1", "type": "numeric", "lower": -1, "upper": 1, "fill": 0.25},
        {"name": "amount", "type": "numeric", "lower": 0, "upper": 1000, "fill": 10,
         "transform": {"clip": [1, 500], "log": True}},
        {"name": "age", "type": "numeric", "lower": 0, "upper": 120, "fill": 40,
         "transform": {"standardize": {"mean": 40, "std": 12, "clip_at": 2}}},
        {"name": "spend", "type": "numeric", "lower": 0, "upper": 100, "fill": 5,
         "transform": {"clip": [0, 50], "log": True, "standardize": {"mean": 2, "std": 1}}},
        {"name": "color", "type": "categorical", "levels": ["red", "green", "café"]},
        {"name": "note", "type": "ignore"},
    ],
    "missing": "impute",
    "budget": {"epsilon": 4.0, "delta": 1e-6},
    "preprocessing": "none",
}  # fmt: skip

#: Codebook-wide bounds and no transforms on income and age (private preprocessing derives clip and log rules, and
#: narrows the label's bounds), a declared standardize, missing values refused, an extra NA marker.
NUMERIC_SCHEMA: dict[str, Any] = {
    "label": {"name": "y", "type": "numeric", "lower": -100, "upper": 100},
    "features": [
        {"name": "income", "type": "numeric", "lower": 0, "upper": 10_000_000},
        {"name": "age", "type": "numeric", "lower": 0, "upper": 120},
        {"name": "x", "type": "numeric", "lower": -1, "upper": 1,
         "transform": {"standardize": {"mean": 0, "std": 0.5}}},
        {"name": "color", "type": "categorical", "levels": ["red", "green", "blue"]},
    ],
    "missing": "reject",
    "csv": {"na_values": ["", "NA", "n/a"]},
    "budget": {"epsilon": 4.0, "delta": 1e-6},
}  # fmt: skip

#: A label of three classes, missing values imputed, a derived transform (amount).
CATEGORICAL_SCHEMA: dict[str, Any] = {
    "label": {"name": "y", "type": "categorical", "levels": ["low", "mid", "high"]},
    "features": [
        {"name": "x1", "type": "numeric", "lower": -1, "upper": 1, "fill": 0},
        {"name": "amount", "type": "numeric", "lower": 0, "upper": 1_000_000, "fill": 100},
        {"name": "color", "type": "categorical", "levels": ["red", "green", "blue"]},
    ],
    "missing": "impute",
    "budget": {"epsilon": 4.0, "delta": 1e-6},
}

#: (name, dataset, solver, model, params): every model family and label type, fitted once per test.
FITS = [
    ("logistic", "binary", "dp_gd", "logistic", {"steps": 20}),
    ("svm", "binary", "dp_gd", "svm", {"steps": 20, "fit_intercept": False}),
    ("linear_loss", "binary", "dp_lazy_oco", "linear_loss", {"fit_intercept": True}),
    ("linear", "numeric", "dp_gd", "linear", {"steps": 20}),
    ("huber", "numeric", "dp_gd", "huber", {"steps": 20}),
    ("absolute", "numeric", "resque_dpsgd", "absolute", {}),
    ("quantile", "numeric", "resque_dpsgd", "quantile", {"quantile_tau": 0.8, "block_length": 4}),
    ("multinomial", "categorical", "dp_gd", "logistic", {"steps": 20}),
]


def _csv(header: list[str], columns: list[Any]) -> bytes:
    lines = [",".join(header)] + [",".join(str(v) for v in row) for row in zip(*columns, strict=True)]
    return ("\n".join(lines) + "\n").encode()


def binary_csv(n: int = 2000, seed: int = 1) -> bytes:
    rng = np.random.default_rng(seed)
    x1, amount = rng.uniform(-1, 1, n), np.round(np.exp(rng.normal(3, 1.2, n)).clip(0, 1000), 2)
    age, spend = np.round(rng.uniform(18, 90, n), 1), np.round(rng.exponential(5, n).clip(0, 100), 2)
    color = rng.choice(["red", "green", "café"], n)
    y = np.where(2 * x1 + 0.5 * (np.log1p(amount) - 3) - 0.02 * (age - 50) + rng.normal(0, 0.3, n) > 0, "yes", "no")
    x1_text = np.where(rng.uniform(size=n) < 0.05, "NA", np.round(x1, 4).astype(str))  # a few missing cells
    note = rng.choice(["a", "b, quoted"], n)
    note = np.array([f'"{v}"' for v in note])
    return _csv(["x1", "amount", "age", "spend", "color", "note", "y"], [x1_text, amount, age, spend, color, note, y])


def numeric_csv(n: int = 3000, seed: int = 2) -> bytes:
    rng = np.random.default_rng(seed)
    income, age = np.round(np.exp(rng.normal(10, 1, n)), 2), np.round(np.clip(rng.normal(45, 12, n), 18, 90), 1)
    x, color = np.round(rng.uniform(-1, 1, n), 4), rng.choice(["red", "green", "blue"], n)
    y = 5 * (np.log(income) - 10) + 0.1 * (age - 45) + 3 * x + rng.normal(0, 1, n)
    return _csv(["income", "age", "x", "color", "y"], [income, age, x, color, np.round(y, 3)])


def categorical_csv(n: int = 3000, seed: int = 3) -> bytes:
    rng = np.random.default_rng(seed)
    x1, amount = np.round(rng.uniform(-1, 1, n), 4), np.round(np.exp(rng.normal(6, 1.5, n)), 2)
    color = rng.choice(["red", "green", "blue"], n)
    score = 2 * x1 + 0.5 * (np.log(amount) - 6)
    y = np.where(score < -0.7, "low", np.where(score > 0.7, "high", "mid"))
    return _csv(["x1", "amount", "color", "y"], [x1, amount, color, y])


DATASETS: dict[str, tuple[dict[str, Any], Callable[[], bytes]]] = {
    "binary": (BINARY_SCHEMA, binary_csv),
    "numeric": (NUMERIC_SCHEMA, numeric_csv),
    "categorical": (CATEGORICAL_SCHEMA, categorical_csv),
}


def secret(headers: dict[str, str]) -> str:
    """The API key of ``headers`` (``Authorization: Bearer KEY``)."""
    return headers["Authorization"].removeprefix("Bearer ")


def in_process_cli(client: TestClient, keys: Keys, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:  # fmt: skip
    """``cli(*args)``: runs ``privfit ARGS`` as the analyst against ``client``'s in-process app (the commands'
    :class:`~privfit.client.Client` on its transport, no retries); its exit status, stdout and stderr."""
    transport = client._transport

    class InProcessClient(_client.Client):
        def __init__(self, url: str, api_key: str | None = None, **options: Any) -> None:
            super().__init__(url, api_key, **{**options, "retries": 0, "transport": transport})

    monkeypatch.setattr(_client, "Client", InProcessClient)  # the command imports it from _client when it runs

    def cli(*args: str) -> tuple[int, str, str]:
        code = main([*args, "--url", "http://testserver", "--api-key", secret(keys.analyst)])
        printed = capsys.readouterr()
        return code, printed.out, printed.err

    return cli


def fit_all(client: TestClient, keys: Keys, wanted: list[tuple[str, str, str, str, dict]]) -> dict[str, Any]:
    """Upload each dataset ``wanted`` names, request every fit at once (the app's two workers run them), wait for
    them: ``{"datasets": {kind: id}, "fits": {name: fit id}}``."""
    datasets = {kind: upload(client, keys, csv=DATASETS[kind][1](), schema=DATASETS[kind][0], epsilon=4.0)
                for kind in dict.fromkeys(kind for _, kind, *_ in wanted)}  # fmt: skip
    fits: dict[str, str] = {}
    for name, kind, solver, model, params in wanted:
        request = {"dataset_id": datasets[kind], "solver": solver, "model": model, "privacy": {"epsilon": 0.5},
                   "params": params}  # fmt: skip
        created = client.post("/v1/fits", headers=keys.analyst, json=request)
        assert created.status_code == 202, created.text
        fits[name] = created.json()["id"]
    for fit_id in fits.values():
        assert wait_for(client, fit_id, keys.analyst)["status"] == "succeeded"
    return {"datasets": datasets, "fits": fits}


# --- generated rows ---------------------------------------------------------------------------------


def edge_values(f: dict[str, Any]) -> list[float]:
    """A numeric feature's edges: its bounds, fill, clip range and the values where standardize saturates."""
    points = [float(f["lower"]), float(f["upper"]), 0.0]
    if f.get("fill") is not None:
        points.append(float(f["fill"]))
    transform = f.get("transform") or {}
    if transform.get("clip"):
        points.extend(float(v) for v in transform["clip"])
    standardize = transform.get("standardize")
    if standardize:
        reach = standardize.get("clip_at", 3.0) * standardize["std"]
        for t in (standardize["mean"] - reach, standardize["mean"], standardize["mean"] + reach):
            points.append(math.expm1(t) if transform.get("log") else t)
    return points


def _numbers(f: dict[str, Any]) -> st.SearchStrategy[float]:
    """Values inside and outside the declared bounds, at the edges and on a log scale."""
    lower, upper = float(f["lower"]), float(f["upper"])
    span = upper - lower
    return st.one_of(
        st.sampled_from(edge_values(f)),
        st.floats(lower - span, upper + span, allow_nan=False),
        st.floats(-3, 7).map(lambda e: 10.0**e),
        st.floats(-1e12, 1e12, allow_nan=False),
    )


def _numeric_cells(f: dict[str, Any], n: int, impute: bool, na: list[str]) -> st.SearchStrategy[list[Any]]:
    """A column of numbers (NaN when missing: a float column), or of mixed cells: numbers, integers, decimal texts
    with spaces around them and, under impute, None and the NA markers (an object column)."""
    number = _numbers(f)
    missing = [st.just(None), st.sampled_from([f" {marker} " for marker in na])] if impute else []
    mixed = st.one_of(number, st.integers(-(10**6), 10**6), number.map(lambda v: f" {v!r} "), *missing)
    plain = st.one_of(number, st.just(math.nan)) if impute else number
    return st.one_of(st.lists(plain, min_size=n, max_size=n), st.lists(mixed, min_size=n, max_size=n))


def _level_cells(f: dict[str, Any], n: int, impute: bool, na: list[str]) -> st.SearchStrategy[list[Any]]:
    """Every level, padded with spaces, in NFD (a decomposed accent) and, under impute, missing (None, NaN, NA)."""
    levels = [str(level) for level in f["levels"]]
    variants = levels + [f"  {lv} " for lv in levels] + [unicodedata.normalize("NFD", lv) for lv in levels]
    missing = [None, math.nan, *na] if impute else []
    return st.lists(st.sampled_from(variants + missing), min_size=n, max_size=n)


def frames(schema: dict[str, Any]) -> st.SearchStrategy[pd.DataFrame]:
    """DataFrames of 1 to 20 raw rows for ``schema`` (the dataset's, derived transforms included)."""
    impute = schema.get("missing") == "impute"
    na = list((schema.get("csv") or {}).get("na_values", ["", "NA", "?"]))

    @st.composite
    def frame(draw: st.DrawFn) -> pd.DataFrame:
        n = draw(st.integers(1, 20))
        columns: dict[str, list[Any]] = {}
        for f in schema["features"]:
            if f["type"] == "numeric":
                columns[f["name"]] = draw(_numeric_cells(f, n, impute, na))
            elif f["type"] == "categorical":
                columns[f["name"]] = draw(_level_cells(f, n, impute, na))
            elif draw(st.booleans()):  # an ignored column may be there or not
                columns[f["name"]] = draw(st.lists(st.text(max_size=5), min_size=n, max_size=n))
        return pd.DataFrame(columns)

    return frame()


#: the repository's root (its examples/ and docs/)
REPO = Path(__file__).resolve().parents[2]


def loans_and_small(client: TestClient, keys: Keys) -> tuple[str, str]:
    """The docs' loans dataset (examples/, its schema) and a small public one, uploaded and granted: their ids (the
    export tests fit a predictor on the first and a non-predictor on the second)."""
    loans_schema = json.loads((REPO / "examples" / "loans-schema.json").read_text())
    loans = upload(client, keys, csv=(REPO / "examples" / "loans.csv").read_bytes(), schema=loans_schema)
    return loans, upload(client, keys, csv=small_csv(500), schema=SMALL_SCHEMA)

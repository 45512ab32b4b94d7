"""A released fit as a scikit-learn Pipeline (issue 38, item 1): ``FitResult.to_sklearn()``,
``Client.fit_result`` / ``Client.to_sklearn`` and ``privfit fits export FIT --format joblib``.

The main property: for every model family the service offers (logistic, svm, linear_loss on a binary label; linear,
huber, absolute, quantile on a numeric one; multinomial logistic on a categorical one), the pipeline's ``predict``,
``predict_proba`` and ``decision_function`` on a DataFrame of raw rows equal ``/predict``'s predictions, probabilities
and scores to 1e-9 — on generated rows inside and outside the declared bounds, at the clip and standardize edges, with
decimal texts, padded and decomposed (NFD) levels and missing values under "impute", for schemas with declared
transforms (clip, log, standardize) and with transforms derived by private preprocessing. Also: a cell /predict
refuses raises (missing under "reject", an unknown level, a non-number) naming the same column and row; the pipeline
pickles with joblib and loads in a fresh process where only ``privfit.client`` of privfit is importable; the CLI's
export; the docs' example. Fits are cheap (dp_gd with 20 steps on a few thousand rows); the datasets, fits and
generated rows are :mod:`release_helpers`' (shared with the ONNX export's test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import pytest
from api_helpers import SMALL_SCHEMA, Keys, wait_for
from fastapi.testclient import TestClient
from hypothesis import given
from release_helpers import EXAMPLES, FITS, REPO, fit_all, frames, in_process_cli, loans_and_small
from scipy.special import expit
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from walkthrough import run_python_example

import privfit.client
from privfit.client import Client, ConflictError, InvalidRequestError
from privfit.client.cli import EXIT_CONFLICT, EXIT_ERROR, EXIT_NOT_FOUND, EXIT_OK
from privfit.client.models import FitResult
from privfit.client.sklearn_export import (
    CellError,
    ReleasedLinearClassifier,
    ReleasedLinearRegressor,
    ReleasedLogisticRegression,
    to_sklearn,
)

TOLERANCE = 1e-9
#: The largest |pipeline − /predict| seen by each test run (printed with -s; the report of issue 38 quotes it).
WORST: dict[str, float] = {}

# --- comparing with /predict ------------------------------------------------------------------------


def _difference(name: str, expected: Any, got: Any) -> None:
    expected, got = np.asarray(expected, dtype=np.float64), np.asarray(got, dtype=np.float64)
    assert expected.shape == got.shape, (name, expected.shape, got.shape)
    worst = float(np.max(np.abs(expected - got))) if expected.size else 0.0
    WORST[name] = max(WORST.get(name, 0.0), worst)
    assert worst <= TOLERANCE, (name, worst)


def check_against_predict(analyst: Client, fit_id: str, pipeline: Any, frame: pd.DataFrame, encoded: np.ndarray,
                          label: str, model: str) -> None:  # fmt: skip
    """The pipeline's predictions, scores and probabilities equal /predict's for ``frame``: ``predict`` of the whole
    pipeline, the others of its model on ``encoded``, the frame as the dataset's encoding gives it (encoded once for
    the fits of a dataset, whose encodings are the same: ``predict`` would differ otherwise)."""
    answer = analyst.predict(fit_id, frame)
    released = pipeline[-1]
    _difference(f"{model}/{label} scores", answer.scores, released.decision_function(encoded))
    predicted = pipeline.predict(frame)
    if label == "numeric":
        _difference(f"{model}/{label} predictions", answer.predictions, predicted)
    else:
        assert list(predicted) == answer.predictions
    if model == "logistic":
        probabilities = released.predict_proba(encoded)
        if answer.probabilities is not None:
            assert list(pipeline.classes_) == answer.classes
            expected = answer.probabilities
        else:  # a server that gives probabilities of multiclass fits only: (σ(−z), σ(z)) of its scores
            z = np.asarray(answer.scores)
            expected = np.column_stack([expit(-z), expit(z)])
        _difference(f"{model}/{label} probabilities", expected, probabilities)
    else:
        assert not hasattr(pipeline, "predict_proba")  # /predict gives none for these models


def check_dataset(analyst: Client, schema: dict[str, Any], label: str, fits: dict[str, tuple[str, str]],
                  pipelines: dict[str, Any]) -> None:  # fmt: skip
    """The property on generated frames of ``schema`` for each fit of the dataset (``fits``: name → (id, model))."""
    first = pipelines[next(iter(fits))]

    @EXAMPLES
    @given(frame=frames(schema))
    def matches(frame: pd.DataFrame) -> None:
        encoded = first[:-1].transform(frame)
        for name, (fit_id, model) in fits.items():
            check_against_predict(analyst, fit_id, pipelines[name], frame, encoded, label, model)

    matches()


def test_every_model_family_and_label_type_predicts_what_predict_answers(client: TestClient, keys: Keys,
                                                                         analyst: Client):  # fmt: skip
    made = fit_all(client, keys, FITS)
    schemas = {kind: analyst.dataset(dataset_id).schema for kind, dataset_id in made["datasets"].items()}
    # the numeric dataset's schema has the transforms private preprocessing derived (and narrower label bounds)
    derived = {f["name"]: f.get("transform") for f in schemas["numeric"]["features"]}
    assert derived["income"] and derived["income"]["log"] and derived["age"] and derived["age"]["clip"]
    assert schemas["numeric"]["label"]["upper"] < 100 and schemas["categorical"]["features"][1]["transform"]
    pipelines: dict[str, Any] = {}
    for name, _, _, model, _ in FITS:
        result = analyst.fit_result(made["fits"][name])  # the one-call path: the schema comes attached
        pipelines[name] = result.to_sklearn()
        assert list(pipelines[name][:-1].get_feature_names_out()) == result.feature_names
        expected = {"logistic": ReleasedLogisticRegression, "svm": ReleasedLinearClassifier,
                    "linear_loss": ReleasedLinearClassifier}.get(model, ReleasedLinearRegressor)  # fmt: skip
        assert type(pipelines[name][-1]) is expected
    assert list(pipelines["logistic"].classes_) == ["no", "yes"]
    assert list(pipelines["multinomial"].classes_) == ["low", "mid", "high"]

    for kind, schema in schemas.items():
        fits = {name: (made["fits"][name], model) for name, dataset, _, model, _ in FITS if dataset == kind}
        check_dataset(analyst, schema, kind, fits, pipelines)
    print("largest |pipeline − /predict|:", json.dumps(WORST, indent=1))

    # a cell /predict refuses raises here, naming the same column and row
    refused = [
        ("numeric", pd.DataFrame({"income": [5e4, 6e4], "age": [30, None], "x": [0.1, 0.2], "color": ["red"] * 2})),
        ("numeric", pd.DataFrame({"income": [5e4], "age": [30], "x": [0.1], "color": [" n/a "]})),  # reject: missing
        ("numeric", pd.DataFrame({"income": ["5e4", "lots"], "age": [30, 31], "x": [0.1, 0.2], "color": ["red"] * 2})),
        ("binary", pd.DataFrame({"x1": [0.1, 0.2, 0.3], "amount": [1, 2, 3], "age": [30, 40, 50], "spend": [1, 2, 3],
                                 "color": ["red", "green", "purple"]})),
        ("categorical", pd.DataFrame({"x1": [0.1], "amount": [5.0], "color": ["cafe"]})),
    ]  # fmt: skip
    fit_of = {"numeric": "linear", "binary": "logistic", "categorical": "multinomial"}
    for kind, frame in refused:
        name = fit_of[kind]
        with pytest.raises(InvalidRequestError) as answer:
            analyst.predict(made["fits"][name], frame)
        with pytest.raises(CellError) as raised:
            pipelines[name].predict(frame)
        assert (raised.value.column, raised.value.row) == (answer.value.problem["column"], answer.value.problem["line"])
        if "unknown category" in answer.value.detail:
            assert str(raised.value) == answer.value.detail


def test_the_cli_exports_a_joblib_file_and_the_docs_example_runs(client: TestClient, keys: Keys, analyst: Client,
                                                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]):  # fmt: skip
    cli = in_process_cli(client, keys, monkeypatch, capsys)
    loans, small = loans_and_small(client, keys)
    requests = [(loans, "dp_gd", "logistic", {"steps": 20}), (small, "dp_lazy_oco", "mean", {})]
    fit_ids = []
    for dataset_id, solver, model, params in requests:
        request = {"dataset_id": dataset_id, "solver": solver, "model": model, "privacy": {"epsilon": 0.5},
                   "params": params}  # fmt: skip
        created = client.post("/v1/fits", headers=keys.analyst, json=request)
        assert created.status_code == 202, created.text
        fit_ids.append(created.json()["id"])
    for fit_id in fit_ids:
        assert wait_for(client, fit_id, keys.analyst)["status"] == "succeeded"
    fit_id, mean_id = fit_ids

    target = tmp_path / "model.joblib"
    code, out, err = cli("fits", "export", fit_id, "--format", "joblib", "--output", str(target))
    assert code == EXIT_OK and f"wrote {target}" in err and "ReleasedLogisticRegression" in err, err
    assert not target.with_name("model.joblib.partial").exists()
    rows = pd.read_json(REPO / "examples" / "loans-new.json")
    pipeline = joblib.load(target)
    answer = analyst.predict(fit_id, rows)
    assert list(pipeline.predict(rows)) == answer.predictions
    _difference("cli export scores", answer.scores, pipeline.decision_function(rows))
    code, out, _ = cli("fits", "export", fit_id, "--format", "joblib", "--output", str(target), "--json")
    assert code == EXIT_OK and json.loads(out) == {"fit_id": fit_id, "format": "joblib", "output": str(target),
                                                   "bytes": target.stat().st_size}  # fmt: skip
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("fits", "export", fit_id, "--format", "joblib", "-q")  # default name
    assert code == EXIT_OK and out.strip() == f"fit-{fit_id}.joblib" and (tmp_path / out.strip()).is_file()

    code, _, err = cli("fits", "export", mean_id, "--format", "joblib")  # a mean is not a predictor: like /predict
    assert code == EXIT_CONFLICT and "409 Not a predictor" in err and not (tmp_path / f"fit-{mean_id}.joblib").exists()
    with pytest.raises(ConflictError, match="Not a predictor"):
        analyst.to_sklearn(mean_id)
    with pytest.raises(ValueError, match="does not predict"):
        analyst.fit_result(mean_id).to_sklearn()
    slow = {"dataset_id": small, "solver": "dp_gd", "model": "logistic", "privacy": {"epsilon": 0.5},
            "params": {"steps": 100_000}}  # fmt: skip
    slow_id = client.post("/v1/fits", headers=keys.analyst, json=slow).json()["id"]
    code, _, err = cli("fits", "export", slow_id, "--format", "joblib")  # queued or running: like /predict
    assert code == EXIT_CONFLICT and "409 Fit not finished" in err, err
    assert client.post(f"/v1/fits/{slow_id}/cancel", headers=keys.analyst).status_code == 200
    code, _, err = cli("fits", "export", "00000000-0000-4000-8000-000000000000", "--format", "joblib")
    assert code == EXIT_NOT_FOUND and "404" in err
    with pytest.raises(SystemExit) as usage:  # argparse's own exit
        cli("fits", "export", fit_id, "--format", "pmml")
    assert usage.value.code == 2 and "invalid choice: 'pmml'" in capsys.readouterr().err

    # without scikit-learn: exit 1, saying what to install
    for module in [name for name in sys.modules if name.split(".")[0] == "sklearn"]:
        monkeypatch.setitem(sys.modules, module, None)  # an import of it fails
    monkeypatch.delitem(sys.modules, "privfit.client.sklearn_export")
    monkeypatch.delattr(privfit.client, "sklearn_export")
    code, _, err = cli("fits", "export", fit_id, "--format", "joblib", "--output", str(tmp_path / "none.joblib"))
    assert code == EXIT_ERROR and "pip install 'privfit[sklearn]'" in err and not (tmp_path / "none.joblib").exists()
    monkeypatch.undo()

    # docs/client.md's example as printed, continuing the Python client's example (its `client` and `fit`)
    (tmp_path / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    run_python_example(REPO / "docs" / "client.md", "## A scikit-learn model",
                       {"client": analyst, "fit": analyst.get_fit(fit_id)})  # fmt: skip
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == str(answer.predictions) and printed[1] == "True", printed
    assert 0.5 < float(printed[2]) <= 1.0 and (tmp_path / "loans-fit.joblib").is_file()


# --- without a server -------------------------------------------------------------------------------

#: A release on SMALL_SCHEMA with missing values imputed: x1, x2, color=red, color=green, color=blue.
IMPUTED = {**SMALL_SCHEMA, "missing": "impute", "features": [
    {**SMALL_SCHEMA["features"][0], "fill": 0.0}, {**SMALL_SCHEMA["features"][1], "fill": 0.5},
    SMALL_SCHEMA["features"][2],
]}  # fmt: skip
RELEASE = {"model": "logistic", "coefficients": [1.5, -0.75, 0.25, -0.5, 0.125], "intercept": None,
           "feature_names": ["x1", "x2", "color=red", "color=green", "color=blue"]}  # fmt: skip


def test_the_service_and_the_export_agree_on_constants_and_a_zero_score():
    """The constants this module repeats (it never imports the service) and the tie rule: a score of exactly 0 is
    the positive class, as the service decodes it (scikit-learn's LogisticRegression would say negative)."""
    from privfit.client import sklearn_export
    from privfit.datasets import DatasetSchema, encode_rows
    from privfit.datasets.encoding import _NUMBER
    from privfit.datasets.schema import CsvOptions, Standardize
    from privfit.solvers.base import CLASSIFICATION_MODELS, REGRESSION_MODELS
    from privfit.solvers.base import FitResult as ServiceResult

    assert sklearn_export._NUMBER.pattern == _NUMBER.pattern
    assert (sklearn_export.CLASSIFICATION_MODELS, sklearn_export.REGRESSION_MODELS) == (CLASSIFICATION_MODELS,
                                                                                        REGRESSION_MODELS)  # fmt: skip
    assert Standardize.model_fields["clip_at"].default == sklearn_export._DEFAULT_CLIP_AT
    assert tuple(CsvOptions().na_values) == sklearn_export._DEFAULT_NA_VALUES

    rows = [{"x1": 0.0, "x2": 0.0, "color": None}, {"x1": 0.0, "x2": 0.0, "color": "blue"}]  # encodes to 0 | e_blue
    schema = DatasetSchema.model_validate(IMPUTED)
    service = ServiceResult("dp_gd", "logistic", RELEASE["coefficients"], None)
    scores = service.decision_function(encode_rows(rows, schema).X)
    assert list(scores) == [0.0, 0.125]
    pipeline = to_sklearn(RELEASE, IMPUTED)
    frame = pd.DataFrame(rows)
    assert list(pipeline.decision_function(frame)) == [0.0, 0.125]
    assert list(pipeline.predict(frame)) == schema.label.decode(service.predict(encode_rows(rows, schema).X))
    assert list(pipeline.predict(frame)) == ["yes", "yes"]
    svm = to_sklearn({**RELEASE, "model": "svm"}, IMPUTED)
    assert list(svm.predict(frame)) == ["yes", "yes"]


def test_unknown_levels_can_be_ignored_and_mismatched_schemas_are_refused():
    frame = pd.DataFrame({"x1": [0.5], "x2": [-0.5], "color": ["purple"]})
    with pytest.raises(CellError, match="unknown category in column 'color' at row 1"):
        to_sklearn(RELEASE, SMALL_SCHEMA).predict(frame)
    ignoring = to_sklearn(RELEASE, SMALL_SCHEMA, unknown_category="ignore")
    assert ignoring[:-1].transform(frame).tolist() == [[0.5, -0.5, 0.0, 0.0, 0.0]]  # an all-zero block
    with pytest.raises(CellError, match="missing value in column 'color' at row 2"):
        ignoring.predict(pd.DataFrame({"x1": [0.5, 0.5], "x2": [-0.5, 0.5], "color": ["red", None]}))  # reject
    wider = {**SMALL_SCHEMA, "features": [*SMALL_SCHEMA["features"], {"name": "x3", "type": "numeric", "lower": 0,
                                                                         "upper": 1}]}  # fmt: skip
    with pytest.raises(ValueError, match="feature_names"):
        to_sklearn(RELEASE, wider)
    with pytest.raises(ValueError, match="does not predict"):
        to_sklearn({**RELEASE, "predictor": False}, SMALL_SCHEMA)
    with pytest.raises(ValueError, match="no scikit-learn export"):
        to_sklearn({**RELEASE, "model": "linear"}, SMALL_SCHEMA)  # a regression model on a binary label
    with pytest.raises(ValueError, match="needs the schema"):
        FitResult.from_json(RELEASE).to_sklearn()
    assert FitResult.from_json(RELEASE).to_sklearn(SMALL_SCHEMA)[-1].coef_.tolist() == [RELEASE["coefficients"]]


def test_column_names_scikit_learn_reserves_are_encoded_like_any_other():
    """Columns named like ColumnTransformer's parameters, with ``__``, or like the fallback names still encode in the
    schema's order, as the service encodes them."""
    from privfit.datasets import encode_rows

    schema = {**SMALL_SCHEMA, "features": [
        {"name": "remainder", "type": "numeric", "lower": 0, "upper": 10},
        {"name": "a__b", "type": "numeric", "lower": -1, "upper": 1},
        {"name": "feature1", "type": "categorical", "levels": ["x", "y"]},
        {"name": "transformers", "type": "ignore"},
    ]}  # fmt: skip
    release = {"model": "svm", "coefficients": [1.0, -2.0, 0.5, -0.5], "intercept": 0.1}
    pipeline = to_sklearn(release, schema)
    assert list(pipeline[:-1].get_feature_names_out()) == ["remainder", "a__b", "feature1=x", "feature1=y"]
    rows = [{"remainder": 12, "a__b": 0.25, "feature1": "y"}, {"remainder": 2.5, "a__b": -3, "feature1": " x"}]
    assert pipeline[:-1].transform(pd.DataFrame(rows)).tolist() == encode_rows(rows, schema).X.tolist()


def test_released_models_are_not_refitted_by_cross_validation():
    """clone copies the released parameters and fit keeps them: cross_val_score scores the released model."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x1": rng.uniform(-1, 1, 60), "x2": rng.uniform(-1, 1, 60),
                          "color": rng.choice(["red", "green", "blue"], 60)})  # fmt: skip
    numeric = {**SMALL_SCHEMA, "label": {"name": "y", "type": "numeric", "lower": -4, "upper": 4}}
    for release, schema in [(RELEASE, SMALL_SCHEMA), ({**RELEASE, "model": "svm"}, SMALL_SCHEMA),
                            ({**RELEASE, "model": "huber", "intercept": 0.1}, numeric)]:  # fmt: skip
        pipeline = to_sklearn(release, schema)
        y = pipeline.predict(frame)  # the model's own predictions: a perfect score on every fold
        copy = clone(pipeline).fit(frame.head(3), y[:3])
        assert copy[-1].coef_.tolist() == pipeline[-1].coef_.tolist()
        assert np.array_equal(copy.predict(frame), y)
        assert cross_val_score(pipeline, frame, y, cv=3).tolist() == [1.0, 1.0, 1.0]


def test_a_joblib_file_loads_in_a_fresh_process_with_only_the_client(tmp_path: Path):
    """Pickled with joblib, the pipeline loads and predicts in a process where importing the service (privfit's
    other packages, fastapi, sqlalchemy, pydantic) fails: it references privfit.client.sklearn_export only."""
    pipelines = {"binary": to_sklearn({**RELEASE, "model": "svm"}, SMALL_SCHEMA),
                 "numeric": to_sklearn({**RELEASE, "model": "linear", "intercept": 0.2},
                                       {**SMALL_SCHEMA, "label": {"name": "y", "type": "numeric", "lower": -4,
                                                                  "upper": 4}}),
                 "multinomial": to_sklearn({**RELEASE, "coefficients": [RELEASE["coefficients"]] * 3,
                                            "intercept": [0.0, 0.1, 0.2], "classes": ["a", "b", "c"]},
                                           {**SMALL_SCHEMA, "label": {"name": "y", "type": "categorical",
                                                                      "levels": ["a", "b", "c"]}})}  # fmt: skip
    rows = [{"x1": 0.3, "x2": -2.0, "color": " blue "}, {"x1": "0.5", "x2": 0.25, "color": "green"}]
    for kind, pipeline in pipelines.items():
        joblib.dump(pipeline, tmp_path / f"{kind}.joblib")
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    script = r"""
import importlib.abc, json, sys

class NoService(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if (name.startswith("privfit.") and not name.startswith("privfit.client")) or top in (
                "fastapi", "sqlalchemy", "pydantic", "httpx", "uvicorn"):
            raise ImportError(f"{name} is not importable here")
        return None

sys.meta_path.insert(0, NoService())
import joblib, pandas as pd

frame = pd.DataFrame(json.load(open("rows.json")))
out = {}
for kind in ("binary", "numeric", "multinomial"):
    model = joblib.load(f"{kind}.joblib")
    out[kind] = {"predict": model.predict(frame).tolist(), "scores": model.decision_function(frame).tolist()}
    if hasattr(model, "predict_proba"):
        out[kind]["proba"] = model.predict_proba(frame).tolist()
out["modules"] = sorted(m for m in sys.modules if m.split(".")[0] == "privfit")
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert loaded.pop("modules") == ["privfit", "privfit.client", "privfit.client.errors", "privfit.client.models",
                                     "privfit.client.sklearn_export"]  # fmt: skip
    frame = pd.DataFrame(rows)
    for kind, pipeline in pipelines.items():
        assert loaded[kind]["predict"] == pipeline.predict(frame).tolist()
        assert loaded[kind]["scores"] == pipeline.decision_function(frame).tolist()
        if hasattr(pipeline, "predict_proba"):
            assert loaded[kind]["proba"] == pipeline.predict_proba(frame).tolist()
    assert loaded["multinomial"]["predict"] == ["c", "c"] and loaded["binary"]["predict"] == ["yes", "yes"]

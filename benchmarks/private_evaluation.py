"""Private evaluation (issue #22 §2): how close the DP metrics of ``POST /v1/fits/{id}/evaluate`` come to the truth.

    python benchmarks/private_evaluation.py [--runs 1000] [--epsilon 0.1] [--api-runs 5]

For UCI Adult (``adult.data``, validation_fraction 0.2: n_val = 6,512) and the HR-attrition dev dataset
(validation_fraction 0.35: n_val = 5,249), in one process: an app on a temporary SQLite database uploads the data
with its validation split, fits ``dp_gd`` (logistic, ε = 1), and runs ``--api-runs`` evaluations end to end
through the API at ``--epsilon``. Then, as the data owner who runs the deployment, it reads the validation rows
from the store and computes the TRUE validation metrics non-privately, and repeats the mechanism
(:func:`privfit.privacy.evaluation.release`, seeded) ``--runs`` times on the fit's released model with the
default metrics and budget split — printing the share of runs whose accuracy is within ±1 point of the truth
(the acceptance target: ≥ 95 % at ε = 0.1 with n_val ≥ 5,000), each metric's interval coverage, and the RMSE of
each noisy metric. roc_auc's interval is judged against the binned AUC it estimates (the exact AUC is printed
beside it: their gap is the binning bias). No thresholds: this reports, it does not judge.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import ADULT_DIR
from fastapi.testclient import TestClient

from privfit.api.app import create_app
from privfit.api.auth import create_api_key
from privfit.db import Dataset, Job
from privfit.privacy import make_generator
from privfit.privacy.evaluation import (
    LOG_LOSS_P_MIN,
    auc_from_histograms,
    auc_histograms,
    binary_inputs,
    plan_evaluation,
    release,
)
from privfit.settings import Settings
from privfit.solvers.base import FitResult

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DEV_DIR = ADULT_DIR.parent / "dev"
DATASETS = [  # (name, CSV, schema file, validation fraction)
    ("adult", ADULT_DIR / "adult.data", EXAMPLES / "adult-schema.json", 0.2),
    ("hr_attrition", DEV_DIR / "hr_attrition.csv", EXAMPLES / "dev" / "hr_attrition-schema.json", 0.35),
]
FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 1.0}}


def exact_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """The exact (Mann–Whitney) AUC with ties counted ½, by ranks."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(scores.size)
    sorted_scores = scores[order]
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    average = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(average, counts)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def upload_and_fit(client: TestClient, owner: dict[str, str], csv: Path, schema_file: Path,
                   fraction: float) -> tuple[str, str]:  # fmt: skip
    schema = json.loads(schema_file.read_text())
    schema["budget"] = {"epsilon": 1000.0, "delta": 1e-6}
    schema["validation_fraction"] = fraction
    response = client.post("/v1/datasets", headers=owner, files={"file": (csv.name, csv.read_bytes(), "text/csv")},
                           data={"schema": json.dumps(schema)})  # fmt: skip
    response.raise_for_status()
    dataset = response.json()
    fit = client.post("/v1/fits", headers=owner, json={"dataset_id": dataset["id"], **FIT}).json()
    while (fit := client.get(f"/v1/fits/{fit['id']}", headers=owner).json())["status"] in ("queued", "running"):
        time.sleep(0.1)
    if fit["status"] != "succeeded":
        raise RuntimeError(f"fit failed: {fit.get('error')}")
    print(f"  n = {dataset['n']} training rows, n_validation = {dataset['n_validation']}, d = {dataset['d']}")
    return dataset["id"], fit["id"]


def owner_view(client: TestClient, dataset_id: str, fit_id: str) -> tuple[np.ndarray, np.ndarray, FitResult]:
    """What the data owner running the deployment can read: the validation rows and the fit's released model."""
    db, store = client.app.state.db, client.app.state.store
    with db.read() as session:
        key = str(session.get_one(Dataset, dataset_id).validation_storage_key)
        result = dict(session.get_one(Job, fit_id).result or {})
    X, y = store.get(key)
    return X, y, FitResult(**{k: result[k] for k in ("solver", "model", "coefficients", "intercept")})


def repeated(X: np.ndarray, y: np.ndarray, model: FitResult, epsilon: float, runs: int, seed: int) -> dict[str, Any]:
    scores = model.decision_function(X)
    inputs = binary_inputs(scores, y, probabilities=True)
    truth = {
        "accuracy": float(np.mean(inputs.correct)),
        "roc_auc": float(auc_from_histograms(auc_histograms(scores, inputs.positive))),
        "log_loss": float(np.mean(-np.log(np.clip(inputs.p_true, LOG_LOSS_P_MIN, 1.0)))),
    }
    plan = plan_evaluation(epsilon, None, label_type="binary", probabilities=True, n=int(y.size))
    rng = make_generator(seed, data_is_public=True)
    values: dict[str, list[float]] = {m: [] for m in plan.metrics}
    covered = dict.fromkeys(plan.metrics, 0)
    for _ in range(runs):
        for r in release(plan, inputs, rng):
            values[r.metric].append(r.value)
            covered[r.metric] += r.interval[0] <= truth[r.metric] <= r.interval[1]
    accuracy = np.asarray(values["accuracy"])
    return {
        "truth": truth, "exact_auc": exact_auc(scores, inputs.positive), "plan": plan,
        "within": float(np.mean(np.abs(accuracy - truth["accuracy"]) <= 0.01)),
        "coverage": {m: covered[m] / runs for m in plan.metrics},
        "rmse": {m: math.sqrt(float(np.mean((np.asarray(v) - truth[m]) ** 2))) for m, v in values.items()},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--api-runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=f"sqlite:///{tmp}/bench.db", data_dir=Path(tmp) / "store", workers=1,
                            poll_seconds=0.05, max_upload_bytes=64 * 1024 * 1024)  # fmt: skip
        with TestClient(create_app(settings)) as client:
            owner = {"Authorization": f"Bearer {create_api_key(client.app.state.db, 'owner')[1]}"}
            for index, (name, csv, schema_file, fraction) in enumerate(DATASETS):
                print(f"\n{name}: validation_fraction {fraction}, dp_gd logistic at ε = 1")
                dataset_id, fit_id = upload_and_fit(client, owner, csv, schema_file, fraction)
                X, y, model = owner_view(client, dataset_id, fit_id)
                out = repeated(X, y, model, args.epsilon, args.runs, seed=100 + index)
                truth = out["truth"]
                print(f"  true validation metrics (non-private, owner's view): accuracy {truth['accuracy']:.4f}, "
                      f"roc_auc {out['exact_auc']:.4f} exact / {truth['roc_auc']:.4f} binned, "
                      f"log_loss {truth['log_loss']:.4f}")  # fmt: skip
                for _ in range(args.api_runs):
                    response = client.post(f"/v1/fits/{fit_id}/evaluate", headers=owner,
                                           json={"privacy": {"epsilon": args.epsilon}})  # fmt: skip
                    response.raise_for_status()
                    shown = ", ".join(f"{r['metric']} {r['value']:.4f} [{r['interval'][0]:.4f}, {r['interval'][1]:.4f}]"
                                      for r in response.json()["results"])  # fmt: skip
                    print(f"  API evaluation at ε = {args.epsilon:g}: {shown}")
                plan = out["plan"]
                split = ", ".join(f"{m} {e:.3g}" for m, e in plan.epsilons.items())
                print(f"  {args.runs} seeded runs of the mechanism at ε = {args.epsilon:g} (n_val = {plan.n}; "
                      f"split {split}):")  # fmt: skip
                print(f"    accuracy within ±1 point of the truth: {out['within']:.1%}")
                for metric in plan.metrics:
                    print(f"    {metric:9s} RMSE {out['rmse'][metric]:.4f}, "
                          f"95% interval coverage {out['coverage'][metric]:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()

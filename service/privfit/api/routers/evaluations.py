"""Private evaluation of a succeeded fit on its dataset's validation rows (issue #22 §2), charged to the ledger.

``POST /v1/fits/{id}/evaluate`` with a target ε (and optionally the metrics and the interval level):

1. checks, from public data only: the caller may see the fit and still use its dataset (key, grant, not deleted),
   the fit succeeded and predicts labels, the dataset has validation rows (``schema.validation_fraction``), and
   the metrics apply to the label and model (:func:`privfit.privacy.evaluation.plan_evaluation`);
2. computes the cost from public inputs only (ε, metrics, weights) and, in ONE write transaction holding the
   budget row lock, admits it by the dataset's privacy filter exactly like a fit and writes the evaluation with
   its reservation and its charge (:func:`privfit.ledger.charge_evaluation`) — or answers 409 having charged
   nothing. Nothing has read a validation row yet;
3. reads the validation matrix (n_val × d) and releases the noisy metrics with their intervals, in the threadpool
   (a sync endpoint), with noise from an OS-seeded generator. The result is written once. A failure or crash
   after step 2 keeps the charge (the rows may have been read); a failed evaluation's error never quotes values.

``Idempotency-Key`` works as for fits: the same key and body return the first evaluation (charged once); another
body is a 409. Evaluations are listed at ``GET /v1/fits/{id}/evaluations`` to whoever may see the fit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Collection
from dataclasses import asdict
from typing import Any, Literal

import numpy as np
from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from privfit.datasets.lifecycle import store_mismatch
from privfit.datasets.store import DatasetStore, DatasetStoreError
from privfit.db import Budget, Database, Dataset, Evaluation, Job
from privfit.db.models import utcnow
from privfit.ledger import Estimate, charge_evaluation, estimate
from privfit.privacy import PrivacyCost, get_grid, secure_generator
from privfit.privacy.evaluation import (
    METRIC_WEIGHTS,
    EvaluationInputs,
    EvaluationPlan,
    binary_inputs,
    categorical_inputs,
    numeric_inputs,
    plan_evaluation,
    release,
)
from privfit.solvers.base import MIN_EPSILON, FitResult

from ..auth import Principal, confirm_access, require_role, usable_dataset
from ..encoding import UtcDateTime, public_json
from ..idempotency import IdempotencyKey, replayed
from ..include import RdpInclude, lean_cost
from ..pagination import Keyset, Paging, link_next, paged
from ..problems import Problem, problem_responses
from .fits import CostOut, FilterDryRunOut, FitId, cost_json, visible_job

router = APIRouter(prefix="/v1/fits", tags=["evaluations"])
log = logging.getLogger("privfit.api")

EVALUATION_FORMULA = "evaluation-laplace/v1"
"""Identifies the mechanisms and budget split of :mod:`privfit.privacy.evaluation` in each evaluation's cost."""
EXACT_EVALUATION_FORMULA = "evaluation-discrete-laplace/v1"
"""The same with the exact noise sampler: discrete Laplace releases, charged their pure-DP curves."""


def evaluation_formula(plan: EvaluationPlan) -> str:
    """The formula version of ``plan``'s cost: it names the noise sampler the plan was made (and is released) with."""
    return EVALUATION_FORMULA if plan.sampler == "float" else EXACT_EVALUATION_FORMULA


Metric = Literal["accuracy", "roc_auc", "log_loss", "rmse", "mae"]


class EvaluationPrivacy(BaseModel):
    model_config = {"extra": "forbid"}
    epsilon: float = Field(..., ge=MIN_EPSILON, le=100, description="Target ε ∈ [1e-6, 100] of this evaluation.")


class EvaluationRequest(BaseModel):
    model_config = {"extra": "forbid"}
    privacy: EvaluationPrivacy
    metrics: list[Metric] | None = Field(
        None, min_length=1, max_length=5,
        description="Default: every metric that applies — binary label: accuracy, roc_auc, log_loss (log_loss for "
        "logistic only); categorical label: accuracy, log_loss; numeric label: rmse, mae. ε is split by public "
        "weights (docs/privacy.md).",
    )  # fmt: skip
    confidence: float = Field(0.95, ge=0.5, lt=1.0, description="Level of each metric's interval.")


class MetricOut(BaseModel):
    """One released metric: the noisy value, its interval (noise only: the validation rows are fixed), and its
    mechanism — Laplace noise of ``scale`` on a sum of replace-one ``sensitivity``, costing ``epsilon``."""

    metric: str
    value: float
    interval: list[float]
    confidence: float
    noise: str
    scale: float
    sensitivity: float
    epsilon: float
    weight: float
    note: str


class EvaluationOut(BaseModel):
    """An evaluation: its request, cost and, once succeeded, its released metrics."""

    id: str
    fit_id: str
    dataset_id: str
    status: str = Field(description="running | succeeded | failed")
    epsilon: float
    confidence: float
    metrics: list[str]
    n_validation: int
    cost: CostOut
    results: list[MetricOut] | None = None
    error: dict[str, Any] | None = None
    created_at: UtcDateTime
    finished_at: UtcDateTime | None = None


def _json(evaluation: Evaluation, include: Collection[str]) -> dict[str, Any]:
    """The evaluation's answer; its cost's RDP curve only if ``include`` has ``rdp`` (:mod:`privfit.api.include`)."""
    body: dict[str, Any] = {
        "id": evaluation.id, "fit_id": evaluation.job_id, "dataset_id": evaluation.dataset_id,
        "status": evaluation.status, "epsilon": evaluation.epsilon, "confidence": evaluation.confidence,
        "metrics": evaluation.metrics, "n_validation": evaluation.n_validation,
        "cost": lean_cost(evaluation.cost, include),
        "created_at": evaluation.created_at, "finished_at": evaluation.finished_at,
    }  # fmt: skip
    if evaluation.result is not None:
        body["results"] = evaluation.result["metrics"]
    if evaluation.error is not None:
        body["error"] = evaluation.error
    return public_json(body)


def _request_hash(job_id: str, body: EvaluationRequest) -> str:
    document = {"fit_id": job_id, **body.model_dump(mode="json")}
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _replay(
    db: Database, principal: Principal, key: str, request_hash: str, include: Collection[str]
) -> JSONResponse | None:
    found = replayed(db, Evaluation, principal, key, request_hash)
    return None if found is None else _created(found, include)


def _created(evaluation: Evaluation, include: Collection[str]) -> JSONResponse:
    location = f"/v1/fits/{evaluation.job_id}/evaluations"
    return JSONResponse(_json(evaluation, include), status_code=201, headers={"Location": location})


def _plan(job: Job, dataset: Dataset, body: EvaluationRequest) -> EvaluationPlan:
    """The public plan: refuses (409) a fit that cannot be evaluated and (422) metrics that do not apply."""
    if job.status != "succeeded" or job.result is None:
        raise Problem(409, "Fit not finished", f"fit {job.id} is {job.status}; evaluations need a succeeded fit")
    if not job.result.get("predictor", True):
        raise Problem(409, "Not a predictor", f"fit {job.id} estimated a statistic of the features (model "
                      f"{job.model!r}); it has no predictions to evaluate")  # fmt: skip
    if dataset.n_validation < 1 or dataset.validation_storage_key is None:
        raise Problem(409, "No validation rows", f"dataset {dataset.id} has no private validation rows: its owner "
                      "declares them at upload with schema.validation_fraction",
                      field="schema.validation_fraction")  # fmt: skip
    label = dataset.schema_json["label"]
    scale = (float(label["upper"]) - float(label["lower"])) / 2.0 if label["type"] == "numeric" else 1.0
    return plan_evaluation(
        body.privacy.epsilon, body.metrics, label_type=label["type"], probabilities=job.model == "logistic",
        n=dataset.n_validation, label_scale=scale, confidence=body.confidence,
    )  # fmt: skip


def _public_plan(
    db: Database, job: Job, body: EvaluationRequest, principal: Principal
) -> tuple[Dataset, EvaluationPlan, Budget, PrivacyCost]:
    """The dataset (usable by ``principal``), the evaluation's plan, the budget and the cost: public data only."""
    dataset = db.retrying(lambda: usable_dataset(db, job.dataset_id, principal), what="read dataset")
    plan = _plan(job, dataset, body)

    def read_budget() -> Budget:
        with db.read() as session:
            return session.get_one(Budget, dataset.domain_id)

    budget = db.retrying(read_budget, what="read budget")
    return dataset, plan, budget, plan.cost(get_grid(budget.grid_name))


def _inputs(result: dict[str, Any], label_type: str, X: np.ndarray, y: np.ndarray) -> EvaluationInputs:
    """Per-row inputs of the metrics from the fit's released model (``result``) on the validation rows (private;
    never released)."""
    model = FitResult(**{k: result[k] for k in ("solver", "model", "coefficients", "intercept")},
                      classes=result.get("classes"))  # fmt: skip
    if label_type == "binary":
        return binary_inputs(model.decision_function(X), y, probabilities=model.model == "logistic")
    if label_type == "categorical":
        return categorical_inputs(model.predict_proba(X), y)
    return numeric_inputs(model.predict(X), y)


def _finish(db: Database, evaluation_id: str, **fields: Any) -> Evaluation:
    def write() -> Evaluation:
        with db.write() as session:
            row = session.get_one(Evaluation, evaluation_id)
            if row.status == "running":  # written once
                for name, value in fields.items():
                    setattr(row, name, value)
                row.finished_at = utcnow()
            return row

    return db.retrying(write, what="evaluation result")


@router.post(
    "/{job_id:id}/evaluate", status_code=201, response_model=EvaluationOut, response_model_exclude_unset=True,
    summary="Privately evaluate a succeeded fit on its dataset's validation rows (charged to the ledger)",
    responses=problem_responses(
        400, 401, 403, 404, 409, 410, 413, 422, 503,
        s409="The fit has not succeeded or does not predict, the dataset has no validation rows, the ledger refused "
        "the evaluation (privacy budget exceeded; nothing was charged), or the Idempotency-Key was used with another "
        "request body.",
        s410="The fit's dataset was deleted.",
    ),
)  # fmt: skip
def evaluate(
    job_id: FitId,
    body: EvaluationRequest,
    request: Request,
    include: RdpInclude,
    idempotency_key: IdempotencyKey = None,
    principal: Principal = Depends(require_role("owner", "analyst")),  # noqa: B008
) -> JSONResponse:
    db: Database = request.app.state.db
    store: DatasetStore = request.app.state.store
    job = visible_job(request, job_id, principal)
    request_hash = _request_hash(job.id, body)
    if idempotency_key is not None:
        key = idempotency_key
        replay = db.retrying(lambda: _replay(db, principal, key, request_hash, include), what="evaluation replay")
        if replay is not None:
            return replay
    dataset, plan, budget, cost = _public_plan(db, job, body, principal)
    mismatch = store_mismatch(dataset.store_id, store)
    if mismatch is not None:  # refused before charging: this process could not read the rows
        raise Problem(503, "Dataset store unavailable", mismatch, headers={"Retry-After": "30"})
    evaluation_id = str(uuid.uuid4())
    row = {
        "id": evaluation_id, "job_id": job.id, "dataset_id": dataset.id, "api_key_id": principal.key_id,
        "idempotency_key": idempotency_key, "request_hash": request_hash, "epsilon": body.privacy.epsilon,
        "confidence": plan.confidence, "metrics": list(plan.metrics), "n_validation": plan.n,
        "cost": cost_json(cost, budget, evaluation_formula(plan)), "status": "running",
    }  # fmt: skip

    def admit() -> None:
        """The evaluation, its reservation and its charge in one transaction (retried like a fit's admission)."""
        with db.write() as session:
            if session.get(Evaluation, evaluation_id) is not None:
                return
            confirm_access(session, principal, dataset)
            session.add(Evaluation(**row))
            session.flush()
            charge_evaluation(session, dataset.id, evaluation_id, cost, spender=principal.key_id,
                              description=f"evaluation of fit {job.id}: {', '.join(plan.metrics)}")  # fmt: skip

    try:
        db.retrying(admit, what="evaluation admission")
    except IntegrityError:
        replay = _replay(db, principal, idempotency_key, request_hash, include) if idempotency_key else None
        if replay is None:
            raise
        return replay
    # Charged: from here on the rows may be read, and the charge is kept whatever happens.
    try:
        X, y = db.retrying(lambda: store.get(str(dataset.validation_storage_key)), what="validation matrix")
        inputs = _inputs(dict(job.result or {}), dataset.schema_json["label"]["type"], X, y)
        released = release(plan, inputs, secure_generator())
    except DatasetStoreError:
        log.warning("evaluation failed: validation matrix unreadable", extra={"evaluation_id": evaluation_id})
        done = _finish(db, evaluation_id, status="failed", error={
            "type": "dataset_unavailable", "detail": "the validation rows could not be read (the dataset was deleted "
            "meanwhile or its store is unavailable); the charge is kept"})  # fmt: skip
        return _created(done, include)
    except Exception:  # a bug, not the rows' doing: the error quotes nothing and the charge is kept
        log.exception("evaluation failed", extra={"evaluation_id": evaluation_id})
        done = _finish(db, evaluation_id, status="failed", error={
            "type": "internal_error", "detail": "the evaluation failed on the server; the charge is kept"})  # fmt: skip
        return _created(done, include)
    done = _finish(db, evaluation_id, status="succeeded",
                   result={"metrics": [public_json(m.to_dict()) for m in released]})  # fmt: skip
    return _created(done, include)


class MetricPlanOut(BaseModel):
    """How one metric would be released: its share of ε, and the Laplace noise on its sum."""

    metric: str
    epsilon: float
    weight: float
    noise: str
    scale: float
    sensitivity: float


class EvaluationEstimateOut(FilterDryRunOut):
    """A dry run of an evaluation: its cost, each metric's mechanism, and what the dataset's filter would say.
    Nothing is charged and no row is read."""

    fit_id: str
    dataset_id: str
    n_validation: int
    metrics: list[MetricPlanOut]
    cost: CostOut


@router.post(
    "/{job_id:id}/evaluate/estimate", response_model=EvaluationEstimateOut, response_model_exclude_unset=True,
    summary="What an evaluation of this fit would cost and whether the budget admits it (charges nothing)",
    responses=problem_responses(
        400, 401, 403, 404, 409, 410, 413, 422, 503,
        s409="The fit has not succeeded or does not predict, or the dataset has no validation rows.",
        s410="The fit's dataset was deleted.",
    ),
)  # fmt: skip
def estimate_evaluation(
    job_id: FitId,
    body: EvaluationRequest,
    request: Request,
    include: RdpInclude,
    principal: Principal = Depends(require_role("owner", "analyst")),  # noqa: B008
) -> Any:
    db: Database = request.app.state.db
    job = visible_job(request, job_id, principal)
    dataset, plan, budget, cost = _public_plan(db, job, body, principal)

    def dry_run() -> Estimate:
        with db.read() as session:
            return estimate(session, dataset.id, cost, principal.key_id)

    dry = db.retrying(dry_run, what="evaluation estimate")
    total = sum(METRIC_WEIGHTS[m] for m in plan.metrics)
    metrics = [{"metric": m, "epsilon": plan.epsilons[m], "weight": METRIC_WEIGHTS[m] / total, "noise": plan.noise,
                "scale": plan.scale(m), "sensitivity": plan.sensitivity(m)} for m in plan.metrics]  # fmt: skip
    return public_json({"fit_id": job.id, "dataset_id": dataset.id, "n_validation": plan.n, "metrics": metrics,
                        "cost": lean_cost(cost_json(cost, budget, evaluation_formula(plan)), include), **asdict(dry),
                        "epsilon_max": budget.epsilon_max})  # fmt: skip


@router.get(
    "/{job_id:id}/evaluations", response_model=list[EvaluationOut], response_model_exclude_unset=True,
    summary="The private evaluations of a fit, oldest first, one page at a time (to whoever may see the fit)",
    responses={**paged(), **problem_responses(401, 404, 422, 503)},
)  # fmt: skip
def list_evaluations(
    job_id: FitId,
    request: Request,
    response: Response,
    include: RdpInclude,
    paging: Paging,
    principal: Principal = Depends(require_role("owner", "analyst", "admin")),  # noqa: B008
) -> Any:
    keyset: Keyset[Evaluation] = Keyset(paging, ("evaluations", job_id))
    db: Database = request.app.state.db
    job = visible_job(request, job_id, principal)

    def read() -> tuple[list[dict[str, Any]], str | None]:
        with db.read() as session:
            fetched = session.execute(keyset.select(select(Evaluation).where(Evaluation.job_id == job.id),
                                                    Evaluation.created_at, Evaluation.id)).scalars().all()  # fmt: skip
            rows, cursor = keyset.page(fetched, lambda evaluation: (evaluation.created_at, evaluation.id))
            return [_json(evaluation, include) for evaluation in rows], cursor

    evaluations, cursor = db.retrying(read, what="list evaluations")
    link_next(request, response, cursor)
    return evaluations

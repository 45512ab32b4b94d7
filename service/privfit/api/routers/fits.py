"""Fits: admission through the ledger (202 or 409), estimates, status and results, cancel, predict.

Every database access here is retried on transient faults (:meth:`privfit.db.Database.retrying`): reads, and the
admission transaction, which writes the job and its reservation together and is keyed by the new job's id (a retry
after a commit whose answer was lost finds the job and writes nothing). What still fails is a 503 with Retry-After
(:mod:`privfit.api.problems`); a client re-sends a fit with the same Idempotency-Key and gets the one fit.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import asdict
from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from privfit.datasets import DatasetSchema, encode_rows
from privfit.db import Budget, Database, Dataset, Job
from privfit.jobs import cancel
from privfit.ledger import budget_filter, delta_allowance, estimate, reserve
from privfit.privacy import DeltaAllowance, curve_to_json, get_grid, pure_epsilon_to_json
from privfit.solvers.base import (
    MIN_EPSILON,
    FitPlan,
    FitResult,
    PublicMetadata,
    SolverParameterError,
    label_mismatch,
)
from privfit.solvers.registry import get_solver

from ..auth import Principal, require_role, usable_dataset, visible_dataset
from ..encoding import public_json
from ..problems import Problem

router = APIRouter(prefix="/v1/fits", tags=["fits"])


class Privacy(BaseModel):
    """Either a target ε for this fit (calibrated at the dataset's δ) or nothing (explicit noise in params)."""

    model_config = {"extra": "forbid"}
    epsilon: float | None = Field(
        None, ge=MIN_EPSILON, le=100, description="Target ε ∈ [1e-6, 100] of this fit at the dataset's δ."
    )


class FitRequest(BaseModel):
    model_config = {"extra": "forbid"}
    dataset_id: str
    model: str = Field(
        "logistic",
        description="logistic | linear | huber | svm (GLMs); absolute | quantile (resque_dpsgd); mean | "
        "linear_loss (dp_lazy_oco). Which solvers take which model: GET /v1/solvers.",
    )
    solver: str = Field("dp_gd", description="A solver name from GET /v1/solvers.")
    privacy: Privacy = Field(default_factory=Privacy)
    params: dict[str, Any] = Field(default_factory=dict, description="Solver parameters (see GET /v1/solvers).")


def _meta(dataset: Dataset) -> PublicMetadata:
    return PublicMetadata(n=dataset.n, d=dataset.d, row_norm_bound=dataset.row_norm_bound,
                          label_bound=dataset.label_bound, feature_names=tuple(dataset.feature_names))  # fmt: skip


def _admission_inputs(db: Database, dataset_id: str, principal: Principal) -> tuple[Dataset, Budget, DeltaAllowance]:
    dataset = usable_dataset(db, dataset_id, principal)  # 410 for a deleted dataset
    with db.read() as session:
        budget = session.get_one(Budget, dataset.id)
        allowance = delta_allowance(session, dataset.id)
    return dataset, budget, allowance


def _plan(request: Request, body: FitRequest, principal: Principal) -> tuple[Dataset, Budget, FitPlan]:
    db: Database = request.app.state.db
    dataset, budget, allowance = db.retrying(
        lambda: _admission_inputs(db, body.dataset_id, principal), what="fit admission inputs"
    )
    settings = request.app.state.settings
    solver = get_solver(body.solver)
    if solver.experimental and not settings.enable_experimental_solvers:
        message = (f"solver {body.solver!r} is experimental and disabled on this server (an operator can enable it "
                   "with PRIVFIT_ENABLE_EXPERIMENTAL_SOLVERS=true)")  # fmt: skip
        raise SolverParameterError("solver", message)
    if "model" in body.params:  # it used to be silently replaced by the request's top-level model
        raise SolverParameterError("params.model", "give the model as the request's top-level 'model', not in params")
    label = dataset.schema_json["label"]
    mismatch = label_mismatch(body.model, label["name"], label["type"])
    if mismatch is not None:
        raise SolverParameterError("model", mismatch)
    solver = solver.with_operator_limits({"resque_localized_max_steps": settings.resque_localized_max_steps})
    params = {**body.params, "model": body.model}
    plan = solver.plan(params, _meta(dataset), target_epsilon=body.privacy.epsilon, delta=budget.delta_max,
                       grid=get_grid(budget.grid_name), delta_allowance=allowance)  # fmt: skip
    return dataset, budget, plan


def _cost_json(plan: FitPlan, budget: Budget) -> dict[str, Any]:
    """The fit's own ε (this fit alone, at the dataset's δ) and its share of the budget by the dataset's filter, as
    JSON (+∞, e.g. a δ part beyond the pot, is ``null``: the jobs table stores it)."""
    converted = plan.cost.epsilon(budget.delta_max)
    share = budget_filter(budget).measure(plan.cost)
    return public_json({
        "epsilon": converted.epsilon, "delta": budget.delta_max, "optimal_order": converted.optimal_order,
        "filter_epsilon": share.epsilon, "filter_share": share.share, "filter_certificate": share.certificate,
        "at_grid_edge": converted.at_grid_edge, "grid": budget.grid_name, "extra_delta": plan.cost.extra_delta,
        "approx_delta": plan.cost.approx_delta, "pure_epsilon": pure_epsilon_to_json(plan.cost.pure_epsilon),
        "rdp": curve_to_json(plan.cost.rdp), "formula_version": plan.resolved.formula_version,
    })  # fmt: skip


def _job_json(job: Job) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": job.id, "dataset_id": job.dataset_id, "solver": job.solver, "model": job.model, "status": job.status,
        "progress": job.progress, "cancel_requested": job.cancel_requested, "created_at": job.created_at,
        "started_at": job.started_at, "finished_at": job.finished_at, "settings": job.params, "cost": job.cost,
    }  # fmt: skip
    if job.result is not None:
        body["result"] = job.result
    if job.error is not None:
        body["error"] = job.error
    return body


def _request_hash(body: FitRequest) -> str:
    return hashlib.sha256(json.dumps(body.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


@router.post("", status_code=202, summary="Request a fit: admitted by the ledger (202) or refused (409)")
def create_fit(
    body: FitRequest,
    request: Request,
    idempotency_key: str | None = Header(None, max_length=200),
    principal: Principal = Depends(require_role("owner", "analyst")),  # noqa: B008
) -> JSONResponse:
    db: Database = request.app.state.db
    request_hash = _request_hash(body)
    if idempotency_key is not None:
        key = idempotency_key
        replay = db.retrying(lambda: _replay(db, principal, key, request_hash), what="fit replay")
        if replay is not None:
            return replay
    dataset, budget, plan = _plan(request, body, principal)
    job_id = str(uuid.uuid4())
    job_row = {
        "id": job_id, "dataset_id": dataset.id, "api_key_id": principal.key_id, "idempotency_key": idempotency_key,
        "request_hash": request_hash, "solver": body.solver, "model": body.model,
        "params": plan.resolved.model_dump(mode="json"), "cost": _cost_json(plan, budget), "status": "queued",
    }  # fmt: skip

    def admit() -> None:
        """The job and its reservation, in one transaction (the ledger's admission holds the budget row lock).
        Retried on transient faults: a try after one that committed (its answer lost with the connection) finds
        the job by its id, written in that same transaction with its reservation, and writes nothing."""
        with db.write() as session:
            if session.get(Job, job_id) is not None:
                return
            session.add(Job(**job_row))
            session.flush()
            reserve(session, dataset.id, job_id, plan.cost, description=f"{body.solver}/{body.model}")

    try:
        db.retrying(admit, what="fit admission")
    except IntegrityError:
        replay = _replay(db, principal, idempotency_key, request_hash) if idempotency_key else None
        if replay is None:
            raise
        return replay
    request.app.state.dispatcher.job_created(job_id)  # after the commit: a worker never sees a half-written job
    job = db.retrying(lambda: _read_job(db, job_id), what="read fit")
    return JSONResponse(_jsonable(_job_json(job)), status_code=202, headers={"Location": f"/v1/fits/{job_id}"})


def _read_job(db: Database, job_id: str) -> Job:
    with db.read() as session:
        return session.get_one(Job, job_id)


def _replay(db: Database, principal: Principal, key: str, request_hash: str) -> JSONResponse | None:
    with db.read() as session:
        job = session.execute(
            select(Job).where(Job.api_key_id == principal.key_id, Job.idempotency_key == key)
        ).scalar_one_or_none()
    if job is None:
        return None
    if job.request_hash != request_hash:
        raise Problem(409, "Idempotency key reused", "this Idempotency-Key was used with a different request body")
    return JSONResponse(_jsonable(_job_json(job)), status_code=202, headers={"Location": f"/v1/fits/{job.id}"})


def _jsonable(value: Any) -> Any:
    return public_json(value)


@router.post("/estimate", summary="The cost of a proposed fit and what would remain; nothing is charged")
def estimate_fit(
    body: FitRequest,
    request: Request,
    principal: Principal = Depends(require_role("owner", "analyst")),  # noqa: B008
) -> dict[str, Any]:
    dataset, budget, plan = _plan(request, body, principal)
    db: Database = request.app.state.db

    def dry_run() -> Any:
        with db.read() as session:
            return estimate(session, dataset.id, plan.cost)

    dry = db.retrying(dry_run, what="estimate")
    settings = plan.resolved.model_dump(mode="json")
    return public_json({"dataset_id": dataset.id, "cost": _cost_json(plan, budget), "settings": settings,
                        **asdict(dry), "epsilon_max": budget.epsilon_max})  # fmt: skip


def _visible_job(request: Request, job_id: str, principal: Principal) -> Job:
    db: Database = request.app.state.db
    return db.retrying(lambda: _visible_job_once(db, job_id, principal), what="read fit")


def _visible_job_once(db: Database, job_id: str, principal: Principal) -> Job:
    with db.read() as session:
        job = session.get(Job, job_id)
    if job is None:
        raise Problem(404, "Not Found", f"fit {job_id} does not exist")
    if principal.role != "admin" and job.api_key_id != principal.key_id:
        dataset = visible_dataset(db, job.dataset_id, principal, include_deleted=True)  # 404 for strangers
        if dataset.owner_key_id != principal.key_id:
            raise Problem(404, "Not Found", f"fit {job_id} does not exist")
    return job


@router.get("", summary="Fits of a dataset visible to the caller")
def list_fits(
    request: Request,
    dataset_id: str = Query(...),
    principal: Principal = Depends(require_role("owner", "analyst", "admin")),  # noqa: B008
) -> list[dict[str, Any]]:
    db: Database = request.app.state.db

    def read() -> list[dict[str, Any]]:
        dataset = visible_dataset(db, dataset_id, principal, include_deleted=True)
        query = select(Job).where(Job.dataset_id == dataset_id).order_by(Job.created_at)
        if principal.role == "analyst" and dataset.owner_key_id != principal.key_id:
            query = query.where(Job.api_key_id == principal.key_id)
        with db.read() as session:
            return [_job_json(job) for job in session.execute(query).scalars()]

    return _jsonable(db.retrying(read, what="list fits"))


@router.get("/{job_id}", summary="Status, data-independent progress, and the result when done")
def get_fit(job_id: str, request: Request,
            principal: Principal = Depends(require_role("owner", "analyst", "admin"))) -> dict[str, Any]:  # noqa: B008  # fmt: skip
    return _jsonable(_job_json(_visible_job(request, job_id, principal)))


@router.post("/{job_id}/cancel", summary="Cancel: queued → released; running → stops at its next step")
def cancel_fit(job_id: str, request: Request,
               principal: Principal = Depends(require_role("owner", "analyst", "admin"))) -> dict[str, Any]:  # noqa: B008  # fmt: skip
    job = _visible_job(request, job_id, principal)
    if job.status in ("queued", "running"):
        cancel(request.app.state.db, job.id)
    return get_fit(job_id, request, principal)


class PredictRequest(BaseModel):
    model_config = {"extra": "forbid"}
    rows: list[dict[str, Any]] = Field(..., min_length=1, max_length=100_000,
                                       description="Client-supplied rows: feature columns by name.")  # fmt: skip


@router.post("/{job_id}/predict", summary="Predict on client-supplied rows with a finished fit")
def predict(job_id: str, body: PredictRequest, request: Request,
            principal: Principal = Depends(require_role("owner", "analyst", "admin"))) -> dict[str, Any]:  # noqa: B008  # fmt: skip
    """Encode the rows with the dataset's schema (its transforms included) and apply the fit's model.

    ``scores`` are the raw ⟨θ, x⟩ + b; ``predictions`` are class names for a binary label, and for a numeric
    label values in the label's units clipped to its declared [lower, upper].
    """
    job = _visible_job(request, job_id, principal)
    if job.status != "succeeded" or job.result is None:
        raise Problem(409, "Fit not finished", f"fit {job_id} is {job.status}; predictions need a succeeded fit")
    if not job.result.get("predictor", True):
        raise Problem(409, "Not a predictor", f"fit {job_id} estimated a statistic of the features (model "
                      f"{job.model!r}); it does not predict labels")  # fmt: skip
    db: Database = request.app.state.db

    def read_dataset() -> Dataset | None:
        with db.read() as session:
            return session.get(Dataset, job.dataset_id)

    dataset = db.retrying(read_dataset, what="read dataset")
    if dataset is None or dataset.deleted_at is not None:
        raise Problem(410, "Dataset deleted", f"fit {job_id} was trained on dataset {job.dataset_id}, which was "
                      "deleted; its model no longer serves predictions")  # fmt: skip
    schema = DatasetSchema.model_validate(dataset.schema_json)
    encoded = encode_rows(body.rows, schema)
    result = FitResult(**{k: job.result[k] for k in ("solver", "model", "coefficients", "intercept")})
    scores = result.decision_function(encoded.X)
    predictions = result.predict(encoded.X)
    decoded = schema.label.decode(predictions)
    out: dict[str, Any] = {"fit_id": job_id, "n": int(encoded.n), "scores": [float(s) for s in scores]}
    out["predictions"] = [v if isinstance(v, str) else float(v) for v in np.asarray(decoded, dtype=object).tolist()]
    return out

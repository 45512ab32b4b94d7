"""Fits: admission through the ledger (202 or 409), estimates, status and results, cancel, predict.

Every database access here is retried on transient faults (:meth:`privfit.db.Database.retrying`): reads, and the
admission transaction, which writes the job and its reservation together and is keyed by the new job's id (a retry
after a commit whose answer was lost finds the job and writes nothing). What still fails is a 503 with Retry-After
(:mod:`privfit.api.problems`); a client re-sends a fit with the same Idempotency-Key and gets the one fit.

A fit is visible to the key that requested it, the dataset's owner and admins; to anyone else a fit that exists
answers exactly like one that does not (:func:`~privfit.api.problems.fit_not_found`), and nothing in the answer
names its dataset.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Collection, Hashable
from dataclasses import asdict
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Select, String, bindparam, func, or_, select, true
from sqlalchemy.exc import IntegrityError

from privfit.datasets import BinaryLabel, CategoricalLabel, DatasetSchema, encode_rows
from privfit.db import Budget, Database, Dataset, DatasetGrant, Job
from privfit.db.models import Allocation
from privfit.errors import ParameterError
from privfit.jobs import cancel
from privfit.jobs.metadata import public_metadata
from privfit.ledger import BudgetExceededError, Gates, allowance_for, budget_filter, estimate_for, read_allocation
from privfit.ledger.headroom import Headroom
from privfit.privacy import (
    DeltaAllowance,
    PrivacyCost,
    curve_to_json,
    get_grid,
    pure_epsilon_to_json,
    unbounded_to_json,
)
from privfit.solvers.availability import available_solver
from privfit.solvers.base import (
    MIN_EPSILON,
    AnySolver,
    FitPlan,
    FitResult,
    NoiseOutlook,
    PublicMetadata,
    SolverParameterError,
    label_mismatch,
    partitioned_solvers,
    resolved_metadata,
)
from privfit.solvers.registry import get_solver, solver_names

from ..admission import Admission, AdmissionGroups
from ..auth import Principal, authenticate, check_usable, check_visible, require_role, visible_dataset
from ..encoding import UtcDateTime, public_json
from ..events import EVENT_STREAM_RETRY_AFTER_SECONDS, EventStreams, fit_event_stream
from ..headroom import MAX_ADMISSIBLE_EPSILON_HELP, fit_headroom
from ..idempotency import IdempotencyKey, replayed
from ..identifiers import ResourceId, id_path, is_resource_id, normalize_id
from ..include import FitInclude, RdpInclude, lean_cost, lean_fit
from ..pagination import Keyset, Paging, link_next, paged, query_problem
from ..planning import EstimateCache, PlannedFit, filters_key, plan_key
from ..problems import Problem, dataset_not_found, fit_not_found, problem_responses
from .datasets import CERTIFICATE_HELP

router = APIRouter(prefix="/v1/fits", tags=["fits"])

#: The media type of ``GET /v1/fits/{id}/model.onnx`` (privfit.api.onnx_export builds the model).
ONNX_MEDIA_TYPE = "application/octet-stream"


class Privacy(BaseModel):
    """Either a target ε for this fit (calibrated at the dataset's δ) or nothing (explicit noise in params)."""

    model_config = {"extra": "forbid"}
    epsilon: float | None = Field(
        None, ge=MIN_EPSILON, le=100, description="Target ε ∈ [1e-6, 100] of this fit at the dataset's δ."
    )


class FitRequest(BaseModel):
    model_config = {"extra": "forbid"}
    dataset_id: ResourceId
    model: str = Field(
        "logistic",
        description="logistic | linear | huber | svm (GLMs); absolute | quantile (resque_dpsgd); mean | "
        "linear_loss (dp_lazy_oco). Which solvers take which model: GET /v1/solvers.",
    )
    solver: str = Field(
        "dp_gd", description="A solver name from GET /v1/solvers whose `available` is true (another: 422 on solver)."
    )
    privacy: Privacy = Field(default_factory=Privacy)
    params: dict[str, Any] = Field(default_factory=dict, description="Solver parameters (see GET /v1/solvers).")


# A float that may be +∞ (no finite bound, not admissible) is written as null.
Unbounded = Annotated[float | None, Field(description="null stands for +∞ (no finite bound)")]


class CostOut(BaseModel):
    """A fit's privacy cost: its own ε at the dataset's δ (this fit alone), its share of the budget by the dataset's
    filter, δ parts, pure-ε bound, Gaussian-DP μ² and, with ``?include=rdp``, its RDP curve (null = +∞ at that
    order). Fits admitted by older versions may lack some members."""

    model_config = ConfigDict(extra="allow")

    epsilon: Unbounded = None
    delta: float | None = None
    optimal_order: Unbounded = None
    filter_epsilon: Unbounded = None
    filter_share: Unbounded = None
    filter_certificate: str | None = Field(None, description=CERTIFICATE_HELP)
    at_grid_edge: bool | None = None
    grid: str | None = None
    extra_delta: float | None = None
    approx_delta: float | None = None
    pure_epsilon: Unbounded = None
    gdp_mu_squared: Unbounded = Field(
        None,
        description="The sum of μ² over the fit's Gaussian-DP releases (null stands for +∞: the fit is not made of "
        "Gaussian releases only; absent from fits admitted before the Gaussian-DP certificate existed).",
    )
    rdp: list[float | None] | None = Field(
        None,
        description="Only with ?include=rdp: ε(α) at each order α of the grid named by `grid` (null = +∞ at that "
        "order); GET /v1/fits/{id}/privacy returns it with the orders.",
    )
    formula_version: str | None = None


class FitError(BaseModel):
    """Why a fit failed or was cancelled; never a row value (DESIGN §1.3)."""

    model_config = ConfigDict(extra="allow")

    type: str
    detail: str


_OUTLOOK = (
    "How noise-dominated the fit is expected to be, from its public settings only (computed before any row is read): "
    "the expected norm of the noise in the released parameters against the public radius of the parameters, a level "
    "and, when high, a warning that the fit is likely no better than a constant model. null when the solver has no "
    "such prediction."
)


class FitOut(BaseModel):
    """A fit: status, data-independent progress, the resolved settings, its cost and, once succeeded, its result
    (present only then); ``error`` only when it failed or was cancelled."""

    id: str
    dataset_id: str
    solver: str
    model: str
    status: str = Field(description="queued | running | succeeded | failed | cancelled")
    progress: float
    cancel_requested: bool
    created_at: UtcDateTime
    started_at: UtcDateTime | None
    finished_at: UtcDateTime | None
    settings: dict[str, Any] = Field(description="The solver's resolved public settings (every noise scale).")
    cost: CostOut
    result: dict[str, Any] | None = Field(
        None,
        description="The release: solver, model, coefficients, intercept, feature_names, metadata, predictor. "
        "`metadata` lists what the release adds to `settings` (the whole metadata is `settings` overlaid with it); "
        "?include=metadata returns it whole.",
    )
    error: FitError | None = None
    outlook: NoiseOutlook | None = Field(None, description=_OUTLOOK)


class FitPrivacyOut(CostOut):
    """A fit's whole privacy cost, its RDP curve included, with the orders of the grid the curve is given at: what a
    client needs to plot ε(α) without knowing the grid."""

    fit_id: str
    orders: list[float] | None = Field(
        None,
        description="The orders α of the grid named by `grid`, one per entry of `rdp` (null when the cost names no "
        "grid this server knows).",
    )


class AllocationDryRunOut(BaseModel):
    """What a cost would do to the caller's allocation (:class:`privfit.ledger.AllocationEstimate`)."""

    epsilon_max: float
    delta_max: float
    committed_epsilon_before: Unbounded
    committed_epsilon_after: Unbounded
    remaining_epsilon_after: Unbounded
    admissible: bool


class FilterDryRunOut(BaseModel):
    """What admitting a cost would do by the dataset's filter (:class:`privfit.ledger.Estimate`); nothing is written."""

    epsilon: Unbounded
    optimal_order: Unbounded
    at_grid_edge: bool
    committed_epsilon_before: Unbounded
    committed_epsilon_after: Unbounded
    remaining_epsilon_after: Unbounded
    admissible: bool
    refusal_reason: str | None = Field(
        description="epsilon | delta | closed when the dataset's filter refuses; allocation when only the caller's "
        "allocation refuses."
    )
    delta_used_after: Unbounded
    certificate_after: str | None = Field(description=CERTIFICATE_HELP)
    measure: str
    epsilon_max: float
    allocation: AllocationDryRunOut | None = Field(
        None,
        description="The caller's allocation of this dataset's budget, if the owner gave it one: its filter's "
        "measure of the caller's own committed fits before and after this one (null: no allocation; the caller "
        "spends from the dataset's budget alone).",
    )


class EstimateOut(FilterDryRunOut):
    """A dry run: the cost of a proposed fit and what would remain by the dataset's filter; nothing is charged."""

    dataset_id: str
    cost: CostOut
    settings: dict[str, Any]
    outlook: NoiseOutlook | None = Field(description=_OUTLOOK)
    max_admissible_epsilon: float = Field(description=MAX_ADMISSIBLE_EPSILON_HELP)


class PredictionOut(BaseModel):
    fit_id: str
    n: int
    scores: list[float] | list[list[float]] = Field(
        description="⟨θ, x⟩ + b per row; for a multiclass fit, the k class logits Θx + b per row."
    )
    predictions: list[str | float] = Field(description="Decoded labels: class names or numbers.")
    classes: list[str] | None = Field(
        None,
        description="Logistic fits only: the class names, in the order of 'probabilities' (and of 'scores' for a "
        "multiclass fit); [negative, positive] for a binary label.",
    )
    probabilities: list[list[float]] | None = Field(
        None,
        description="Logistic fits only: per row, the class probabilities (sum to 1): softmax(Θx + b) for a multiclass "
        "fit, (σ(−score), σ(score)) for a binary one.",
    )


def _admission_inputs_query() -> Select[Any]:
    """The statement of :func:`_admission_inputs`, built once (its SQL and cache key are reused by every request):
    the dataset ``:dataset_id``, the budget of its privacy domain, the allocation of the key ``:key_id`` on that
    domain (:func:`~privfit.ledger.read_allocation`'s row) and whether that key holds a grant on the dataset."""
    domain = func.coalesce(Dataset.budget_dataset_id, Dataset.id)
    key_id = bindparam("key_id", type_=String)
    granted = (
        select(DatasetGrant.id)
        .where(DatasetGrant.dataset_id == Dataset.id, DatasetGrant.api_key_id == key_id)
        .exists()
        .label("granted")
    )
    return (
        select(Dataset, Budget, Allocation, granted)
        .outerjoin(Budget, Budget.dataset_id == domain)
        .outerjoin(Allocation, (Allocation.dataset_id == domain) & (Allocation.api_key_id == key_id))
        .where(Dataset.id == bindparam("dataset_id", type_=String))
    )


_ADMISSION_INPUTS = _admission_inputs_query()


def _admission_inputs(db: Database, dataset_id: str, principal: Principal) -> tuple[Dataset, Gates]:
    """The dataset (visible to ``principal``, 410 if deleted: :func:`~privfit.api.auth.usable_dataset`'s rule), its
    budget and the caller's allocation on it, read in ONE statement (every estimate and admission runs it: one
    round trip instead of three or four; the grant it reads is consulted only for a caller who is neither the
    dataset's owner nor an admin, as :func:`~privfit.api.auth.visible_dataset` does)."""
    if not is_resource_id(dataset_id):
        raise dataset_not_found(dataset_id)
    with db.read() as session:
        params = {"dataset_id": normalize_id(dataset_id), "key_id": principal.key_id}
        row = session.execute(_ADMISSION_INPUTS, params).one_or_none()
        if row is None:
            raise dataset_not_found(dataset_id)
        dataset = check_visible(row.Dataset, dataset_id, principal, lambda _: bool(row.granted), include_deleted=True)
        check_usable(dataset, dataset_id)
        budget = row.Budget if row.Budget is not None else session.get_one(Budget, dataset.domain_id)
        return dataset, Gates(budget, row.Allocation)


def _plan(
    request: Request, body: FitRequest, principal: Principal
) -> tuple[Dataset, Gates, PlannedFit, tuple[Hashable, ...]]:
    """Read the dataset and its budget, check the request against them, and plan the fit: from the process's
    :class:`~privfit.api.planning.PlanCache` when the same public inputs were planned before (identical results;
    the key is every public input of the plan, :func:`~privfit.api.planning.plan_key`, returned last)."""
    db: Database = request.app.state.db
    dataset, gates = db.retrying(lambda: _admission_inputs(db, body.dataset_id, principal), what="fit admission inputs")
    budget = gates.budget
    settings = request.app.state.settings
    # the catalogue's availability rule (GET /v1/solvers): an unknown or unavailable solver is a 422 on "solver"
    solver = available_solver(body.solver, experimental_enabled=settings.enable_experimental_solvers)
    if "model" in body.params:  # it used to be silently replaced by the request's top-level model
        raise SolverParameterError("params.model", "give the model as the request's top-level 'model', not in params")
    label = dataset.schema_json["label"]
    mismatch = label_mismatch(body.model, label["name"], label["type"])
    if mismatch is not None:
        raise SolverParameterError("model", mismatch)
    if not solver.supports_partitions and matrix_bytes(dataset) > settings.max_matrix_bytes:
        raise SolverParameterError(
            "solver", f"dataset {dataset.id}'s encoded matrix, n·(d + 1)·8 = {matrix_bytes(dataset)} bytes, is over "
            f"max_matrix_bytes = {settings.max_matrix_bytes}: it is stored by partitions, and solver {body.solver!r} "
            f"reads a dataset into memory. The solvers that fit it partition by partition are "
            f"{', '.join(partitioned_solvers())}",
        )  # fmt: skip
    limits = _operator_limits(request)
    solver = solver.with_operator_limits(limits)
    params = {**body.params, "model": body.model}
    meta = public_metadata(dataset)
    allowance = allowance_for(budget, gates.allocation) if solver.uses_delta_parts else None  # read only then

    def compute() -> PlannedFit:
        return planned_fit(solver, params, meta, body.privacy.epsilon, budget, allowance)

    key = plan_key(body.solver, body.model, params, body.privacy.epsilon, meta, budget, allowance,
                   tuple(sorted(limits.items())))  # fmt: skip
    return dataset, gates, request.app.state.plans.get(key, compute), key


def matrix_bytes(dataset: Dataset) -> int:
    """The bytes of ``dataset``'s encoded matrix as the upload cap counts them, n·(d + 1)·8 (public)."""
    return int(dataset.n) * (int(dataset.d) + 1) * 8


def _operator_limits(request: Request) -> dict[str, Any]:
    """The operator's limits a plan is subject to (public inputs of every plan and search)."""
    return {"resque_localized_max_steps": request.app.state.settings.resque_localized_max_steps}


def _headroom(request: Request, body: FitRequest, dataset: Dataset, gates: Gates) -> Headroom:
    """The largest target ε at which the filters of ``gates`` (as read: the budget and the caller's allocation)
    admit the request's solver, model and parameters (:mod:`privfit.api.headroom`; cached by public inputs). Runs
    after :func:`_plan` accepted the request, so the solver is available and the model fits the label."""
    settings = request.app.state.settings
    limits = _operator_limits(request)
    solver = available_solver(body.solver, experimental_enabled=settings.enable_experimental_solvers)
    solver = solver.with_operator_limits(limits)
    allowance = allowance_for(gates.budget, gates.allocation) if solver.uses_delta_parts else None
    params = {**body.params, "model": body.model}
    return fit_headroom(request.app.state.headroom, solver, params, public_metadata(dataset),
                        gates, allowance, tuple(sorted(limits.items())))  # fmt: skip


def _headroom_now(request: Request, body: FitRequest, dataset: Dataset, principal: Principal) -> Headroom:
    """:func:`_headroom` against the budget and the caller's allocation as they are now: read again after a
    refusal, so their committed costs hold every fit the refusal counted (and any admitted since)."""
    db: Database = request.app.state.db

    def read() -> Gates:
        with db.read() as session:
            budget = session.get_one(Budget, dataset.domain_id)
            return Gates(budget, read_allocation(session, dataset.id, principal.key_id))

    return _headroom(request, body, dataset, db.retrying(read, what="read budget"))


def planned_fit(
    solver: AnySolver,
    params: dict[str, Any],
    meta: PublicMetadata,
    target_epsilon: float | None,
    budget: Budget,
    allowance: DeltaAllowance | None,
) -> PlannedFit:
    """Plan a fit (validate, resolve — calibrate the noise —, cost) and render what an estimate or an admission
    shows of it: the work of a plan-cache miss, from public inputs only. ``benchmarks/request_cost.py`` times this
    very function over every solver's parameter space (issue 35: at most 1 s of CPU per plan)."""
    plan = solver.plan(params, meta, target_epsilon=target_epsilon, delta=budget.delta_max,
                       grid=get_grid(budget.grid_name), delta_allowance=allowance)  # fmt: skip
    settings_json = plan.resolved.model_dump(mode="json")
    return PlannedFit(plan, cost=_cost_json(plan, budget), settings=settings_json,
                      outlook=_outlook_json(solver.outlook(plan.resolved, meta)),
                      stored_outlook=_stored_outlook(solver.name, settings_json))  # fmt: skip


def cost_json(cost: PrivacyCost, budget: Budget, formula_version: str) -> dict[str, Any]:
    """A cost's own ε (alone, at the dataset's δ) and its share of the budget by the dataset's filter, as JSON (+∞,
    e.g. a δ part beyond the pot, is ``null``: the jobs and evaluations tables store it)."""
    converted = cost.epsilon(budget.delta_max)
    share = budget_filter(budget).measure(cost)
    return public_json({
        "epsilon": converted.epsilon, "delta": budget.delta_max, "optimal_order": converted.optimal_order,
        "filter_epsilon": share.epsilon, "filter_share": share.share, "filter_certificate": share.certificate,
        "at_grid_edge": converted.at_grid_edge, "grid": budget.grid_name, "extra_delta": cost.extra_delta,
        "approx_delta": cost.approx_delta, "pure_epsilon": pure_epsilon_to_json(cost.pure_epsilon),
        "gdp_mu_squared": unbounded_to_json(cost.gdp_mu_squared), "rdp": curve_to_json(cost.rdp),
        "formula_version": formula_version,
    })  # fmt: skip


def _cost_json(plan: FitPlan, budget: Budget) -> dict[str, Any]:
    """The fit's cost as JSON (:func:`cost_json`)."""
    return cost_json(plan.cost, budget, plan.resolved.formula_version)


def _outlook_json(outlook: NoiseOutlook | None) -> dict[str, Any] | None:
    return None if outlook is None else outlook.model_dump(mode="json")


def _stored_outlook(solver_name: str, settings: dict[str, Any]) -> dict[str, Any] | None:
    """A fit's outlook, recomputed on read from its stored resolved settings and the public metadata they record
    (no migration, no dataset read); None when the solver has none or the settings no longer load (a fit of a
    retired solver or formula version)."""
    try:
        solver = get_solver(solver_name)
        resolved = solver.load_resolved(settings)
        return _outlook_json(solver.outlook(resolved, resolved_metadata(resolved)))
    except ParameterError:
        return None


def _job_json(job: Job) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": job.id, "dataset_id": job.dataset_id, "solver": job.solver, "model": job.model, "status": job.status,
        "progress": job.progress, "cancel_requested": job.cancel_requested, "created_at": job.created_at,
        "started_at": job.started_at, "finished_at": job.finished_at, "settings": job.params, "cost": job.cost,
        "outlook": _stored_outlook(job.solver, job.params),
    }  # fmt: skip
    if job.result is not None:
        body["result"] = job.result
    if job.error is not None:
        body["error"] = job.error
    return body


def _admitted_json(job: Job, planned: PlannedFit) -> dict[str, Any]:
    """``_jsonable(_job_json(job))`` of a fit just admitted with ``planned``: the same document, with its settings,
    cost and outlook taken from the plan cache's JSON (already public JSON) instead of being encoded again."""
    heavy = {"settings": planned.settings, "cost": planned.cost, "outlook": planned.stored_outlook}
    light = _jsonable({
        "id": job.id, "dataset_id": job.dataset_id, "solver": job.solver, "model": job.model, "status": job.status,
        "progress": job.progress, "cancel_requested": job.cancel_requested, "created_at": job.created_at,
        "started_at": job.started_at, "finished_at": job.finished_at,
    })  # fmt: skip
    return {**light, **heavy}


def _request_hash(body: FitRequest) -> str:
    return hashlib.sha256(json.dumps(body.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


_FIT_HEADERS = {"Location": {"description": "The fit's URL.", "schema": {"type": "string"}}}


@router.post("", status_code=202, response_model=FitOut, response_model_exclude_unset=True,
             summary="Request a fit: admitted by the ledger (202) or refused (409)",
             responses={
                 202: {"headers": _FIT_HEADERS},
                 **problem_responses(
                     400, 401, 403, 404, 409, 410, 413, 422, 503,
                     s409="The ledger refused the fit (privacy budget exceeded; nothing was charged) or the "
                     "Idempotency-Key was used with another request body.",
                     s410="The dataset was deleted: it cannot be fitted any more.",
                 ),
             })  # fmt: skip
def create_fit(
    body: FitRequest,
    request: Request,
    include: FitInclude,
    idempotency_key: IdempotencyKey = None,
    principal: Principal = Depends(require_role("owner", "analyst")),  # noqa: B008
) -> JSONResponse:
    db: Database = request.app.state.db
    request_hash = _request_hash(body)
    if idempotency_key is not None:
        key = idempotency_key
        replay = db.retrying(lambda: _replay(db, principal, key, request_hash, include), what="fit replay")
        if replay is not None:
            return replay
    dataset, _, planned, _ = _plan(request, body, principal)
    job_id = str(uuid.uuid4())
    # every column the response shows is set here, so the committed row is answered without reading it back
    job_row = {
        "id": job_id, "dataset_id": dataset.id, "api_key_id": principal.key_id, "idempotency_key": idempotency_key,
        "request_hash": request_hash, "solver": body.solver, "model": body.model, "params": planned.settings,
        "cost": planned.cost, "status": "queued", "progress": 0.0, "cancel_requested": False, "started_at": None,
        "finished_at": None, "result": None, "error": None,
    }  # fmt: skip

    # the job and its reservation, in one transaction shared with the other admissions to the dataset waiting
    # meanwhile (privfit.api.admission). Retried on transient faults: a try after one that committed (its answer
    # lost with the connection) finds the job by its id, written with its reservation, and writes nothing.
    admission = Admission(job=job_row, principal=principal, dataset=dataset, cost=planned.plan.cost,
                          description=f"{body.solver}/{body.model}")  # fmt: skip
    admissions: AdmissionGroups = request.app.state.admissions
    try:
        job = db.retrying(lambda: admissions.run(admission), what="fit admission")
    except BudgetExceededError as refused:  # the 409 says what this fit could have now
        refused.state_headroom(_headroom_now(request, body, dataset, principal).epsilon)
        raise
    except IntegrityError:
        replay = _replay(db, principal, idempotency_key, request_hash, include) if idempotency_key else None
        if replay is None:
            raise
        return replay
    request.app.state.dispatcher.job_created(job_id)  # after the commit: a worker never sees a half-written job
    admitted = lean_fit(_admitted_json(job, planned), include)
    return JSONResponse(admitted, status_code=202, headers={"Location": f"/v1/fits/{job_id}"})


def _replay(
    db: Database, principal: Principal, key: str, request_hash: str, include: Collection[str]
) -> JSONResponse | None:
    job = replayed(db, Job, principal, key, request_hash)
    if job is None:
        return None
    body = lean_fit(_jsonable(_job_json(job)), include)
    return JSONResponse(body, status_code=202, headers={"Location": f"/v1/fits/{job.id}"})


def _jsonable(value: Any) -> Any:
    return public_json(value)


@router.post("/estimate", response_model=EstimateOut,
             summary="The cost of a proposed fit and what would remain; nothing is charged",
             responses=problem_responses(400, 401, 403, 404, 410, 413, 422, 503,
                                         s410="The dataset was deleted: it cannot be fitted any more."))  # fmt: skip
def estimate_fit(
    body: FitRequest,
    request: Request,
    include: RdpInclude,
    principal: Principal = Depends(require_role("owner", "analyst")),  # noqa: B008
) -> Any:
    dataset, gates, planned, key = _plan(request, body, principal)

    def render() -> bytes:
        # the budget and allocation read with the plan's inputs, in one transaction
        dry = estimate_for(gates.budget, planned.plan.cost, gates.allocation)
        headroom = _headroom(request, body, dataset, gates)
        # the document of EstimateOut, in its field order; the plan's parts are cached public JSON already
        return bytes(JSONResponse({**public_json({**asdict(dry), "epsilon_max": gates.budget.epsilon_max}),
                                   "dataset_id": dataset.id, "cost": lean_cost(planned.cost, include),
                                   "settings": planned.settings, "outlook": planned.outlook,
                                   "max_admissible_epsilon": headroom.epsilon}).body)  # fmt: skip

    # every input of the answer: the plan's, the filters as just read (their committed state), the dataset, the
    # parts asked for (api/planning.py, EstimateCache)
    estimates: EstimateCache = request.app.state.estimates
    answer = estimates.get((key, filters_key(gates), dataset.id, "rdp" in include), render)
    return Response(answer, media_type="application/json")


def visible_job(request: Request, job_id: str, principal: Principal) -> Job:
    """The fit if ``principal`` may see it: the key that requested it, the dataset's owner (even after deleting the
    dataset) and admins. Anything else — a malformed id (never sent to the database), an unknown id, another's fit
    — is the same :func:`fit_not_found`; in particular nothing reveals the fit's dataset."""
    if not is_resource_id(job_id):
        raise fit_not_found(job_id)
    db: Database = request.app.state.db
    return db.retrying(lambda: _visible_job_once(db, job_id, principal), what="read fit")


def _visible_job_once(db: Database, job_id: str, principal: Principal) -> Job:
    with db.read() as session:
        job = session.get(Job, normalize_id(job_id))
        if job is None:
            raise fit_not_found(job_id)
        if principal.role == "admin" or job.api_key_id == principal.key_id:
            return job
        dataset = session.get(Dataset, job.dataset_id)
    if dataset is None or dataset.owner_key_id != principal.key_id:
        raise fit_not_found(job_id)
    return job


FitId = Annotated[str, id_path("fit")]


def visible_fits(principal: Principal) -> Any:
    """The condition on ``jobs`` of the fits ``principal`` may see — exactly those :func:`visible_job` shows it:
    admins every fit; an owner the fits on the datasets it owns (deleted ones included) and those it requested;
    an analyst those it requested (an analyst owns no dataset: only owners upload)."""
    if principal.role == "admin":
        return true()
    own = Job.api_key_id == principal.key_id
    if principal.role == "analyst":
        return own  # the (api_key_id, created_at, id) index pages it
    return or_(own, Job.dataset_id.in_(select(Dataset.id).where(Dataset.owner_key_id == principal.key_id)))


FitStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]


@router.get(
    "",
    response_model=list[FitOut],
    response_model_exclude_unset=True,
    summary="The fits visible to the caller, oldest first, one page at a time: a dataset's (dataset_id) or all, "
    "filtered by status and solver",
    responses={**paged(), **problem_responses(401, 404, 422, 503)},
)
def list_fits(
    request: Request,
    response: Response,
    include: FitInclude,
    paging: Paging,
    dataset_id: Annotated[
        ResourceId | None,
        Query(
            description="Only this dataset's fits (404 if the caller may not see the dataset). Without it: every "
            "fit the caller may see — an analyst's own, an owner's on its datasets, all to admins."
        ),
    ] = None,
    status: Annotated[FitStatus | None, Query(description="Only the fits in this status.")] = None,
    solver: Annotated[
        str | None,
        Query(
            max_length=64,
            description="Only the fits of this solver (a name of GET /v1/solvers; another is a 422 naming `solver`).",
            json_schema_extra={"enum": list(solver_names())},
        ),
    ] = None,
    principal: Principal = Depends(require_role("owner", "analyst", "admin")),  # noqa: B008
) -> Any:
    """Who sees what is who may open the fit (`GET /v1/fits/{id}`): the key that requested it, the dataset's owner
    and admins. With `dataset_id`, a granted analyst lists its own fits on the dataset. Paged by `limit` and
    `cursor`; the next page is in the `Link` header (rel="next"), absent on the last page."""
    db: Database = request.app.state.db
    if solver is not None and solver not in solver_names():
        raise query_problem("solver", f"unknown solver {solver!r}; the solvers are {', '.join(solver_names())}")
    keyset: Keyset[Job] = Keyset(paging, ("fits", dataset_id, status, solver))

    def read() -> tuple[list[dict[str, Any]], str | None]:
        query = select(Job)
        if dataset_id is None:
            query = query.where(visible_fits(principal))
        else:
            dataset = visible_dataset(db, dataset_id, principal, include_deleted=True)
            query = query.where(Job.dataset_id == dataset.id)
            if principal.role == "analyst" and dataset.owner_key_id != principal.key_id:
                query = query.where(Job.api_key_id == principal.key_id)
        if status is not None:
            query = query.where(Job.status == status)
        if solver is not None:
            query = query.where(Job.solver == solver)
        with db.read() as session:
            rows = session.execute(keyset.select(query, Job.created_at, Job.id)).scalars().all()
            jobs, cursor = keyset.page(rows, lambda job: (job.created_at, job.id))
            return [_job_json(job) for job in jobs], cursor

    fits, cursor = db.retrying(read, what="list fits")
    link_next(request, response, cursor)
    return [lean_fit(fit, include) for fit in _jsonable(fits)]


@router.get("/{job_id:id}", response_model=FitOut, response_model_exclude_unset=True,
            summary="Status, data-independent progress, and the result when done",
            responses=problem_responses(401, 404, 422, 503))  # fmt: skip
def get_fit(job_id: FitId, request: Request, include: FitInclude,
            principal: Principal = Depends(require_role("owner", "analyst", "admin"))) -> Any:  # noqa: B008  # fmt: skip
    return lean_fit(_jsonable(_job_json(visible_job(request, job_id, principal))), include)


@router.get(
    "/{job_id:id}/events",
    response_class=StreamingResponse,
    summary="The fit's status and progress as Server-Sent Events, closing at a terminal state",
    responses={
        **problem_responses(401, 404, 422, 429, 503, s429="Every event stream slot of this API process is taken "
                            "(max_event_streams): poll GET /v1/fits/{id} or retry after Retry-After seconds."),
        200: {"description": "text/event-stream: `event: fit` with the fit's JSON (as GET /v1/fits/{id}) when the "
              "stream opens and at each change of status, progress or cancel request; `event: end` with a reason "
              "(finished, timeout, server_stopping) before it closes; `: keep-alive` comments in between.",
              "content": {"text/event-stream": {"schema": {"type": "string"}}}},
    },
)  # fmt: skip
async def fit_events(job_id: FitId, request: Request, include: FitInclude,
                     principal: Principal = Depends(require_role("owner", "analyst", "admin"))) -> Any:  # noqa: B008  # fmt: skip
    # Visibility first (a 404 as for GET /v1/fits/{id}), then a slot (429 beyond max_event_streams); the stream reads
    # the fit's row every event_poll_seconds in the threadpool (api/events.py). (A comment, not a docstring: a
    # docstring would become the operation's public OpenAPI description.)
    job = await run_in_threadpool(visible_job, request, job_id, principal)
    streams: EventStreams = request.app.state.event_streams
    free = streams.admit()
    if free is None:
        raise HTTPException(429, f"{streams.active} fit event streams are open in this process (max_event_streams = "
                            f"{streams.limit}); poll GET /v1/fits/{job.id} or retry later",
                            headers={"Retry-After": str(EVENT_STREAM_RETRY_AFTER_SECONDS)})  # fmt: skip

    def read_fit() -> dict[str, Any] | None:
        # the key is checked again at every poll, as every request is: a key revoked (or a grant withdrawn) while its
        # stream is open ends the stream (None) instead of showing the fit any longer. The key and the visibility are
        # checked AFTER the fit is read, so a state written by the revocation itself (its queued fits cancelled) is
        # never sent to the key it revoked.
        try:
            fit = lean_fit(_jsonable(_job_json(visible_job(request, job.id, principal))), include)
            authenticate(request.app.state.db, request.headers.get("authorization"))
            visible_job(request, job.id, principal)
            return fit
        except Problem:
            return None

    return StreamingResponse(fit_event_stream(request, streams, free, read_fit), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})  # fmt: skip


@router.get("/{job_id:id}/privacy", response_model=FitPrivacyOut, response_model_exclude_unset=True,
            summary="A fit's privacy cost with its whole RDP curve and the orders of its grid",
            responses=problem_responses(401, 404, 503))  # fmt: skip
def fit_privacy(job_id: FitId, request: Request,
                principal: Principal = Depends(require_role("owner", "analyst", "admin"))) -> Any:  # noqa: B008  # fmt: skip
    """The fit's cost as stored when it was admitted — the `cost` of `GET /v1/fits/{id}?include=rdp` — and the
    grid's orders α, one per entry of `rdp` (null = +∞ at that order). Visible to whoever may see the fit."""
    job = visible_job(request, job_id, principal)
    cost: dict[str, Any] = dict(job.cost or {})
    try:
        orders: list[float] | None = [float(a) for a in get_grid(str(cost.get("grid"))).orders]
    except ParameterError:  # a cost without a grid, or with one this server no longer has
        orders = None
    return _jsonable({"fit_id": job.id, **cost, "orders": orders})


@router.post("/{job_id:id}/cancel", response_model=FitOut, response_model_exclude_unset=True,
             summary="Cancel: queued → released; running → stops at its next step",
             responses=problem_responses(401, 404, 409, 422, 503, s409="The fit had already finished (succeeded or "
                                         "failed): nothing was changed."))  # fmt: skip
def cancel_fit(job_id: FitId, request: Request, include: FitInclude,
               principal: Principal = Depends(require_role("owner", "analyst", "admin"))) -> Any:  # noqa: B008  # fmt: skip
    """A queued fit is cancelled at once (its reservation released); a running one is asked to stop (200, status
    still ``running`` with ``cancel_requested``). Asking again, or cancelling a cancelled fit, is a harmless 200 (the
    client retries a cancel whose answer was lost). A fit that had already succeeded or failed — also one that
    finished while this request was on its way — is a 409 naming its status: nothing changed."""
    job = visible_job(request, job_id, principal)
    status = cancel(request.app.state.db, job.id) if job.status in ("queued", "running") else job.status
    if status in ("succeeded", "failed"):
        raise Problem(409, "Fit already finished", f"fit {job.id} has already finished ({status}); nothing was changed")
    return lean_fit(_jsonable(_job_json(visible_job(request, job.id, principal))), include)


def released_predictor(request: Request, job_id: str, principal: Principal) -> tuple[Job, DatasetSchema]:
    """The fit ``job_id`` as ``principal`` may see it (404 otherwise, :func:`visible_job`) if it serves predictions,
    with its dataset's schema as stored (the declared one with the derived transforms): what ``/predict`` and
    ``/model.onnx`` serve from. A fit that has not succeeded, or that estimated a statistic, is a 409; one whose
    dataset was deleted a 410."""
    job = visible_job(request, job_id, principal)
    if job.status != "succeeded" or job.result is None:
        raise Problem(409, "Fit not finished", f"fit {job.id} is {job.status}; predictions need a succeeded fit")
    if not job.result.get("predictor", True):
        raise Problem(409, "Not a predictor", f"fit {job.id} estimated a statistic of the features (model "
                      f"{job.model!r}); it does not predict labels")  # fmt: skip
    db: Database = request.app.state.db

    def read_dataset() -> Dataset | None:
        with db.read() as session:
            return session.get(Dataset, job.dataset_id)

    dataset = db.retrying(read_dataset, what="read dataset")
    if dataset is None or dataset.deleted_at is not None:
        raise Problem(410, "Dataset deleted", f"fit {job.id} was trained on dataset {job.dataset_id}, which was "
                      "deleted; its model no longer serves predictions")  # fmt: skip
    return job, DatasetSchema.from_stored(dataset.schema_json)


class PredictRequest(BaseModel):
    model_config = {"extra": "forbid"}
    rows: list[dict[str, Any]] = Field(..., min_length=1, max_length=100_000,
                                       description="Client-supplied rows: feature columns by name.")  # fmt: skip
    unknown_category: Literal["error", "ignore"] = Field(
        "error",
        description='A categorical level the dataset\'s schema does not declare: "error" (the default) refuses the '
        'rows with a 422 naming the column and row; "ignore" encodes it as an all-zero one-hot block — the row then '
        "carries no information for that column (its coefficients do not contribute), as a missing value under "
        '"impute" does.',
    )


@router.post("/{job_id:id}/predict", response_model=PredictionOut, response_model_exclude_unset=True,
             summary="Predict on client-supplied rows with a finished fit",
             responses=problem_responses(
                 400, 401, 404, 409, 410, 413, 422, 503,
                 s409="The fit has not succeeded, or it estimated a statistic and does not predict labels.",
                 s410="The fit's dataset was deleted: its model no longer serves predictions.",
             ))  # fmt: skip
def predict(job_id: FitId, body: PredictRequest, request: Request,
            principal: Principal = Depends(require_role("owner", "analyst", "admin"))) -> Any:  # noqa: B008  # fmt: skip
    """Encode the rows with the dataset's schema (its transforms included) and apply the fit's model.

    ``scores`` are the raw ⟨θ, x⟩ + b; ``predictions`` are class names for a binary label, and for a numeric
    label values in the label's units clipped to its declared [lower, upper]. A multiclass fit (a categorical label)
    predicts the most probable class and also returns ``classes`` and, per row, the k ``probabilities`` and logits
    (``scores``); a binary logistic fit returns ``classes`` [negative, positive] and per row their probabilities
    (σ(−score), σ(score)). ``unknown_category`` says what an undeclared categorical level does (an error, or an
    all-zero one-hot block).
    """
    job, schema = released_predictor(request, job_id, principal)
    assert job.result is not None  # released_predictor: a succeeded fit
    job_id = job.id
    encoded = encode_rows(body.rows, schema, unknown_category=body.unknown_category)
    result = FitResult(**{k: job.result[k] for k in ("solver", "model", "coefficients", "intercept")},
                       classes=job.result.get("classes"))  # fmt: skip
    scores = result.decision_function(encoded.X)
    predictions = result.predict(encoded.X)
    decoded = schema.label.decode(predictions)
    out: dict[str, Any] = {"fit_id": job_id, "n": int(encoded.n), "scores": np.asarray(scores, dtype=float).tolist()}
    out["predictions"] = [v if isinstance(v, str) else float(v) for v in np.asarray(decoded, dtype=object).tolist()]
    if result.classes is not None and isinstance(schema.label, CategoricalLabel):
        out["classes"] = list(result.classes)
        out["probabilities"] = result.predict_proba(encoded.X).tolist()
    elif result.model == "logistic" and isinstance(schema.label, BinaryLabel):
        out["classes"] = [schema.label.negative, schema.label.positive]
        out["probabilities"] = result.predict_proba(encoded.X).tolist()
    return out


OnnxUnknownCategory = Annotated[
    Literal["error", "ignore"],
    Query(
        description='A categorical level the dataset\'s schema does not declare: "error" (the default) makes the model '
        'refuse the row (NaN scores and probabilities, an empty label), as /predict refuses it; "ignore" encodes it '
        "as an all-zero one-hot block, as /predict with that option."
    ),
]


@router.get(
    "/{job_id:id}/model.onnx",
    response_class=Response,
    summary="The fit as an ONNX model: its dataset's encoding and the released model in one graph",
    responses={
        200: {"description": "An ONNX model (opset 19, double precision) whose outputs `scores`, `label` and, for "
              "logistic fits, `probabilities` are what /predict answers for the same rows; one [N, 1] input per used "
              "column (docs/client.md, \"An ONNX model\").",
              "content": {ONNX_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
              "headers": {"Content-Disposition": {"description": 'attachment; filename="fit-{id}.onnx"',
                                                  "schema": {"type": "string"}}}},
        **problem_responses(
            401, 404, 409, 410, 422, 503,
            s409="The fit has not succeeded, or it estimated a statistic and does not predict labels.",
            s410="The fit's dataset was deleted: its model no longer serves predictions.",
        ),
    },
)  # fmt: skip
def fit_onnx(job_id: FitId, request: Request,
             unknown_category: OnnxUnknownCategory = "error",
             principal: Principal = Depends(require_role("owner", "analyst", "admin"))) -> Response:  # noqa: B008  # fmt: skip
    """The encoding of the fit's dataset (its schema's transforms, scaling, imputation and one-hot levels) and the
    released coefficients as one ONNX graph, built from public things only: onnxruntime's `scores`, `label` and
    `probabilities` equal `/predict`'s `scores`, `predictions` and `probabilities`. Inputs: one [N, 1] tensor per used
    column, float64 (NaN: missing) or string (stripped, in Unicode NFC). Visible to whoever may see the fit; 409 and
    410 as for `/predict`."""
    from .. import onnx_export  # onnx takes 0.6 s to import: paid by the first export (in the threadpool), not at start

    job, schema = released_predictor(request, job_id, principal)
    assert job.result is not None  # released_predictor: a succeeded fit
    content = onnx_export.onnx_bytes(job.result, schema, fit_id=job.id, unknown_category=unknown_category)
    return Response(content, media_type=ONNX_MEDIA_TYPE,
                    headers={"Content-Disposition": f'attachment; filename="fit-{job.id}.onnx"'})  # fmt: skip

"""Datasets: upload (validated and encoded against the declared public schema), list, show, delete, grants,
and the ledger views (budget, entries). No endpoint returns row values."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import func, or_, select

from privfit.datasets import DatasetSchema, EncodedDataset, parse_and_encode
from privfit.db import ApiKey, Database, Dataset, DatasetGrant, LedgerEntry
from privfit.db.models import utcnow
from privfit.ledger import create_budget, status
from privfit.privacy import OrderGrid, get_grid

from ..auth import Principal, current_principal, require_role, visible_dataset
from ..encoding import public_json
from ..problems import Problem

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])


class DatasetOut(BaseModel):
    id: str
    name: str
    n: int
    d: int
    feature_names: list[str]
    row_norm_bound: float
    label_bound: float
    schema_: dict[str, Any] = Field(alias="schema", serialization_alias="schema")
    created_at: datetime
    owner_key_id: str
    content_hash: str | None = Field(None, description="Shown to the owner and admins only.")

    model_config = {"populate_by_name": True}


def _out(dataset: Dataset, principal: Principal) -> DatasetOut:
    privileged = principal.role == "admin" or dataset.owner_key_id == principal.key_id
    return DatasetOut(
        id=dataset.id, name=dataset.name, n=dataset.n, d=dataset.d, feature_names=dataset.feature_names,
        row_norm_bound=dataset.row_norm_bound, label_bound=dataset.label_bound, schema_=dataset.schema_json,
        created_at=dataset.created_at, owner_key_id=dataset.owner_key_id,
        content_hash=dataset.content_hash if privileged else None,
    )  # fmt: skip


def _parse_schema(raw: str) -> DatasetSchema:
    try:
        return DatasetSchema.model_validate(json.loads(raw))
    except json.JSONDecodeError as error:
        raise Problem(422, "Invalid schema", f"schema is not valid JSON: {error.msg} at position {error.pos}") from None
    except ValidationError as error:
        errors = [
            {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in error.errors(include_input=False, include_url=False)
        ]
        detail = "; ".join(f"{'.'.join(e['loc']) or 'schema'}: {e['msg']}" for e in errors)
        raise Problem(422, "Invalid schema", detail, errors=errors) from None


@router.post("", status_code=201, response_model=DatasetOut, response_model_by_alias=True,
             summary="Upload a CSV with its declared public schema and budget (owners)")  # fmt: skip
async def upload_dataset(
    request: Request,
    file: UploadFile = File(..., description="The CSV file."),  # noqa: B008
    schema_field: str | UploadFile = Form(  # noqa: B008
        ...,
        alias="schema",
        description="The public schema as JSON (label, features, missing, budget, csv): a text field "
        "(`-F schema=<schema.json`) or a file part (`-F schema=@schema.json`).",
    ),
    name: str = Form("", max_length=200),
    principal: Principal = Depends(require_role("owner")),  # noqa: B008
) -> DatasetOut:
    raw_schema = (
        schema_field if isinstance(schema_field, str) else (await schema_field.read()).decode("utf-8", "replace")
    )
    declared = _parse_schema(raw_schema)
    grid = get_grid(request.app.state.settings.grid)
    content = await file.read()
    encoded = await run_in_threadpool(parse_and_encode, content, declared)
    storage_key = await run_in_threadpool(request.app.state.store.put, encoded)
    dataset_id = str(uuid.uuid4())
    db = request.app.state.db
    try:
        dataset = _register(db, dataset_id, principal, name or (file.filename or "dataset"), declared, encoded,
                            storage_key, grid)  # fmt: skip
    except BaseException:
        _purge_if_unreferenced(request, storage_key)  # nothing half-written: no orphan data file
        raise
    return _out(dataset, principal)


def _register(
    db: Database, dataset_id: str, principal: Principal, name: str, declared: DatasetSchema,
    encoded: EncodedDataset, storage_key: str, grid: OrderGrid,
) -> Dataset:
    """Insert the dataset's public metadata and its budget in one transaction."""
    with db.write() as session:
        dataset = Dataset(
            id=dataset_id, owner_key_id=principal.key_id, name=name,
            schema_json=json.loads(declared.canonical_json()), feature_names=list(encoded.feature_names),
            n=encoded.n, d=encoded.d, row_norm_bound=encoded.row_norm_bound, label_bound=encoded.label_bound,
            content_hash=encoded.content_hash, storage_key=storage_key,
        )  # fmt: skip
        session.add(dataset)
        session.flush()
        create_budget(session, dataset_id, declared.budget.epsilon, declared.budget.delta, grid,
                      declared.budget.approximate_delta)  # fmt: skip
    return dataset


def _purge_if_unreferenced(request: Request, storage_key: str | None, *, except_id: str | None = None) -> None:
    """Delete a stored matrix unless another live dataset (same content) still uses it."""
    if not storage_key:
        return
    with request.app.state.db.read() as session:
        others = session.scalar(
            select(func.count()).where(
                Dataset.storage_key == storage_key, Dataset.id != except_id, Dataset.deleted_at.is_(None)
            )
        )
    if not others:
        request.app.state.store.delete(storage_key)


@router.get("", response_model=list[DatasetOut], response_model_by_alias=True, summary="Datasets visible to the caller")
def list_datasets(request: Request, principal: Principal = Depends(current_principal)) -> list[DatasetOut]:  # noqa: B008
    query = select(Dataset).where(Dataset.deleted_at.is_(None)).order_by(Dataset.created_at)
    if principal.role != "admin":
        granted = select(DatasetGrant.dataset_id).where(DatasetGrant.api_key_id == principal.key_id)
        query = query.where(or_(Dataset.owner_key_id == principal.key_id, Dataset.id.in_(granted)))
    with request.app.state.db.read() as session:
        return [_out(dataset, principal) for dataset in session.execute(query).scalars()]


@router.get("/{dataset_id}", response_model=DatasetOut, response_model_by_alias=True, summary="Public metadata")
def get_dataset(dataset_id: str, request: Request, principal: Principal = Depends(current_principal)) -> DatasetOut:  # noqa: B008
    return _out(visible_dataset(request.app.state.db, dataset_id, principal), principal)


@router.delete("/{dataset_id}", status_code=204, summary="Purge the data (the ledger is kept)")
def delete_dataset(dataset_id: str, request: Request, principal: Principal = Depends(current_principal)) -> None:  # noqa: B008
    db = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, manage=True)
    with db.write() as session:
        row = session.get(Dataset, dataset.id, with_for_update=True)
        row.deleted_at = utcnow()
        key, row.storage_key = row.storage_key, None
    _purge_if_unreferenced(request, key, except_id=dataset.id)


class GrantRequest(BaseModel):
    api_key_id: str


@router.post("/{dataset_id}/grants", status_code=201, summary="Let an analyst key fit this dataset (owner)")
def grant(dataset_id: str, body: GrantRequest, request: Request,
          principal: Principal = Depends(current_principal)) -> dict[str, str]:  # noqa: B008  # fmt: skip
    db = request.app.state.db
    visible_dataset(db, dataset_id, principal, manage=True)
    with db.write() as session:
        key = session.get(ApiKey, body.api_key_id)
        if key is None or key.role != "analyst":
            raise Problem(422, "Invalid grant", "api_key_id must be the id of an analyst key")
        exists = session.execute(
            select(DatasetGrant.id).where(DatasetGrant.dataset_id == dataset_id, DatasetGrant.api_key_id == key.id)
        ).first()
        if exists is None:
            session.add(DatasetGrant(dataset_id=dataset_id, api_key_id=key.id))
    return {"dataset_id": dataset_id, "api_key_id": body.api_key_id}


@router.get("/{dataset_id}/budget", summary="Budget limits and privacy filter, charged / reserved / committed / "
            "remaining ε as the filter measures them, the committed RDP curve and δ parts")  # fmt: skip
def budget(dataset_id: str, request: Request, principal: Principal = Depends(current_principal)) -> dict[str, Any]:  # noqa: B008
    db = request.app.state.db
    visible_dataset(db, dataset_id, principal)
    with db.read() as session:
        view = status(session, dataset_id)
    return public_json({"dataset_id": dataset_id, **asdict(view)})


@router.get("/{dataset_id}/ledger", summary="Ledger entries, oldest first (paginated)")
def ledger(
    dataset_id: str,
    request: Request,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0),
    principal: Principal = Depends(current_principal),  # noqa: B008
) -> dict[str, Any]:
    db = request.app.state.db
    visible_dataset(db, dataset_id, principal)
    with db.read() as session:
        total = session.scalar(select(func.count()).where(LedgerEntry.dataset_id == dataset_id))
        rows = session.execute(
            select(LedgerEntry).where(LedgerEntry.dataset_id == dataset_id).order_by(LedgerEntry.id)
            .limit(limit).offset(offset)
        ).scalars()  # fmt: skip
        entries = [
            {
                "id": row.id,
                "job_id": row.job_id,
                "kind": row.kind,
                "epsilon": row.epsilon,
                "optimal_order": row.optimal_order,
                "extra_delta": row.extra_delta,
                "approx_delta": row.approx_delta,
                "pure_epsilon": row.pure_epsilon,
                "committed_epsilon_after": row.committed_epsilon_after,
                "grid": row.grid_name,
                "formula_version": row.formula_version,
                "budget_version": row.budget_version,
                "description": row.description,
                "created_at": row.created_at,
                "rdp": row.rdp,
            }
            for row in rows
        ]
    return public_json({"dataset_id": dataset_id, "total": total, "limit": limit, "offset": offset, "entries": entries})

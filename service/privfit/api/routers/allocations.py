"""Allocations: an analyst's share of a dataset's budget (issue 37, item 1; :mod:`privfit.ledger.allocations`).

- ``PUT /v1/datasets/{id}/allocations/{api_key_id}`` (the dataset's owner or an admin): give a granted analyst key
  the share (ε, δ); 201 with the allocation. An allocation is fixed once set: a second PUT is a 409 (delete it
  first). (ε, δ) may not exceed the dataset's budget (422 naming the field); the sum of the allocations may.
- ``GET /v1/datasets/{id}/allocations``: the owner and admins see every allocation with what each analyst has
  used and has left; an analyst sees its own (an empty list when it has none: it spends from the dataset's budget
  alone).
- ``DELETE /v1/datasets/{id}/allocations/{api_key_id}`` (owner or admin): 204; the analyst then spends from the
  dataset's budget alone. Its fits stay in the ledger.

Nothing here reads a row of the dataset: an allocation's numbers are functions of the ledger's public costs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy import select

from privfit.db import ApiKey, Database, DatasetGrant
from privfit.db.models import Allocation
from privfit.ledger.allocations import AllocationError, allocation_statuses, create_allocation, delete_allocation

from ..auth import Principal, current_principal, privileged, visible_dataset
from ..encoding import UtcDateTime, public_json
from ..identifiers import id_path, is_resource_id, normalize_id
from ..pagination import Keyset, Paging, link_next, paged
from ..problems import Problem, problem_responses

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])


class AllocationIn(BaseModel):
    """The share of the dataset's budget an analyst key may use."""

    epsilon: float = Field(gt=0, description="The allocation's ε (at most the dataset's budget ε).")
    delta: float = Field(gt=0, lt=1, description="The allocation's δ (at most the dataset's budget δ).")


class AllocationOut(BaseModel):
    """An allocation and the analyst's spend, measured by the allocation's own privacy filter (its committed ε:
    charged and still-queued fits of the analyst on this dataset)."""

    dataset_id: str
    api_key_id: str
    api_key_name: str = Field(description="The analyst key's name (may be empty).")
    epsilon_max: float
    delta_max: float
    charged_epsilon: float
    reserved_epsilon: float
    committed_epsilon: float
    committed_share: float
    remaining_epsilon: float = Field(description="What the analyst has left of its allocation (ε).")
    closed_reason: str | None = Field(
        description="Set when the allocation admits nothing more (it was set over more than it admits), and why."
    )
    created_at: UtcDateTime


def allocations_of(
    db: Database, dataset_id: str, api_key_id: str | None, page: Callable[[Any], Any] | None = None
) -> list[dict[str, Any]]:
    """The dataset's allocations (only ``api_key_id``'s if given) as :class:`AllocationOut` documents (``page``: of
    one page, as :func:`~privfit.ledger.allocations.allocation_statuses` takes it)."""
    with db.read() as session:
        statuses = allocation_statuses(session, dataset_id, api_key_id, page=page)
        names = dict(session.execute(
            select(ApiKey.id, ApiKey.name).where(ApiKey.id.in_([s.api_key_id for s in statuses]))
        ).tuples().all())  # fmt: skip
    return [{"dataset_id": dataset_id, "api_key_name": names.get(s.api_key_id) or "", **asdict(s)} for s in statuses]


def _grantee(api_key_id: str) -> str:
    if not is_resource_id(api_key_id):
        raise Problem(422, "Invalid allocation", "api_key_id must be an analyst key's id", field="api_key_id")
    return normalize_id(api_key_id)


@router.put("/{dataset_id:id}/allocations/{api_key_id:id}", status_code=201, response_model=AllocationOut,
            summary="Give a granted analyst key a share (ε, δ) of the dataset's budget (owner)",
            responses=problem_responses(401, 403, 404, 409, 422, 503,
                                        s409="The analyst has an allocation already: it is fixed once set (delete "
                                        "it first)."))  # fmt: skip
def set_allocation(
    dataset_id: str = id_path("dataset"),
    api_key_id: str = id_path("analyst key"),
    *,
    body: AllocationIn,
    request: Request,
    principal: Principal = Depends(current_principal),  # noqa: B008
) -> Any:
    """Every later fit and evaluation of the key on this dataset must pass the allocation's filter as well as the
    dataset's (docs/privacy.md, "Allocations"). The allocation's filter counts what the analyst has already
    committed here."""
    db: Database = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, manage=True)
    grantee = _grantee(api_key_id)
    try:
        with db.write() as session:
            granted = session.execute(
                select(DatasetGrant.id).join(ApiKey, ApiKey.id == DatasetGrant.api_key_id)
                .where(DatasetGrant.dataset_id == dataset.id, DatasetGrant.api_key_id == grantee,
                       ApiKey.revoked_at.is_(None))
            ).first()  # fmt: skip
            if granted is None:
                raise Problem(422, "Invalid allocation", "api_key_id must be an analyst key granted this dataset "
                              "(POST /v1/datasets/{id}/grants first)", field="api_key_id")  # fmt: skip
            create_allocation(session, dataset.id, grantee, body.epsilon, body.delta)
    except AllocationError as error:
        if error.field == "exists":
            raise Problem(409, "Allocation exists", str(error), code="allocation_exists") from error
        raise Problem(422, "Invalid allocation", f"{error.field}: {error}", field=error.field) from error
    return public_json(allocations_of(db, dataset.id, grantee)[0])


@router.get("/{dataset_id:id}/allocations", response_model=list[AllocationOut],
            summary="Allocations of the dataset's budget: all (owner, admin) or the caller's own (analyst), oldest "
            "first, one page at a time",
            responses={**paged(), **problem_responses(401, 404, 422, 503)})  # fmt: skip
def list_allocations(dataset_id: str = id_path("dataset"), *, request: Request, response: Response, paging: Paging,
                     principal: Principal = Depends(current_principal)) -> Any:  # noqa: B008  # fmt: skip
    # paged by (created_at, api_key_id): one allocation per analyst key and dataset
    keyset: Keyset[dict[str, Any]] = Keyset(paging, ("allocations", dataset_id))
    db: Database = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, include_deleted=True)
    fetched = allocations_of(
        db,
        dataset.id,
        None if privileged(principal, dataset) else principal.key_id,
        lambda query: keyset.select(query, Allocation.created_at, Allocation.api_key_id),
    )
    allocations, cursor = keyset.page(fetched, lambda allocation: (allocation["created_at"],
                                                                   allocation["api_key_id"]))  # fmt: skip
    link_next(request, response, cursor)
    return public_json(allocations)


@router.delete("/{dataset_id:id}/allocations/{api_key_id:id}", status_code=204, response_class=Response,
               summary="Remove an analyst's allocation (owner): it then spends from the dataset's budget alone",
               responses=problem_responses(401, 403, 404, 503))  # fmt: skip
def remove_allocation(
    dataset_id: str = id_path("dataset"),
    api_key_id: str = id_path("analyst key"),
    *,
    request: Request,
    principal: Principal = Depends(current_principal),  # noqa: B008
) -> Response:
    db: Database = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, manage=True)
    grantee = _grantee(api_key_id)
    with db.write() as session:
        removed = delete_allocation(session, dataset.id, grantee)
    if not removed:
        raise Problem(404, "Not Found", f"dataset {dataset.id} has no allocation for API key {grantee}",
                      code="allocation_not_found")  # fmt: skip
    return Response(status_code=204)

"""Who am I, and API-key management for admins: create, list (never the secrets) and revoke.

Revoking a key (``DELETE /v1/keys/{id}``) sets its ``revoked_at``: authentication reads the key's row on every
request (nothing is cached), so the key is refused with 401 from its next request on, in every API process. Its
queued fits are cancelled with their reservations released (they never read a row) and its running fits are asked
to stop at their next step; a fit that already read rows keeps its charge (the ledger is append-only, DESIGN §2)
and releases no result. Datasets the key owns stay as they are (admins can still manage them); the key's grants
stay recorded but cannot be used. A key cannot revoke itself (409), so that an admin does not lock themselves out
by mistake; revoke an admin key with another admin key (or create one with ``privfit keys create`` on the
server).
"""

from __future__ import annotations

import logging
from typing import Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy import select

from privfit.db import ApiKey, Job
from privfit.db.models import utcnow
from privfit.jobs import cancel

from ..auth import Principal, create_api_key, current_principal, require_role
from ..encoding import UtcDateTime
from ..identifiers import DisplayName, id_path, is_resource_id, normalize_id
from ..pagination import Keyset, Paging, link_next, paged
from ..problems import Problem, key_not_found, problem_responses

router = APIRouter(prefix="/v1", tags=["keys"])
log = logging.getLogger("privfit.api")


class Me(BaseModel):
    key_id: str
    role: str
    name: str


class KeyRequest(BaseModel):
    role: Literal["owner", "analyst", "admin"]
    name: DisplayName = ""


class CreatedKey(BaseModel):
    key_id: str
    role: str
    name: str
    key: str = Field(description="The secret; shown only in this response.")


class KeyOut(BaseModel):
    """An API key as admins see it: never its secret nor its hash."""

    key_id: str
    prefix: str = Field(description="The public part of the key (`pf_<prefix>_…`), to recognise it in logs.")
    role: str
    name: str
    created_at: UtcDateTime
    revoked_at: UtcDateTime | None = Field(description="When the key was revoked; null while it is valid.")


@router.get("/me", response_model=Me, summary="The caller's key id and role", responses=problem_responses(401, 503))
def me(principal: Principal = Depends(current_principal)) -> Me:  # noqa: B008
    return Me(key_id=principal.key_id, role=principal.role, name=principal.name)


@router.post("/keys", response_model=CreatedKey, status_code=201, summary="Create an API key (admins)",
             responses=problem_responses(400, 401, 403, 413, 422, 503))  # fmt: skip
def create_key(body: KeyRequest, request: Request, _: Principal = Depends(require_role("admin"))) -> CreatedKey:  # noqa: B008
    key_id, key = create_api_key(request.app.state.db, body.role, body.name)
    return CreatedKey(key_id=key_id, role=body.role, name=body.name, key=key)


@router.get("/keys", response_model=list[KeyOut],
            summary="Every API key, oldest first, without secrets, one page at a time (admins)",
            responses={**paged(), **problem_responses(401, 403, 422, 503)})  # fmt: skip
def list_keys(request: Request, response: Response, paging: Paging,
              _: Principal = Depends(require_role("admin"))) -> list[KeyOut]:  # noqa: B008  # fmt: skip
    keyset: Keyset[ApiKey] = Keyset(paging, ("keys",))
    with request.app.state.db.read() as session:
        fetched = session.execute(keyset.select(select(ApiKey), ApiKey.created_at, ApiKey.id)).scalars().all()
        rows, cursor = keyset.page(fetched, lambda key: (key.created_at, key.id))
        link_next(request, response, cursor)
        return [
            KeyOut(
                key_id=row.id,
                prefix=row.prefix,
                role=row.role,
                name=row.name,
                created_at=row.created_at,
                revoked_at=row.revoked_at,
            )
            for row in rows
        ]


@router.delete(
    "/keys/{key_id:id}",
    status_code=204,
    response_class=Response,
    summary="Revoke an API key (admins): 401 from its next request on; its queued fits are cancelled",
    responses=problem_responses(401, 403, 404, 409, 503, s409="A key cannot revoke itself: use another admin key."),
)
def revoke_key(
    request: Request,
    key_id: str = id_path("API key"),
    principal: Principal = Depends(require_role("admin")),  # noqa: B008
) -> Response:
    """Idempotent: revoking a revoked key changes nothing and answers 204 again (module docstring)."""
    if not is_resource_id(key_id):
        raise key_not_found(key_id)
    target = normalize_id(key_id)
    if target == principal.key_id:
        raise Problem(409, "Cannot revoke own key", "a key cannot revoke itself; revoke it with another admin key",
                      field="key_id")  # fmt: skip
    db = request.app.state.db
    with db.write() as session:  # the row lock orders this against fits being admitted for the key (auth.py)
        row = session.execute(select(ApiKey).where(ApiKey.id == target).with_for_update()).scalar_one_or_none()
        if row is None:
            raise key_not_found(key_id)
        newly = row.revoked_at is None
        if newly:
            row.revoked_at = utcnow()
    with db.read() as session:
        active = list(session.scalars(select(Job.id).where(Job.api_key_id == target,
                                                           Job.status.in_(("queued", "running")))))  # fmt: skip
    for job_id in active:
        cancel(db, job_id)
    if newly:
        log.warning("API key revoked", extra={"key_id": target, "by": principal.key_id, "cancelled_fits": len(active)})
    return Response(status_code=204)

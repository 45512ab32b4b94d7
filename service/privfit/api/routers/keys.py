"""Who am I, and API-key management for admins."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from ..auth import Principal, create_api_key, current_principal, require_role
from ..identifiers import DisplayName
from ..problems import problem_responses

router = APIRouter(prefix="/v1", tags=["keys"])


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


@router.get("/me", response_model=Me, summary="The caller's key id and role", responses=problem_responses(401, 503))
def me(principal: Principal = Depends(current_principal)) -> Me:  # noqa: B008
    return Me(key_id=principal.key_id, role=principal.role, name=principal.name)


@router.post("/keys", response_model=CreatedKey, status_code=201, summary="Create an API key (admins)",
             responses=problem_responses(400, 401, 403, 413, 422, 503))  # fmt: skip
def create_key(body: KeyRequest, request: Request, _: Principal = Depends(require_role("admin"))) -> CreatedKey:  # noqa: B008
    key_id, key = create_api_key(request.app.state.db, body.role, body.name)
    return CreatedKey(key_id=key_id, role=body.role, name=body.name, key=key)

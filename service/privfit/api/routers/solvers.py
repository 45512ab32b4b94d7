"""The solver catalogue with each solver's parameter JSON schema and defaults."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from privfit.solvers.registry import list_solvers

from ..auth import Principal, current_principal
from ..problems import problem_responses

router = APIRouter(prefix="/v1/solvers", tags=["solvers"])


class SolverOut(BaseModel):
    name: str
    description: str
    models: list[str] = Field(description="The models (losses) this solver fits: FitRequest.model.")
    formula_version: str = Field(description="The version of the solver's privacy-cost formula.")
    params_schema: dict[str, Any] = Field(description="The JSON schema of its parameters (FitRequest.params).")


@router.get(
    "",
    response_model=list[SolverOut],
    summary="Solvers, the models each supports, and their parameter schemas",
    responses=problem_responses(401, 503),
)
def solvers(request: Request, _: Principal = Depends(current_principal)) -> list[dict[str, Any]]:  # noqa: B008
    include = request.app.state.settings.enable_experimental_solvers
    return [s.describe() for s in list_solvers() if include or not s.experimental]

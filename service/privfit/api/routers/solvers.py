"""The solver catalogue: each solver's models, parameter JSON schema and defaults, and whether this server runs it.

Availability comes from :func:`privfit.solvers.availability.solver_availability`, the function whose refusal a fit
or an estimate naming the solver gets (422 on ``solver``), so the catalogue never offers what the server refuses.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from privfit.solvers.availability import catalogue

from ..auth import Principal, current_principal
from ..problems import problem_responses

router = APIRouter(prefix="/v1/solvers", tags=["solvers"])


class SolverOut(BaseModel):
    name: str
    description: str = Field(description="What the solver computes and charges; auto's names its candidates here.")
    models: list[str] = Field(description="The models (losses) this solver fits: FitRequest.model.")
    formula_version: str = Field(description="The version of the solver's privacy-cost formula.")
    params_schema: dict[str, Any] = Field(description="The JSON schema of its parameters (FitRequest.params).")
    available: bool = Field(
        description="Whether this server runs the solver: a fit or an estimate naming an unavailable one is refused "
        "(422 on 'solver', with the same reason)."
    )
    unavailable_reason: str | None = Field(
        description="Why this server does not run it (a sentence); null when available."
    )
    enabled_by: str | None = Field(
        description="The server setting that would enable it, as environment variable=value (e.g. "
        "PRIVFIT_NOISE_SAMPLER=float); null when available."
    )


@router.get(
    "",
    response_model=list[SolverOut],
    summary="Solvers, the models each supports, their parameter schemas and whether this server runs them",
    responses=problem_responses(401, 503),
)
def solvers(request: Request, _: Principal = Depends(current_principal)) -> list[dict[str, Any]]:  # noqa: B008
    """Every solver of this server, sorted by name; experimental ones only when the operator enabled them
    (PRIVFIT_ENABLE_EXPERIMENTAL_SOLVERS=true). An entry with ``available`` false says why and which setting
    enables it."""
    return catalogue(experimental_enabled=request.app.state.settings.enable_experimental_solvers)

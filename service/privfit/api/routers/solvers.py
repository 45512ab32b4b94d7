"""The solver catalogue with each solver's parameter JSON schema and defaults."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from privfit.solvers.registry import list_solvers

from ..auth import Principal, current_principal

router = APIRouter(prefix="/v1/solvers", tags=["solvers"])


@router.get("", summary="Solvers, the models each supports, and their parameter schemas")
def solvers(request: Request, _: Principal = Depends(current_principal)) -> list[dict[str, Any]]:  # noqa: B008
    include = request.app.state.settings.enable_experimental_solvers
    return [s.describe() for s in list_solvers() if include or not s.experimental]

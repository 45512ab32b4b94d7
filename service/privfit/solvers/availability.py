"""Which registered solvers this server runs, why a solver is not run and which setting would enable it.

``GET /v1/solvers`` reports :func:`solver_availability` for every solver it lists, and a fit or an estimate naming a
solver passes :func:`available_solver`, which refuses exactly the solvers that function calls unavailable: the
catalogue and the refusal come from one function and cannot disagree. Two public rules decide:

* a solver marked ``experimental`` (resque_localized) runs only when the operator sets
  ``PRIVFIT_ENABLE_EXPERIMENTAL_SOLVERS=true``; otherwise it is also left out of the catalogue
  (:func:`is_listed`), as documented for that setting;
* a solver with :attr:`~privfit.solvers.base.Solver.float_sampler_only` (objective_perturbation, dp_lazy_oco,
  resque_localized) has no exact sampler and runs only under ``PRIVFIT_NOISE_SAMPLER=float``: the rule is
  :func:`~privfit.solvers.base.sampler_refusal`, which the solver's own resolve step also enforces.

Messages that suggest solvers (a model a solver does not fit, an unknown solver name) suggest only available ones
(:func:`suggested_solvers`, :func:`unknown_solver_message`), so no answer sends a user to a solver this server
refuses. Solver modules call these helpers at request time; the registry is imported lazily here because it imports
every solver module.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from privfit.privacy.noise import SamplerName, current_sampler

from .base import AnySolver, SolverParameterError, sampler_refusal

__all__ = [
    "EXPERIMENTAL_SETTING",
    "FLOAT_SAMPLER_SETTING",
    "Availability",
    "available_names",
    "available_solver",
    "catalogue",
    "is_listed",
    "solver_availability",
    "suggested_solvers",
    "unknown_solver_message",
]

#: The setting (environment variable and value) that enables experimental solvers.
EXPERIMENTAL_SETTING = "PRIVFIT_ENABLE_EXPERIMENTAL_SOLVERS=true"
#: The setting that enables the solvers without an exact sampler.
FLOAT_SAMPLER_SETTING = "PRIVFIT_NOISE_SAMPLER=float"


@dataclass(frozen=True)
class Availability:
    """Whether this server runs a solver; if not, why (a sentence) and which setting(s) would enable it."""

    available: bool
    unavailable_reason: str | None = None
    enabled_by: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The catalogue's members ``available``, ``unavailable_reason`` and ``enabled_by`` (null when available)."""
        return {"available": self.available, "unavailable_reason": self.unavailable_reason,
                "enabled_by": self.enabled_by}  # fmt: skip


def solver_availability(
    solver: AnySolver, *, experimental_enabled: bool, sampler: SamplerName | None = None
) -> Availability:
    """Whether ``solver`` runs on a server with ``experimental_enabled`` (``Settings.enable_experimental_solvers``)
    and noise ``sampler`` (default: the one in force, :func:`~privfit.privacy.noise.current_sampler`)."""
    reasons: list[str] = []
    settings: list[str] = []
    if solver.experimental and not experimental_enabled:
        reasons.append(f"{solver.name} is experimental and disabled on this server")
        settings.append(EXPERIMENTAL_SETTING)
    refusal = sampler_refusal(solver, sampler or current_sampler())
    if refusal is not None:
        reasons.append(refusal)
        settings.append(FLOAT_SAMPLER_SETTING)
    if not reasons:
        return Availability(True)
    return Availability(False, "; ".join(reasons) + ".", " and ".join(settings))


def is_listed(solver: AnySolver, *, experimental_enabled: bool) -> bool:
    """Whether ``GET /v1/solvers`` lists ``solver``: every solver but an experimental one on a server that has not
    enabled them (hidden, as ``PRIVFIT_ENABLE_EXPERIMENTAL_SOLVERS`` documents); a listed solver may still be
    unavailable (its entry then says why)."""
    return experimental_enabled or not solver.experimental


def catalogue(*, experimental_enabled: bool, sampler: SamplerName | None = None) -> list[dict[str, Any]]:
    """``GET /v1/solvers``: each listed solver's description (:meth:`~privfit.solvers.base.Solver.describe`) with
    its availability on this server, sorted by name."""
    from .registry import list_solvers

    return [
        {**solver.describe(), **solver_availability(solver, experimental_enabled=experimental_enabled,
                                                     sampler=sampler).as_json()}
        for solver in list_solvers()
        if is_listed(solver, experimental_enabled=experimental_enabled)
    ]  # fmt: skip


def available_names(
    *,
    experimental_enabled: bool = False,
    sampler: SamplerName | None = None,
    model: str | None = None,
    multiclass: bool = False,
) -> tuple[str, ...]:
    """Names of the solvers this server runs (sorted), restricted to those that fit ``model`` (if given) and, with
    ``multiclass``, a categorical label."""
    from .registry import list_solvers

    return tuple(
        solver.name
        for solver in list_solvers()
        if solver_availability(solver, experimental_enabled=experimental_enabled, sampler=sampler).available
        and (model is None or model in solver.models)
        and (solver.multiclass or not multiclass)
    )


def _joined(names: Iterable[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    items = list(names)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def suggested_solvers(model: str, *, exclude: Iterable[str] = (), multiclass: bool = False) -> str:
    """The solvers to suggest for ``model`` in a message, in words ("dp_gd, dp_otb or output_perturbation"): those
    that fit it and run under the sampler in force, never an experimental one (the operator's opt-in is not known
    where such messages are written), ``exclude`` left out; "no solver on this server" when none does."""
    left_out = set(exclude)
    names = [name for name in available_names(model=model, multiclass=multiclass) if name not in left_out]
    return _joined(names) if names else "no solver on this server"


def unknown_solver_message(
    name: object, candidates: Iterable[str], listing: str = "the solvers this server runs"
) -> str:
    """The refusal of an unknown solver ``name``: a "did you mean …?" when a ``candidates`` name is close
    (:func:`difflib.get_close_matches`, case-insensitive), then the candidates under the heading ``listing``."""
    names = sorted(candidates)
    close: list[str] = []
    if isinstance(name, str) and name:
        lowered = {n.lower(): n for n in names}
        close = [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)]
    hint = f"; did you mean {_joined(repr(n) for n in close)}?" if close else "."
    return f"unknown solver {name!r}{hint} {listing[:1].upper()}{listing[1:]}: {', '.join(repr(n) for n in names)}"


def available_solver(name: str, *, experimental_enabled: bool) -> AnySolver:
    """The registered solver ``name`` if this server runs it (what a fit or an estimate passes before anything
    else about the solver is checked). Refuses with a 422 on ``solver``: an unknown name with a "did you mean …?"
    over the available solvers (:class:`~privfit.solvers.registry.UnknownSolverError`), an unavailable solver with
    :func:`solver_availability`'s reason, the setting that enables it and the solvers this server runs."""
    from .registry import UnknownSolverError, list_solvers

    registered = {solver.name: solver for solver in list_solvers()}
    solver = registered.get(name) if isinstance(name, str) else None
    if solver is None:
        raise UnknownSolverError(
            "solver", unknown_solver_message(name, available_names(experimental_enabled=experimental_enabled))
        )
    availability = solver_availability(solver, experimental_enabled=experimental_enabled)
    if not availability.available:  # the solvers this server runs are listed only in a refusal (every request asks)
        names = available_names(experimental_enabled=experimental_enabled)
        message = (f"solver {name!r} is not available on this server: {availability.unavailable_reason} An operator "
                   f"enables it with {availability.enabled_by}; this server runs {', '.join(names)}")  # fmt: skip
        raise SolverParameterError("solver", message)
    return solver

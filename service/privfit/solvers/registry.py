"""The registry of private solvers: name → :class:`~privfit.solvers.base.Solver` instance.

``GET /v1/solvers`` lists :func:`describe_solvers`; the job runner looks a solver up with :func:`get_solver`.
A new solver module adds its class to ``_BUILTIN`` (or calls :func:`register_solver` at import).
"""

from __future__ import annotations

from typing import Any

from .availability import unknown_solver_message
from .base import AnySolver, Solver, SolverParameterError
from .baselines.dp_gd import DPGradientDescent
from .baselines.dp_sgd import DPSGD
from .baselines.objective_perturbation import ObjectivePerturbation
from .baselines.output_perturbation import OutputPerturbation
from .distributed.solver import DPDistributed
from .lazy_oco.solver import LAZY_OCO_MODELS, DPLazyOCO
from .losses import available_models
from .online_to_batch.solver import DPOnlineToBatch
from .resque.dpsgd import ReSQueDPSGD
from .resque.estimator import RESQUE_MODELS
from .resque.localized import ReSQueLocalized
from .selection.auto import AutoSelection

__all__ = [
    "UnknownSolverError",
    "describe_solvers",
    "get_solver",
    "known_models",
    "list_solvers",
    "register_solver",
    "solver_names",
]


class UnknownSolverError(SolverParameterError):
    """No solver of that name is registered; the message lists the known names (``parameter == "solver"``)."""


_REGISTRY: dict[str, AnySolver] = {}


def register_solver(solver: AnySolver, *, replace: bool = False) -> AnySolver:
    """Add ``solver`` under ``solver.name`` (a second registration under the same name needs ``replace``)."""
    if not isinstance(solver, Solver):
        raise TypeError(f"expected a Solver instance, got {type(solver).__name__}")
    unsupported = sorted(set(solver.models) - set(known_models()))
    if not solver.models or unsupported:
        raise ValueError(f"solver {solver.name!r} declares unknown or no models: {unsupported}")
    if solver.name in _REGISTRY and not replace:
        raise ValueError(f"a solver named {solver.name!r} is already registered")
    _REGISTRY[solver.name] = solver
    return solver


def known_models() -> tuple[str, ...]:
    """Every model a solver may declare: the GLM losses, ``dp_lazy_oco``'s vector losses (mean, linear_loss) and
    the non-smooth losses of ``resque_dpsgd`` (absolute, quantile; its 'svm' is the plain hinge)."""
    return tuple(dict.fromkeys(available_models() + LAZY_OCO_MODELS + RESQUE_MODELS))


def get_solver(name: str) -> AnySolver:
    """The solver registered as ``name``; :class:`UnknownSolverError` (a ``ParameterError`` on "solver", with a "did
    you mean …?" when a registered name is close) else. The API checks availability too
    (:func:`~privfit.solvers.availability.available_solver`)."""
    if isinstance(name, str) and name in _REGISTRY:
        return _REGISTRY[name]
    raise UnknownSolverError("solver", unknown_solver_message(name, solver_names(), "known solvers"))


def solver_names() -> tuple[str, ...]:
    """Registered solver names, sorted."""
    return tuple(sorted(_REGISTRY))


def list_solvers() -> tuple[AnySolver, ...]:
    """Registered solvers, sorted by name."""
    return tuple(_REGISTRY[name] for name in solver_names())


def describe_solvers() -> list[dict[str, Any]]:
    """JSON-ready descriptions (name, description, models, formula version, params JSON schema) of all solvers."""
    return [solver.describe() for solver in list_solvers()]


_BUILTIN: tuple[type[AnySolver], ...] = (
    AutoSelection,
    DPGradientDescent,
    DPOnlineToBatch,
    DPDistributed,
    DPLazyOCO,
    DPSGD,
    ObjectivePerturbation,
    OutputPerturbation,
    ReSQueDPSGD,
    ReSQueLocalized,
)
for _cls in _BUILTIN:
    register_solver(_cls())

"""Private solvers and their building blocks (pure numpy/scipy; no web or DB imports, DESIGN §4).

- :mod:`privfit.solvers.losses`: convex GLM losses with public Lipschitz/smoothness constants.
- :mod:`privfit.solvers.geometry`: per-example clipping, L2-ball projection, intercept augmentation.
- :mod:`privfit.solvers.base`: the solver interface (parameters, privacy resolution, cost, fit, result).
- :mod:`privfit.solvers.registry`: name → solver; JSON schemas for ``GET /v1/solvers``.
- :mod:`privfit.solvers.dp_gd`: DP full-batch gradient descent (``"dp_gd"``).
- :mod:`privfit.solvers.dp_otb`: DP online-to-batch (``"dp_otb"``), with
  :mod:`~privfit.solvers.tree_aggregation`, :mod:`~privfit.solvers.online_learners` and the compiled loop
  :mod:`~privfit.solvers.otb_kernel`.
- :mod:`privfit.solvers.dp_distributed`: DP distributed online learning (``"dp_distributed"``), with the
  public mixing matrices of :mod:`~privfit.solvers.mixing`.
- :mod:`privfit.solvers.dp_lazy_oco`: private lazy OCO, P-COMW with exact truncated-Gaussian draws
  (``"dp_lazy_oco"``), with :mod:`~privfit.solvers.lazy_oco`, :mod:`~privfit.solvers.lazy_oco_sampling` and
  :mod:`~privfit.solvers.lazy_oco_accounting`.
- :mod:`privfit.solvers.dp_sgd`: DP-SGD with Poisson, fixed-size or shuffled batches (``"dp_sgd"``).
- :mod:`privfit.solvers.resque_dpsgd`: DP-SGD on the Gaussian-smoothed objective with ReSQue gradients
  (``"resque_dpsgd"``, non-smooth losses), on the estimator of :mod:`~privfit.solvers.resque`.
- :mod:`privfit.solvers.output_perturbation` (``"output_perturbation"``) and
  :mod:`privfit.solvers.objective_perturbation` (``"objective_perturbation"``): the regularised ERM minimiser
  of :mod:`~privfit.solvers.erm` with output or objective noise (:mod:`~privfit.solvers.perturbation`).

Job-runner sequence (cost before data, DESIGN §1.4)::

    solver = get_solver(name)                                   # UnknownSolverError (ParameterError "solver")
    meta = PublicMetadata.from_dataset(dataset)                 # n, d, bounds: public, no row read
    plan = solver.plan(params, meta, target_epsilon=eps, delta=dataset_delta, grid=dataset_grid)
    ledger.admit(plan.cost); store(plan.resolved.model_dump(mode="json"))
    ...                                                          # later, in the worker, after the charge
    resolved = solver.load_resolved(stored)
    result = solver.fit(X, y, meta, resolved, make_generator(), progress=..., should_stop=...)
    result.to_dict()                                             # coefficients, intercept, metadata
"""

from .base import (
    FitCancelled,
    FitPlan,
    FitResult,
    GLMParams,
    ProgressReporter,
    PublicMetadata,
    ResolvedParams,
    Solver,
    SolverParameterError,
    SolverParams,
)
from .dp_distributed import DPDistributed, DPDistributedParams, DPDistributedResolved
from .dp_gd import DPGDParams, DPGDResolved, DPGradientDescent
from .dp_lazy_oco import DPLazyOCO, DPLazyOCOParams, DPLazyOCOResolved
from .dp_otb import DPOnlineToBatch, DPOTBParams, DPOTBResolved
from .dp_sgd import DPSGD, DPSGDParams, DPSGDResolved
from .objective_perturbation import ObjectivePerturbation, ObjectivePerturbationParams, ObjectivePerturbationResolved
from .output_perturbation import OutputPerturbation, OutputPerturbationParams, OutputPerturbationResolved
from .registry import (
    UnknownSolverError,
    describe_solvers,
    get_solver,
    known_models,
    list_solvers,
    register_solver,
    solver_names,
)
from .resque_dpsgd import ReSQueDPSGD, ReSQueDPSGDParams, ReSQueDPSGDResolved

__all__ = [
    "DPSGD",
    "DPDistributed",
    "DPDistributedParams",
    "DPDistributedResolved",
    "DPGDParams",
    "DPGDResolved",
    "DPGradientDescent",
    "DPLazyOCO",
    "DPLazyOCOParams",
    "DPLazyOCOResolved",
    "DPOTBParams",
    "DPOTBResolved",
    "DPOnlineToBatch",
    "DPSGDParams",
    "DPSGDResolved",
    "FitCancelled",
    "FitPlan",
    "FitResult",
    "GLMParams",
    "ObjectivePerturbation",
    "ObjectivePerturbationParams",
    "ObjectivePerturbationResolved",
    "OutputPerturbation",
    "OutputPerturbationParams",
    "OutputPerturbationResolved",
    "ProgressReporter",
    "PublicMetadata",
    "ReSQueDPSGD",
    "ReSQueDPSGDParams",
    "ReSQueDPSGDResolved",
    "ResolvedParams",
    "Solver",
    "SolverParameterError",
    "SolverParams",
    "UnknownSolverError",
    "describe_solvers",
    "get_solver",
    "known_models",
    "list_solvers",
    "register_solver",
    "solver_names",
]

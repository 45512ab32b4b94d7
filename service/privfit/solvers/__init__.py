"""Private solvers and their building blocks (pure numpy/scipy; no web or DB imports, DESIGN §4).

The shared pieces live here; each research family and the baselines have a subpackage:

- :mod:`.base`: the solver interface (parameters, privacy resolution, cost, fit, result); :mod:`.registry`:
  name → solver, JSON schemas for ``GET /v1/solvers``; :mod:`.losses`: convex GLM losses with public
  Lipschitz/smoothness constants (:mod:`.compiled_losses`: their slopes in numba); :mod:`.geometry`: per-example
  clipping, L2-ball projection, intercept augmentation.
- :mod:`.baselines`: ``dp_gd`` (DP full-batch gradient descent), ``dp_sgd`` (Poisson, fixed-size or shuffled
  batches), ``output_perturbation`` and ``objective_perturbation`` on the certified regularised minimiser.
- :mod:`.online_to_batch`: ``dp_otb`` (DP online-to-batch with tree aggregation), its learners and compiled loop.
- :mod:`.distributed`: ``dp_distributed`` (DP distributed online learning) and the public mixing matrices.
- :mod:`.lazy_oco`: ``dp_lazy_oco`` (private lazy OCO, P-COMW with exact truncated-Gaussian draws).
- :mod:`.resque`: the ReSQue estimator, ``resque_dpsgd`` (non-smooth losses) and the experimental
  ``resque_localized``.
- :mod:`.selection`: ``auto``, private selection among public candidate solvers on a secret train/validation
  split (or the recommended solver where selection cannot pay).

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
from .baselines.dp_gd import DPGDParams, DPGDResolved, DPGradientDescent
from .baselines.dp_sgd import DPSGD, DPSGDParams, DPSGDResolved
from .baselines.objective_perturbation import (
    ObjectivePerturbation,
    ObjectivePerturbationParams,
    ObjectivePerturbationResolved,
)
from .baselines.output_perturbation import OutputPerturbation, OutputPerturbationParams, OutputPerturbationResolved
from .distributed.solver import DPDistributed, DPDistributedParams, DPDistributedResolved
from .lazy_oco.solver import DPLazyOCO, DPLazyOCOParams, DPLazyOCOResolved
from .online_to_batch.solver import DPOnlineToBatch, DPOTBParams, DPOTBResolved
from .registry import (
    UnknownSolverError,
    describe_solvers,
    get_solver,
    known_models,
    list_solvers,
    register_solver,
    solver_names,
)
from .resque.dpsgd import ReSQueDPSGD, ReSQueDPSGDParams, ReSQueDPSGDResolved

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

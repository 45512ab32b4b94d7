"""privfit's privacy-accounting core: RDP curves, composition, conversion, calibration, noise generators.

Everything here is pure (numpy/scipy only) and stated for privfit's replace-one neighbouring relation unless a
docstring says otherwise. Modules:

- :mod:`.orders` — versioned, named grids of RDP orders (default ``dp-accounting-156/v1``).
- :mod:`.mechanisms` — closed-form curves (Gaussian, zCDP, Laplace, pure ε, tree aggregation), composition.
- :mod:`.subsampled` — Poisson- and without-replacement-subsampled Gaussians.
- :mod:`.conversion` — curve → (ε, δ) and → δ at ε, the Balle et al. 2020 bound with dp_accounting's guards.
- :mod:`.cost` — :class:`PrivacyCost` (curve + approximate-DP δ + slack + pure ε), the unit the ledger stores and sums.
- :mod:`.filter` — :class:`PrivacyFilter`, the ledger's admission rule, proven valid for adaptively chosen fits.
- :mod:`.calibration` — the smallest noise meeting a target (ε, δ), always on the safe side.
- :mod:`.randomness` — OS-entropy-seeded generators.
"""

from .calibration import (
    Calibration,
    calibrate_noise,
    gaussian_sigma,
    gdp_gaussian_sigma,
    laplace_scale,
    poisson_noise_multiplier,
    pure_epsilon_for_target,
    tree_aggregation_sigma,
    without_replacement_noise_multiplier,
)
from .conversion import Conversion, delta_at_epsilon, deltas_at_epsilon, epsilon_at_delta, epsilons_at_delta
from .cost import (
    PrivacyCost,
    compose_deltas,
    curve_from_json,
    curve_to_json,
    pure_epsilon_from_json,
    pure_epsilon_to_json,
    total_epsilon,
    unbounded_from_json,
    unbounded_to_json,
)
from .errors import PrivacyParameterError
from .filter import FILTER_VERSION, FILTER_VERSION_V2, DeltaAllowance, FilterReading, PrivacyFilter
from .gaussian_dp import gaussian_dp_delta, gdp_epsilon, gdp_mu_for
from .mechanisms import (
    compose,
    gaussian_rdp,
    laplace_rdp,
    objective_perturbation_rdp,
    pure_dp_rdp,
    self_compose,
    tree_aggregation_depth,
    tree_aggregation_rdp,
    zcdp_rdp,
)
from .orders import DEFAULT_GRID, GRIDS, OrderGrid, get_grid
from .randomness import make_generator, secure_generator
from .subsampled import (
    poisson_subsampled_gaussian_rdp,
    poisson_subsampled_gaussian_rdp_replace_one,
    sampled_without_replacement_gaussian_rdp,
)

__all__ = [
    "DEFAULT_GRID",
    "FILTER_VERSION",
    "FILTER_VERSION_V2",
    "GRIDS",
    "Calibration",
    "Conversion",
    "DeltaAllowance",
    "FilterReading",
    "OrderGrid",
    "PrivacyCost",
    "PrivacyFilter",
    "PrivacyParameterError",
    "calibrate_noise",
    "compose",
    "compose_deltas",
    "curve_from_json",
    "curve_to_json",
    "delta_at_epsilon",
    "deltas_at_epsilon",
    "epsilon_at_delta",
    "epsilons_at_delta",
    "gaussian_dp_delta",
    "gaussian_rdp",
    "gaussian_sigma",
    "gdp_epsilon",
    "gdp_gaussian_sigma",
    "gdp_mu_for",
    "get_grid",
    "laplace_rdp",
    "laplace_scale",
    "make_generator",
    "objective_perturbation_rdp",
    "poisson_noise_multiplier",
    "poisson_subsampled_gaussian_rdp",
    "poisson_subsampled_gaussian_rdp_replace_one",
    "pure_dp_rdp",
    "pure_epsilon_for_target",
    "pure_epsilon_from_json",
    "pure_epsilon_to_json",
    "sampled_without_replacement_gaussian_rdp",
    "secure_generator",
    "self_compose",
    "total_epsilon",
    "tree_aggregation_depth",
    "tree_aggregation_rdp",
    "tree_aggregation_sigma",
    "unbounded_from_json",
    "unbounded_to_json",
    "without_replacement_noise_multiplier",
    "zcdp_rdp",
]

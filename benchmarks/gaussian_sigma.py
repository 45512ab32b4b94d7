"""σ of full-batch Gaussian workloads: privfit's exact-curve (GDP) calibration against dp_accounting's PLD accountant.

    python benchmarks/gaussian_sigma.py

For T Gaussian releases of L2 sensitivity 1 meeting (ε, δ), the noise multiplier z = σ/Δ from

* privfit's calibration on the exact Gaussian curve (:func:`privfit.privacy.gdp_gaussian_sigma`: T releases are
  (√T/z)-GDP; ``dp_gd``, ``output_perturbation``'s Gaussian and ``dp_sgd``'s ``shuffle`` use it since issue 40);
* privfit's RDP calibration (:func:`privfit.privacy.gaussian_sigma`, what they used before);
* dp_accounting's PLD accountant (``PLDAccountant()``, its default discretisation 1e-4), bisected by
  ``calibrate_dp_mechanism`` over ``SelfComposedDpEvent(GaussianDpEvent(z), T)`` (tolerance 1e-6 in z). It
  self-composes the discretised loss distribution by FFT: minutes for T in the hundreds.

Settings: ``dp_gd``'s resolved step counts on UCI Adult's public metadata at ε ∈ {0.1, 0.5, 1, 2, 8} (δ = 1e-6) and
one release (``output_perturbation``) at the same ε. Prints z and the ratios privfit / PLD. No thresholds;
``docs/benchmarks.md`` records a run.
"""

from __future__ import annotations

import math
import time

from privfit.privacy import gaussian_sigma, gdp_gaussian_sigma
from privfit.solvers.base import PublicMetadata
from privfit.solvers.registry import get_solver

ADULT_META = PublicMetadata(n=30162, d=104, row_norm_bound=math.sqrt(14.0))
EPSILONS = (0.1, 0.5, 1.0, 2.0, 8.0)
DELTA = 1e-6


def pld_z(epsilon: float, delta: float, steps: int, interval: float) -> float:
    """dp_accounting's PLD accountant, bisected by ``calibrate_dp_mechanism``."""
    from dp_accounting import GaussianDpEvent, SelfComposedDpEvent, calibrate_dp_mechanism
    from dp_accounting.pld import PLDAccountant

    return float(
        calibrate_dp_mechanism(
            lambda: PLDAccountant(value_discretization_interval=interval),
            lambda z: SelfComposedDpEvent(GaussianDpEvent(z), steps),
            epsilon,
            delta,
            tol=1e-6,
        )
    )


def settings() -> list[tuple[str, float, float, int]]:
    rows = []
    for epsilon in EPSILONS:
        steps = get_solver("dp_gd").plan({}, ADULT_META, target_epsilon=epsilon, delta=DELTA).resolved.steps
        rows.append((f"dp_gd on Adult, T = {steps}", epsilon, DELTA, steps))
        rows.append(("one release", epsilon, DELTA, 1))
    return rows


def main() -> None:
    print(f"{'setting':<26}{'ε':>5}{'δ':>7}  {'privfit GDP z':>14}{'privfit RDP z':>14}{'PLD z':>12}  "
          f"{'GDP/PLD':>8}{'RDP/PLD':>8}")  # fmt: skip
    for label, epsilon, delta, steps in settings():
        exact = gdp_gaussian_sigma(epsilon, delta, count=steps, coordinates=1).noise
        rdp = gaussian_sigma(epsilon, delta, count=steps).noise
        start = time.perf_counter()
        pld = pld_z(epsilon, delta, steps, 1e-4)
        seconds = time.perf_counter() - start
        print(f"{label:<26}{epsilon:>5g}{delta:>7g}  {exact:>14.5f}{rdp:>14.5f}{pld:>12.5f}  "
              f"{exact / pld:>8.4f}{rdp / pld:>8.4f}   (PLD {seconds:.1f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

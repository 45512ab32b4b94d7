"""The curves privfit charges for the exact sampler dominate the mechanism it runs, by OpenDP's own privacy maps.

The exact Gaussian release is the integer mechanism v ↦ v + Z, Z ~ N_Z(0, S), S = ``lattice.integer_parameter``,
applied to v = rint(clip(x)/2^k): the law of OpenDP's ``make_gaussian`` on integers with scale √S (the samplers
agree in law: tests/privacy/test_noise_samplers.py). Neighbouring inputs with ‖x − x'‖₂ ≤ Δ give integer shifts
of L2 norm ≤ x_Δ = (Δ + √d·2^k)/2^k (module docstring of privfit.privacy.noise). OpenDP's map of the measurement
at that shift is a zCDP ρ, i.e. the RDP curve α·ρ; privfit charges ``gaussian_rdp(σ, Δ)`` = αΔ²/(2σ²), which must
be at least α·ρ at every order of every registered grid. Likewise the exact Laplace release has the law of
OpenDP's ``make_laplace`` on integers with scale t = ``lattice.integer_parameter``: its map at the L1 shift gives
a pure ε that ``laplace_cost(..., sampler="exact")`` must cover, with a curve ≥ the pure-DP curve of that ε.

OpenDP's integer metrics take integer distances. The true integer L1 shift is an integer ≤ x, hence ≤ ⌊x⌋, and
so is the L2 shift when d = 1: those are the exact d_in. For d > 1 the L2 norm of an integer vector need not be an
integer, so when x_Δ is not an integer the map is read at ⌈x_Δ⌉ and scaled by (x_Δ/⌈x_Δ⌉)² — OpenDP's Gaussian
map is ρ = (d_in/s)²/2, homogeneous of degree 2 (checked here). Rounding up *without* that rescaling would
overstate the shift by up to one lattice unit (a relative 2^−20), which the charged curve does not — and need not
— cover: ``test_rounding_the_l2_shift_up_overstates_it`` shows the size of that gap.

Broken variants make the check fail: a lattice without the inflation, a coarse lattice without it, a Laplace
without it, and the exact Laplace charged with the continuous Laplace's curve.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import opendp.prelude as dp
import pytest

from privfit.privacy import GRIDS, gaussian_rdp, pure_dp_rdp
from privfit.privacy.noise import SMOOTHING_SCALE, Lattice, gaussian_lattice, laplace_cost, laplace_lattice

dp.enable_features("contrib")


def opendp_measurement(lattice: Lattice):
    """OpenDP's integer measurement of the lattice's noise law: ``make_gaussian`` with scale √S — rounded down
    to a float, so its ρ errs upwards — or ``make_laplace`` with scale t."""
    domain = dp.vector_domain(dp.atom_domain(T="i64"))
    if lattice.kind == "gaussian":
        scale = float(np.nextafter(math.sqrt(lattice.integer_parameter), 0.0))
        return dp.m.make_gaussian(domain, dp.l2_distance(T="i64"), scale)
    return dp.m.make_laplace(domain, dp.l1_distance(T="i64"), float(lattice.integer_parameter))


def _shift(sensitivity: float, growth: Fraction, exponent: int) -> Fraction:
    """(Δ + growth·2^k)/2^k in exact rational arithmetic."""
    return Fraction(sensitivity) / Fraction(2) ** exponent + growth


def _sqrt(dimension: int) -> tuple[Fraction, bool]:
    """√d as a rational upper bound (within 1e-15) and whether it is exact."""
    root = math.isqrt(dimension * 10**30)
    exact = root * root == dimension * 10**30
    return Fraction(root if exact else root + 1, 10**15), exact


def opendp_rho(lattice: Lattice, sensitivity: float, dimension: int) -> float:
    """OpenDP's zCDP ρ of the integer Gaussian measurement at the lattice's L2 shift bound (module docstring)."""
    root, exact_root = _sqrt(dimension)
    shift = _shift(sensitivity, root, lattice.exponent)
    measurement = opendp_measurement(lattice)
    if dimension == 1:
        return float(measurement.map(math.floor(shift)))
    if exact_root and shift.denominator == 1:
        return float(measurement.map(int(shift)))
    upper = math.ceil(shift)
    return float(measurement.map(upper)) * float(shift / upper) ** 2


def gaussian_curve_dominates(lattice: Lattice, sigma: float, sensitivity: float, dimension: int) -> bool:
    """α·ρ_OpenDP ≤ gaussian_rdp(σ, Δ)(α) at every order of every grid."""
    rho = opendp_rho(lattice, sensitivity, dimension)
    return all(
        bool(np.all(grid.orders * rho <= gaussian_rdp(grid, sigma=sigma, sensitivity=sensitivity)))
        for grid in GRIDS.values()
    )


GAUSSIAN_CASES = [
    # (σ, Δ, d, B): integral shifts (perfect-square d, dyadic Δ) …
    (1.0, 1.0, 1, 10.0),
    (3.7, 2.0, 4, 100.0),
    (0.5, 0.75, 16, 5.0),
    (20.0, 1.5, 100, 1e3),
    (8.0, 2.0**-3, 9, 1.0),
    # … d = 1 with a fractional shift (⌊x⌋ is exact), including a coarse lattice forced by a huge bound …
    (3.7, 0.3, 1, 10.0),
    (1.0, 1.0, 1, 1e20),
    # … and non-square d (the map read at ⌈x⌉, rescaled), including a bound-limited lattice.
    (1.0, 1.0, 2, 10.0),
    (2.0, 0.3, 7, 50.0),
    (0.5, 1.0, 3, 2.0**40),
    (0.9, 4.0, 10_000, 1e3),
]


@pytest.mark.parametrize(("sigma", "sensitivity", "dimension", "bound"), GAUSSIAN_CASES)
def test_charged_gaussian_curve_dominates_opendps_map(sigma, sensitivity, dimension, bound):
    lattice = gaussian_lattice(sigma, sensitivity, dimension, bound)
    rho = opendp_rho(lattice, sensitivity, dimension)
    assert rho > 0
    assert gaussian_curve_dominates(lattice, sigma, sensitivity, dimension)
    # The margin is the (1 + 2^−50) of the inflation, the smoothing τ² and the rounding up of S — tiny but ≥ 0.
    assert rho <= sensitivity**2 / (2 * sigma**2)


def test_opendps_gaussian_map_is_homogeneous_of_degree_two():
    """The rescaling of :func:`opendp_rho` for non-integral shifts relies on ρ(d_in) = (d_in/s)²/2."""
    measurement = opendp_measurement(Lattice("gaussian", 0, 1.0, 1234**2, 1.0))
    for d_in in (1, 7, 2**20 + 3):
        assert measurement.map(d_in) == pytest.approx(d_in**2 / (2 * 1234**2), rel=1e-14)
        assert measurement.map(2 * d_in) == pytest.approx(4 * measurement.map(d_in), rel=1e-14)


def test_rounding_the_l2_shift_up_overstates_it():
    """With d = 2, ⌈x_Δ⌉ exceeds the real shift bound by ~0.59 lattice units: OpenDP's map there is above the
    charged curve by a relative ~1.1e-6, while the true bound (rescaled, or ⌊x⌋ for d = 1) is below it."""
    sigma, sensitivity, dimension = 1.0, 1.0, 2
    lattice = gaussian_lattice(sigma, sensitivity, dimension, 10.0)
    shift = _shift(sensitivity, _sqrt(dimension)[0], lattice.exponent)
    rounded_up = float(opendp_measurement(lattice).map(math.ceil(shift)))
    charged = sensitivity**2 / (2 * sigma**2)
    assert 1e-7 < rounded_up / charged - 1 < 1e-5
    assert opendp_rho(lattice, sensitivity, dimension) < charged


def test_gaussian_lattice_without_inflation_is_detected():
    """σ' = σ (no inflation) on the fine lattice: the rounding's extra √d·2^k of sensitivity is not paid for, and
    OpenDP's ρ exceeds the charged curve (by a relative ~2^−19; the smoothing's τ² adds only ~1e-11)."""
    sigma, sensitivity, dimension = 1.0, 1.0, 1
    good = gaussian_lattice(sigma, sensitivity, dimension, 10.0)
    variance = math.ceil((sigma / good.spacing) ** 2 + SMOOTHING_SCALE**2)
    broken = Lattice("gaussian", good.exponent, 1.0, variance, good.bound)
    assert gaussian_curve_dominates(good, sigma, sensitivity, dimension)
    assert not gaussian_curve_dominates(broken, sigma, sensitivity, dimension)


def test_coarse_gaussian_lattice_without_inflation_is_detected():
    """Spacing 1 = Δ, no inflation, no smoothing: the integer shift can be 2 lattice units for Δ = 1, so
    OpenDP's ρ = 2 is four times the charged Δ²/(2σ²) = 1/2."""
    broken = Lattice("gaussian", 0, 1.0, 1, 10.0)
    assert opendp_rho(broken, 1.0, 1) == pytest.approx(2.0)
    assert not gaussian_curve_dominates(broken, 1.0, 1.0, 1)


def opendp_epsilon(lattice: Lattice, sensitivity: float, dimension: int) -> float:
    """OpenDP's pure ε of the integer discrete-Laplace measurement at the L1 shift ⌊(Δ₁ + d·2^k)/2^k⌋."""
    shift = _shift(sensitivity, Fraction(dimension), lattice.exponent)
    return float(opendp_measurement(lattice).map(math.floor(shift)))


def laplace_cost_dominates(cost, epsilon: float) -> bool:
    return cost.pure_epsilon >= epsilon and bool(np.all(cost.rdp >= pure_dp_rdp(cost.grid, epsilon=epsilon)))


LAPLACE_CASES = [
    # (b, Δ₁, d, B)
    (1.0, 1.0, 1, 10.0),
    (2.0, 0.3, 5, 100.0),
    (0.7, 3.0, 1_000, 1e3),
    (5.0, 2.0**-4, 3, 1.0),
    (1.0, 1.0, 1, 1e20),
    (1e3, 50.0, 10**6, 1e6),
]


@pytest.mark.parametrize(("scale", "sensitivity", "dimension", "bound"), LAPLACE_CASES)
def test_charged_laplace_cost_dominates_opendps_map(scale, sensitivity, dimension, bound):
    lattice = laplace_lattice(scale, sensitivity, dimension, bound)
    epsilon = opendp_epsilon(lattice, sensitivity, dimension)
    assert 0 < epsilon <= sensitivity / scale
    for grid in GRIDS.values():
        cost = laplace_cost(grid, scale=scale, sensitivity=sensitivity, sampler="exact")
        assert laplace_cost_dominates(cost, epsilon)


def test_laplace_lattice_without_inflation_is_detected():
    scale, sensitivity, dimension = 1.0, 1.0, 4
    good = laplace_lattice(scale, sensitivity, dimension, 10.0)
    broken = Lattice("laplace", good.exponent, 1.0, math.ceil(scale / good.spacing), good.bound)
    grid = GRIDS["privatekube-12/v1"]
    cost = laplace_cost(grid, scale=scale, sensitivity=sensitivity, sampler="exact")
    assert laplace_cost_dominates(cost, opendp_epsilon(good, sensitivity, dimension))
    assert not laplace_cost_dominates(cost, opendp_epsilon(broken, sensitivity, dimension))


def test_exact_laplace_charged_with_the_continuous_curve_is_detected():
    """The discrete Laplace is certified by OpenDP as pure ε-DP only; the continuous Laplace's curve (the float
    sampler's charge) is below the pure-DP curve of that ε at low orders, so it does not cover the exact release."""
    scale, sensitivity = 1.0, 1.0
    epsilon = opendp_epsilon(laplace_lattice(scale, sensitivity, 1, 10.0), sensitivity, 1)
    for grid in GRIDS.values():
        float_cost = laplace_cost(grid, scale=scale, sensitivity=sensitivity, sampler="float")
        assert not laplace_cost_dominates(float_cost, epsilon)

r"""Honaker's minimum-variance prefix sums for ``dp_otb`` (tree module §B): the compiled one-normal-per-round
sampler has EXACTLY the joint law of the bottom-up estimator (5) applied to the complete binary tree's release,
that estimator is the generalised-least-squares (minimum-variance unbiased) estimate from the nodes released so
far, its variance is the closed form, it beats the plain estimator, the tree costs what the Fenwick nodes cost,
and a white-box audit passes at the calibrated σ and detects σ/2."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfit.privacy import make_generator
from privfit.privacy.audit import epsilon_lower_bound
from privfit.solvers import PublicMetadata, get_solver
from privfit.solvers.online_to_batch.tree_aggregation import (
    noisy_running_sums,
    prefix_variance,
    tree_sensitivity_bound,
)

SOLVER = get_solver("dp_otb")


def full_tree(T: int) -> list[tuple[int, int]]:
    """(level h, last round e) of every node of the complete binary tree complete by round T."""
    return [(h, j << h) for h in range(T.bit_length()) for j in range(1, (T >> h) + 1)]


def gls_prefix_weights(T: int, sigma_1: float, k: float) -> tuple[np.ndarray, np.ndarray]:
    """For each t, the weights c_t over ALL nodes of the GLS (BLUE) estimate of g_t from the nodes released by t
    (those with e ≤ t); and the node variances σ_e²."""
    nodes = full_tree(T)
    variances = np.array([(sigma_1 * float(e) ** (k - 1.0)) ** 2 for _, e in nodes])
    weights = np.zeros((T, len(nodes)))
    for t in range(1, T + 1):
        released = [i for i, (_, e) in enumerate(nodes) if e <= t]
        design = np.zeros((len(released), t))
        for row, i in enumerate(released):
            h, e = nodes[i]
            design[row, e - (1 << h) : e] = 1.0
        inverse = np.diag(1.0 / variances[released])
        estimator = np.linalg.solve(design.T @ inverse @ design, design.T @ inverse)  # δ̂ = this @ y
        weights[t - 1, released] = estimator.sum(axis=0)  # ĝ_t = 1ᵀ δ̂
    return weights, variances


def sampler_matrix(T: int, sigma_1: float, k: float, estimator: int) -> np.ndarray:
    """L with γ = L Z for the compiled sampler (it is linear in the normals: run it on the unit vectors)."""
    out = np.empty((T, T))
    noisy_running_sums(np.zeros((T, T)), sigma_1, k, np.eye(T), out, estimator)
    return out


@pytest.mark.parametrize("k", [1.0, 2.0, 3.0])
def test_compiled_sampler_has_the_joint_law_of_the_minimum_variance_estimator(k: float) -> None:
    T, sigma_1 = 32, 1.3
    weights, variances = gls_prefix_weights(T, sigma_1, k)
    gls = weights @ np.diag(variances) @ weights.T  # Cov(ĝ_s − g_s, ĝ_t − g_t) of the explicit tree + GLS
    L = sampler_matrix(T, sigma_1, k, 1)
    np.testing.assert_allclose(L @ L.T, gls, rtol=1e-9, atol=1e-12 * gls.max())  # same Gaussian process
    closed = [prefix_variance(t, sigma_1=sigma_1, k=k, estimator="honaker") for t in range(1, T + 1)]
    np.testing.assert_allclose(np.diag(gls), closed, rtol=1e-10)
    plain = [prefix_variance(t, sigma_1=sigma_1, k=k, estimator="plain") for t in range(1, T + 1)]
    L_plain = sampler_matrix(T, sigma_1, k, 0)
    np.testing.assert_allclose(np.diag(L_plain @ L_plain.T), plain, rtol=1e-12)
    assert all(h <= p * (1 + 1e-12) for h, p in zip(closed, plain, strict=True))
    if k == 1.0:  # the root of a full tree: σ²/2 + O(2^{-m}) against σ² for the plain estimator
        assert closed[T - 1] / plain[T - 1] == pytest.approx(0.5079, abs=1e-4)


def test_empirical_variance_of_the_prefix_error_matches_and_beats_plain() -> None:
    T, runs, sigma_1 = 64, 20_000, 0.7
    normals = make_generator(3, data_is_public=True).standard_normal((T, runs))
    errors = {}
    for name, code in (("plain", 0), ("honaker", 1)):
        out = np.empty((T, runs))
        noisy_running_sums(np.zeros((T, runs)), sigma_1, 1.0, normals, out, code)
        errors[name] = out.var(axis=1)
        closed = np.array([prefix_variance(t, sigma_1=sigma_1, k=1.0, estimator=name) for t in range(1, T + 1)])  # type: ignore[arg-type]
        np.testing.assert_allclose(errors[name], closed, rtol=0.06)  # 20 000 runs: ±1% sd
    mean_ratio = float(np.mean(errors["honaker"] / errors["plain"]))
    assert mean_ratio < 0.75  # measured 0.66 (closed form 0.66): a third less variance on average


def test_every_row_enters_at_most_log2_2t_nodes_of_the_full_tree_each_within_its_sensitivity() -> None:
    G, H, D, rho = 1.0, 0.25, 4.0, 0.8
    for k in (1.0, 3.0):
        for T in (1, 2, 3, 5, 8, 100, 1000):
            nodes = full_tree(T)
            sigma = {e: tree_sensitivity_bound(1, k=k, lipschitz=G, smoothness=H, step_bound=D)
                     * math.sqrt(math.log2(2 * T)) / rho * e ** (k - 1.0) for _, e in nodes}  # fmt: skip
            for q in range(1, T + 1):
                containing = [(h, e) for h, e in nodes if e - (1 << h) < q <= e]
                assert len(containing) <= math.log2(2 * T)
                # Σ over the row's nodes of (Δ_q/σ_e)² ≤ ρ²: the zCDP parameter of Theorem 3 is unchanged
                loss = sum(
                    (tree_sensitivity_bound(q, k=k, lipschitz=G, smoothness=H, step_bound=D) / sigma[e]) ** 2
                    for _, e in containing
                )
                assert loss <= rho**2 * (1 + 1e-12)


@pytest.mark.parametrize("variant", ["calibrated", "sigma / 2"])
def test_white_box_audit_of_the_honaker_release(variant: str) -> None:
    """Neighbours differ in row 1 by Δ_1 (stream ±Δ/2, 0, …, 0), T = 32, k = 1, σ_1 as resolved for ε = 1 at
    δ = 1e-5. The releases (ĝ_1 … ĝ_T) are N(±Δ/2·1, C) with C = L Lᵀ from the compiled sampler;
    the likelihood-ratio score 1ᵀC⁻¹ĝ is the optimal test, with μ = Δ sqrt(1ᵀC⁻¹1) ≤ ρ (post-processing of the
    full tree, whose μ is ρ). The calibrated σ passes; σ calibrated to half the sensitivity is detected."""
    T, runs, delta = 32, 300_000, 1e-5
    meta = PublicMetadata(n=T, d=1, row_norm_bound=1.0, label_bound=1.0)
    r = SOLVER.resolve({"model": "linear", "fit_intercept": False}, meta, target_epsilon=1.0, delta=delta)
    assert r.prefix_estimator == "honaker" and r.k == 1.0
    sensitivity = tree_sensitivity_bound(
        1, k=1.0, lipschitz=r.lipschitz, smoothness=r.smoothness, step_bound=r.step_bound
    )
    sigma_1 = r.noise_scale / (2.0 if variant == "sigma / 2" else 1.0)
    L = sampler_matrix(T, sigma_1, 1.0, 1)
    precision_ones = np.linalg.solve(L @ L.T, np.ones(T))
    mu = sensitivity * math.sqrt(float(np.ones(T) @ precision_ones))
    assert mu <= (r.rho if variant == "calibrated" else 2 * r.rho) * (1 + 1e-9)
    scores = []
    for sign, seed in ((1.0, 1), (-1.0, 2)):
        generator = make_generator(seed, data_is_public=True)
        increments = np.zeros((T, runs))
        increments[0] = sign * sensitivity / 2.0
        out = np.empty((T, runs))
        noisy_running_sums(increments, sigma_1, 1.0, generator.standard_normal((T, runs)), out, 1)
        scores.append(precision_ones @ out)
    bound = epsilon_lower_bound(scores[0], scores[1], delta=delta).epsilon_lower_bound
    claimed = r.epsilon
    assert claimed is not None and claimed <= 1.0
    if variant == "calibrated":
        assert bound <= claimed, (bound, claimed, mu)
    else:
        assert bound > claimed, (bound, claimed, mu)

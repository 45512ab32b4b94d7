"""Tests of the public mixing matrices of ``dp_distributed`` (spec seed-001 §1.3, §6.3, §7.1 items 5–6):
validation of every built-in topology, fast mixing against dense products, Metropolis weights, the
ring_matchings pairing, custom rejections, Erdős–Rényi determinism, consensus without data and describe()."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privfit.errors import ParameterError
from privfit.solvers.distributed.mixing import (
    ERDOS_RENYI_PERIOD,
    TOPOLOGIES,
    MixingError,
    MixingSchedule,
    make_mixing,
    metropolis_weights,
    validate_mixing,
)

BUILTIN = ("complete", "ring", "star", "ring_matchings")
M_RANGE = range(1, 10)


def build(topology: str, m: int, seed: int = 0) -> MixingSchedule:
    if topology == "erdos_renyi":
        return make_mixing(topology, m, edge_probability=0.5, seed=seed)
    return make_mixing(topology, m)


def one_period(schedule: MixingSchedule) -> list[np.ndarray]:
    return [schedule.matrix(k) for k in range(1, schedule.period + 1)]


def product(schedule: MixingSchedule, rounds: int) -> np.ndarray:
    """Φ = A_rounds ⋯ A_1, built with mix() (itself checked against matrix() below)."""
    P = np.eye(schedule.m)
    for k in range(1, rounds + 1):
        P = schedule.mix(k, P)
    return P


def all_schedules() -> list[MixingSchedule]:
    schedules = [make_mixing(t, m) for t in BUILTIN for m in M_RANGE]
    schedules += [make_mixing("erdos_renyi", m, edge_probability=0.5, seed=s) for m in M_RANGE for s in range(3)]
    return schedules


def assert_rejected(matrices: list, parameter: str, *fragments: str, m: int | None = None, eta: float = 1e-6) -> str:
    """Both entry points refuse ``matrices`` with ``parameter`` and a message containing every fragment."""
    m = len(matrices[0]) if m is None else m
    with pytest.raises(MixingError) as info:
        make_mixing("custom", m, matrices=matrices, eta=eta)
    assert isinstance(info.value, ParameterError)
    assert info.value.parameter == parameter
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


# --------------------------------------------------------------------------------------------------------------
# §7.1 item 5: every built-in schedule is valid and converges


@pytest.mark.parametrize("topology", BUILTIN)
@pytest.mark.parametrize("m", M_RANGE)
def test_builtin_topologies_pass_validation(topology: str, m: int) -> None:
    schedule = make_mixing(topology, m)
    assert schedule.m == m
    assert schedule.topology == topology
    validate_mixing(one_period(schedule))
    for A in one_period(schedule):
        assert A.shape == (m, m) and A.dtype == np.float64
        np.testing.assert_allclose(A.sum(axis=0), 1.0, atol=1e-12)
        np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-12)
    expected_period = 2 if topology == "ring_matchings" and m > 1 else 1
    assert schedule.period == expected_period


def test_erdos_renyi_p_half_passes_validation_where_connected() -> None:
    built = 0
    for m in M_RANGE:
        for seed in range(3):
            try:
                schedule = make_mixing("erdos_renyi", m, edge_probability=0.5, seed=seed)
            except MixingError as error:  # a disconnected union is refused, never returned
                assert error.parameter == "edge_probability"
                continue
            built += 1
            assert schedule.period == (ERDOS_RENYI_PERIOD if m > 1 else 1)
            validate_mixing(one_period(schedule))
    assert built >= 25  # with p = 1/2 and 16 graphs the union is essentially always connected


@pytest.mark.parametrize("topology", ["ring", "ring_matchings"])
def test_products_of_3000_matrices_reach_the_average(topology: str) -> None:
    for m in range(2, 10):
        P = product(make_mixing(topology, m), 3000)
        assert np.max(np.abs(P - 1.0 / m)) <= 1e-8, (topology, m)


def test_complete_averages_exactly_in_one_step() -> None:
    for m in M_RANGE:
        schedule = make_mixing("complete", m)
        np.testing.assert_allclose(schedule.matrix(1), np.full((m, m), 1.0 / m), rtol=0, atol=1e-15)
        np.testing.assert_allclose(product(schedule, 1), np.full((m, m), 1.0 / m), rtol=0, atol=1e-15)


def test_single_learner_is_identity_for_every_topology() -> None:
    for topology in TOPOLOGIES[:-1]:
        schedule = build(topology, 1)
        assert schedule.period == 1
        np.testing.assert_array_equal(schedule.matrix(1), [[1.0]])
        V = np.array([[1.5, -2.0, 3.0]])
        out = schedule.mix(7, V)
        np.testing.assert_array_equal(out, V)
        assert out is not V
    custom = make_mixing("custom", 1, matrices=[[[1.0]]])
    np.testing.assert_array_equal(custom.mix(1, np.array([[4.0]])), [[4.0]])


# --------------------------------------------------------------------------------------------------------------
# mix(k, V) == matrix(k) @ V


def test_mix_matches_dense_product_for_every_schedule() -> None:
    rng = np.random.default_rng(20240601)
    schedules = all_schedules()
    pair = [[[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0, 1]], [[1, 0, 0], [0, 0.5, 0.5], [0, 0.5, 0.5]]]
    schedules.append(make_mixing("custom", 3, matrices=pair))
    directed = 0.5 * np.eye(4) + 0.5 * np.roll(np.eye(4), 1, axis=1)
    schedules.append(make_mixing("custom", 4, matrices=[directed.tolist(), np.full((4, 4), 0.25).tolist()]))
    for schedule in schedules:
        for k in (1, 2, 3, schedule.period, schedule.period + 1, 2 * schedule.period + 1, 37):
            V = rng.normal(size=(schedule.m, 5))
            expected = schedule.matrix(k) @ V
            got = schedule.mix(k, V)
            assert got.shape == V.shape and got.dtype == np.float64
            assert got is not V
            scale = np.max(np.abs(V))
            assert np.max(np.abs(got - expected)) <= 4e-16 * scale * max(schedule.m, 4), (schedule, k)


def test_mix_leaves_its_input_alone_and_checks_shapes() -> None:
    for topology in ("complete", "ring", "star", "ring_matchings"):
        schedule = make_mixing(topology, 6)
        V = np.arange(30, dtype=np.float64).reshape(6, 5)
        before = V.copy()
        schedule.mix(1, V)
        np.testing.assert_array_equal(V, before)
        with pytest.raises(ValueError, match="shape"):
            schedule.mix(1, np.zeros((5, 5)))
        with pytest.raises(ValueError, match="k must be"):
            schedule.mix(0, V)
        with pytest.raises(ValueError, match="k must be"):
            schedule.matrix(0)


def test_matrices_repeat_with_the_period() -> None:
    for schedule in all_schedules():
        for k in range(1, schedule.period + 1):
            np.testing.assert_array_equal(schedule.matrix(k), schedule.matrix(k + schedule.period))
            np.testing.assert_array_equal(schedule.matrix(k), schedule.matrix(k + 5 * schedule.period))


# --------------------------------------------------------------------------------------------------------------
# Metropolis weights and the fixed topologies' values


def test_metropolis_weights_are_symmetric_and_doubly_stochastic() -> None:
    rng = np.random.default_rng(7)
    for m in (2, 5, 9, 20):
        upper = np.triu(rng.random((m, m)) < 0.4, 1)
        adjacency = upper | upper.T
        W = metropolis_weights(adjacency)
        np.testing.assert_array_equal(W, W.T)
        np.testing.assert_allclose(W.sum(axis=0), 1.0, atol=1e-14)
        np.testing.assert_allclose(W.sum(axis=1), 1.0, atol=1e-14)
        assert np.all(W >= 0)
        degree = adjacency.sum(axis=1)
        for i, j in zip(*np.nonzero(adjacency), strict=True):
            assert W[i, j] == 1.0 / (1.0 + max(degree[i], degree[j]))
        assert np.all(W[~adjacency & ~np.eye(m, dtype=bool)] == 0)
        assert np.all(np.diagonal(W) >= 1.0 / (1.0 + degree) - 1e-15)


def test_metropolis_weights_reject_asymmetric_adjacency() -> None:
    with pytest.raises(ValueError, match="symmetric"):
        metropolis_weights(np.array([[0, 1], [0, 0]]))
    with pytest.raises(ValueError, match="square"):
        metropolis_weights(np.zeros((2, 3)))


def test_ring_weights() -> None:
    for m in range(3, 10):
        A = make_mixing("ring", m).matrix(1)
        for i in range(m):
            expected = np.zeros(m)
            expected[[i, (i - 1) % m, (i + 1) % m]] = 1.0 / 3.0
            np.testing.assert_allclose(A[i], expected, rtol=0, atol=1e-16)
    np.testing.assert_array_equal(make_mixing("ring", 2).matrix(1), np.full((2, 2), 0.5))


def test_star_weights() -> None:
    for m in range(2, 10):
        A = make_mixing("star", m).matrix(1)
        assert A[0, 0] == pytest.approx(1.0 / m, abs=1e-15)
        np.testing.assert_allclose(A[0, 1:], 1.0 / m, rtol=0, atol=0)
        np.testing.assert_allclose(A[1:, 0], 1.0 / m, rtol=0, atol=0)
        np.testing.assert_allclose(np.diagonal(A)[1:], 1.0 - 1.0 / m, rtol=0, atol=1e-15)
        leaves = A[1:, 1:] - np.diag(np.diagonal(A)[1:])
        assert np.all(leaves == 0)


def test_ring_matchings_pairing_pattern() -> None:
    h = 0.5
    four = make_mixing("ring_matchings", 4)
    np.testing.assert_array_equal(four.matrix(1), [[h, h, 0, 0], [h, h, 0, 0], [0, 0, h, h], [0, 0, h, h]])
    np.testing.assert_array_equal(four.matrix(2), [[h, 0, 0, h], [0, h, h, 0], [0, h, h, 0], [h, 0, 0, h]])
    five = make_mixing("ring_matchings", 5)
    np.testing.assert_array_equal(
        five.matrix(1),
        [[h, h, 0, 0, 0], [h, h, 0, 0, 0], [0, 0, h, h, 0], [0, 0, h, h, 0], [0, 0, 0, 0, 1]],
    )
    np.testing.assert_array_equal(
        five.matrix(2),
        [[1, 0, 0, 0, 0], [0, h, h, 0, 0], [0, h, h, 0, 0], [0, 0, 0, h, h], [0, 0, 0, h, h]],
    )
    np.testing.assert_array_equal(five.matrix(3), five.matrix(1))
    np.testing.assert_array_equal(five.matrix(4), five.matrix(2))
    two = make_mixing("ring_matchings", 2)  # (m − 1, 0) = (1, 0) is not added for m = 2: even rounds are idle
    np.testing.assert_array_equal(two.matrix(1), np.full((2, 2), h))
    np.testing.assert_array_equal(two.matrix(2), np.eye(2))


# --------------------------------------------------------------------------------------------------------------
# Custom matrices: rejections and acceptance


def test_custom_rejects_row_sums() -> None:
    assert_rejected([[[0.5, 0.4], [0.5, 0.5]]], "mixing_matrices", "row 0 sums to", "doubly stochastic")


def test_custom_rejects_column_sums_when_rows_are_fine() -> None:
    bad = [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]]  # rows sum to 1, columns to 1.25, 1.25, 0.5
    assert_rejected([bad], "mixing_matrices", "column 0 sums to 1.25", "doubly stochastic")


def test_custom_rejects_negative_entry() -> None:
    bad = [[1.2, -0.2], [-0.2, 1.2]]  # rows and columns sum to 1
    assert_rejected([bad], "mixing_matrices", "negative entry a[0][1] = -0.2", "≥ 0")


def test_custom_rejects_positive_entry_below_eta() -> None:
    tiny = 1e-8
    bad = [[1 - tiny, tiny, 0.0], [tiny, 0.5 - tiny, 0.5], [0.0, 0.5, 0.5]]
    assert_rejected([bad], "mixing_matrices", "positive entry a[0][1] = 1e-08", "below eta = 1e-06")
    make_mixing("custom", 3, matrices=[bad], eta=1e-9)  # fine once eta is below the entry


def test_custom_rejects_self_weight_below_eta() -> None:
    assert_rejected([[[0.0, 1.0], [1.0, 0.0]]], "mixing_matrices", "diagonal entry a[0][0] = 0.0", "self-weight")
    tiny = 1e-8
    assert_rejected([[[tiny, 1 - tiny], [1 - tiny, tiny]]], "mixing_matrices", "a[0][0] = 1e-08", "below eta")


def test_custom_rejects_disconnected_union() -> None:
    block = [[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5]]
    message = assert_rejected(
        [block, np.eye(4).tolist()], "mixing_matrices", "union graph over the 2 matrices", "2 connected components"
    )
    assert "{0, 1}" in message and "{2, 3}" in message
    with pytest.raises(MixingError, match="4 connected components"):
        validate_mixing([np.eye(4)])


def test_custom_rejects_wrong_shapes() -> None:
    assert_rejected([[[1.0, 0.0], [0.0, 1.0]]], "mixing_matrices", "every matrix must be 3×3", m=3)
    assert_rejected([[[1.0, 0.0, 0.0], [0.0, 1.0]]], "mixing_matrices", "matrix 0", "ragged", "must be 2×2", m=2)
    assert_rejected([np.eye(2).tolist(), [[1.0, 0.0], [0.0]]], "mixing_matrices", "matrix 1", "ragged", m=2)
    assert_rejected([[["a", "b"], ["c", "d"]]], "mixing_matrices", "non-numeric", m=2)
    with pytest.raises(MixingError, match="square"):
        validate_mixing([np.ones((2, 3)) / 2])
    with pytest.raises(MixingError, match=r"shape \(3, 3\)"):
        validate_mixing([np.eye(2), np.eye(3)])


def test_custom_rejects_non_finite_entries() -> None:
    assert_rejected([[[np.nan, 1.0], [1.0, 0.0]]], "mixing_matrices", "non-finite")


def test_custom_rejects_more_than_64_matrices() -> None:
    matrices = [np.full((2, 2), 0.5).tolist()] * 65
    assert_rejected(matrices, "mixing_matrices", "at most 64 matrices", "got 65")
    assert make_mixing("custom", 2, matrices=matrices[:64]).period == 64


def test_custom_rejects_empty_and_missing_lists() -> None:
    assert_rejected([], "mixing_matrices", "at least one", m=2)
    with pytest.raises(MixingError, match="requires mixing_matrices") as info:
        make_mixing("custom", 2)
    assert info.value.parameter == "mixing_matrices"
    with pytest.raises(MixingError, match="at least one"):
        validate_mixing([])


def test_custom_time_varying_pair_with_connected_union_is_accepted() -> None:
    # Neither matrix alone connects the 4 learners; their union is the path 0–1–2–3.
    first = [[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5]]
    second = [[1, 0, 0, 0], [0, 0.5, 0.5, 0], [0, 0.5, 0.5, 0], [0, 0, 0, 1]]
    for alone in (first, second):
        with pytest.raises(MixingError, match="disconnected"):
            make_mixing("custom", 4, matrices=[alone])
    schedule = make_mixing("custom", 4, matrices=[first, second])
    assert schedule.period == 2
    np.testing.assert_array_equal(schedule.matrix(1), first)
    np.testing.assert_array_equal(schedule.matrix(2), second)
    np.testing.assert_array_equal(schedule.matrix(3), first)
    assert np.max(np.abs(product(schedule, 3000) - 0.25)) <= 1e-8


def test_custom_accepts_non_symmetric_doubly_stochastic_cycle() -> None:
    shift = np.roll(np.eye(3), 1, axis=1)
    A = 0.5 * np.eye(3) + 0.5 * shift  # a directed ring: doubly stochastic, not symmetric
    schedule = make_mixing("custom", 3, matrices=[A.tolist()])
    np.testing.assert_array_equal(schedule.matrix(1), A)
    assert np.max(np.abs(product(schedule, 500) - 1 / 3)) <= 1e-12


# --------------------------------------------------------------------------------------------------------------
# Parameters of make_mixing


def test_unknown_topology_lists_the_valid_names() -> None:
    with pytest.raises(MixingError) as info:
        make_mixing("torus", 4)
    assert info.value.parameter == "topology"
    assert all(name in str(info.value) for name in TOPOLOGIES)


@pytest.mark.parametrize("m", [0, -1, 1025, 2.0, True, "4", None])
def test_n_learners_domain(m: object) -> None:
    with pytest.raises(MixingError) as info:
        make_mixing("ring", m)  # type: ignore[arg-type]
    assert info.value.parameter == "n_learners"
    assert make_mixing("ring", np.int64(4)).m == 4


def test_custom_m_above_limit_is_refused_before_reading_matrices() -> None:
    with pytest.raises(MixingError, match="1024") as info:
        make_mixing("custom", 1025, matrices=[[[1.0]]])
    assert info.value.parameter == "n_learners"


def test_parameters_for_other_topologies_are_refused() -> None:
    with pytest.raises(MixingError, match="only used by topology 'erdos_renyi'") as info:
        make_mixing("ring", 4, edge_probability=0.5)
    assert info.value.parameter == "edge_probability"
    with pytest.raises(MixingError, match="only used by topology 'custom'") as info:
        make_mixing("complete", 2, matrices=[[[0.5, 0.5], [0.5, 0.5]]])
    assert info.value.parameter == "mixing_matrices"


@pytest.mark.parametrize("p", [None, 0.0, -0.1, 1.5, float("nan"), float("inf"), True, "0.5"])
def test_edge_probability_domain(p: object) -> None:
    with pytest.raises(MixingError) as info:
        make_mixing("erdos_renyi", 5, edge_probability=p)  # type: ignore[arg-type]
    assert info.value.parameter == "edge_probability"


@pytest.mark.parametrize("seed", [-1, 1.5, "0", None, True])
def test_topology_seed_domain(seed: object) -> None:
    with pytest.raises(MixingError, match="seed") as info:
        make_mixing("erdos_renyi", 5, edge_probability=0.5, seed=seed)  # type: ignore[arg-type]
    assert info.value.parameter == "topology_seed"


# --------------------------------------------------------------------------------------------------------------
# Erdős–Rényi: disconnected unions refused, public determinism


def test_erdos_renyi_tiny_p_is_refused_with_advice() -> None:
    with pytest.raises(MixingError) as info:
        make_mixing("erdos_renyi", 9, edge_probability=0.01, seed=0)
    assert info.value.parameter == "edge_probability"
    message = str(info.value)
    assert "disconnected" in message and "connected components" in message
    assert "larger edge_probability" in message and "another seed" in message and "seed 0" in message


def test_erdos_renyi_is_a_deterministic_function_of_the_public_seed() -> None:
    first = one_period(make_mixing("erdos_renyi", 9, edge_probability=0.5, seed=1))
    again = one_period(make_mixing("erdos_renyi", 9, edge_probability=0.5, seed=1))
    other = one_period(make_mixing("erdos_renyi", 9, edge_probability=0.5, seed=2))
    assert len(first) == ERDOS_RENYI_PERIOD
    for A, B in zip(first, again, strict=True):
        np.testing.assert_array_equal(A, B)
    assert any(not np.array_equal(A, B) for A, B in zip(first, other, strict=True))
    assert any(not np.array_equal(first[0], A) for A in first[1:])  # time-varying within the cycle


def test_erdos_renyi_p_one_is_the_complete_graph() -> None:
    schedule = make_mixing("erdos_renyi", 6, edge_probability=1.0, seed=3)
    for A in one_period(schedule):
        np.testing.assert_allclose(A, 1 / 6, rtol=0, atol=1e-15)


# --------------------------------------------------------------------------------------------------------------
# §7.1 item 6: consensus without data


def test_consensus_without_data_is_geometric_to_the_average() -> None:
    m = 8
    schedule = make_mixing("ring", m)
    V = np.random.default_rng(11).normal(size=(m, 3)) * 10.0
    target = V.mean(axis=0)
    errors = []
    for k in range(1, 2001):
        V = schedule.mix(k, V)
        errors.append(np.linalg.norm(V - target))
    errors = np.asarray(errors)
    assert np.max(np.abs(V - target)) <= 1e-10
    np.testing.assert_allclose(V.mean(axis=0), target, rtol=0, atol=1e-12)  # doubly stochastic: mean preserved

    # Geometric phase: until rounding takes over the error decreases strictly, at the rate of λ₂ = (1 + 2cos(2π/m))/3.
    active = errors > 1e-12 * errors[0]
    n_active = int(np.argmin(active))
    assert n_active >= 50
    assert np.all(np.diff(errors[:n_active]) < 0)
    slope = np.polyfit(np.arange(n_active), np.log(errors[:n_active]), 1)[0]
    rate = (1 + 2 * np.cos(2 * np.pi / m)) / 3
    assert slope < 0
    assert slope == pytest.approx(np.log(rate), rel=0.1)


def test_consensus_under_time_varying_matchings() -> None:
    m = 7
    schedule = make_mixing("ring_matchings", m)
    V = np.arange(m, dtype=np.float64)[:, None] * np.array([[1.0, -2.0]])
    target = V.mean(axis=0)
    norms = []
    for k in range(1, 1001):
        V = schedule.mix(k, V)
        norms.append(np.linalg.norm(V - target))
    assert np.max(np.abs(V - target)) <= 1e-10
    assert np.all(np.diff(norms[:200]) <= 1e-15)  # symmetric doubly stochastic steps never increase the spread


# --------------------------------------------------------------------------------------------------------------
# describe()


def test_describe_is_json_and_public() -> None:
    custom = make_mixing("custom", 2, matrices=[[[0.5, 0.5], [0.5, 0.5]], [[1.0, 0.0], [0.0, 1.0]]])
    for schedule in [*all_schedules(), custom]:
        described = json.loads(json.dumps(schedule.describe()))
        assert described["topology"] == schedule.topology
        assert described["n_learners"] == schedule.m
        assert described["period"] == schedule.period
        assert described["eta"] == schedule.eta
    er = make_mixing("erdos_renyi", 5, edge_probability=0.5, seed=2).describe()
    assert er["edge_probability"] == 0.5 and er["seed"] == 2
    assert "edge_probability" not in make_mixing("ring", 5).describe()
    digest = custom.describe()["matrices_sha256"]
    same = make_mixing("custom", 2, matrices=[[[0.5, 0.5], [0.5, 0.5]], [[1.0, 0.0], [0.0, 1.0]]])
    assert same.describe()["matrices_sha256"] == digest and len(digest) == 64

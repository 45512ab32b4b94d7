"""The largest admissible ε over HTTP (issue 36, item 4): every fit estimate and a fit's 409 state it; a fit at
exactly that ε is admitted and 1 % more is refused (SQLite and PostgreSQL); queued fits count as now; a request with
explicit noise gets the target ε to send instead; repeated estimates on an unchanged ledger search once."""

from __future__ import annotations

from api_helpers import upload

from privfit.db import Budget

DP_GD = {"model": "logistic", "solver": "dp_gd"}


def _fit(client, keys, dataset_id: str, epsilon: float, **extra):
    request = {"dataset_id": dataset_id, **DP_GD, "privacy": {"epsilon": epsilon}, **extra}
    return client.post("/v1/fits", headers=keys.analyst, json=request)


def _estimate(client, keys, dataset_id: str, epsilon: float | None = None, **extra) -> dict:
    privacy = {} if epsilon is None else {"epsilon": epsilon}
    request = {"dataset_id": dataset_id, **DP_GD, "privacy": privacy, **extra}
    response = client.post("/v1/fits/estimate", headers=keys.analyst, json=request)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_refusal_and_the_estimate_state_an_epsilon_that_is_admitted(idle_client, idle_keys):
    """With a queued fit already reserved, the estimate of a too-large fit says the largest ε; 1 % more is refused
    with a 409 that states the same value, and exactly that ε is admitted."""
    client, keys = idle_client, idle_keys
    dataset_id = upload(client, keys, epsilon=1.0)
    assert _fit(client, keys, dataset_id, 0.5).status_code == 202  # queued: its reservation counts as now
    estimate = _estimate(client, keys, dataset_id, 0.9)
    largest = estimate["max_admissible_epsilon"]
    assert not estimate["admissible"] and 0.0 < largest < 0.9
    assert float(f"{largest:.4g}") == largest  # rounded (down) to 4 significant digits

    refused = _fit(client, keys, dataset_id, largest * 1.01)
    assert refused.status_code == 409, refused.text
    problem = refused.json()
    assert problem["max_admissible_epsilon"] == largest
    assert f"could have now is {largest:.4g}" in problem["detail"]

    admitted = _fit(client, keys, dataset_id, largest)
    assert admitted.status_code == 202, admitted.text

    after = _estimate(client, keys, dataset_id, 0.01)  # the ledger changed: a new search, a smaller value
    assert after["max_admissible_epsilon"] < largest
    refusal = _fit(client, keys, dataset_id, 0.5).json()
    assert refusal["max_admissible_epsilon"] == after["max_admissible_epsilon"]


def test_an_admissible_estimate_states_it_too_and_the_search_is_cached(client, keys):
    """Estimates at different target ε on an unchanged ledger share one search (public inputs only), and the value
    bounds what is admissible: the estimate at it is admissible."""
    dataset_id = upload(client, keys, epsilon=1.0)
    cache = client.app.state.headroom
    first = _estimate(client, keys, dataset_id, 0.1)
    misses = cache.misses
    second = _estimate(client, keys, dataset_id, 0.2)
    assert first["admissible"] and second["admissible"]
    assert first["max_admissible_epsilon"] == second["max_admissible_epsilon"] > 0.2
    assert cache.misses == misses and cache.hits >= 1
    at_it = _estimate(client, keys, dataset_id, first["max_admissible_epsilon"])
    assert at_it["admissible"]


def test_explicit_noise_gets_the_target_epsilon_to_send_instead(client, keys):
    dataset_id = upload(client, keys, epsilon=1.0)
    explicit = _estimate(client, keys, dataset_id, params={"noise_multiplier": 50.0})
    targeted = _estimate(client, keys, dataset_id, 0.3)
    assert explicit["max_admissible_epsilon"] == targeted["max_admissible_epsilon"] > 0


def test_a_closed_budget_answers_zero(client, keys):
    """A budget that admits nothing (closed by a migration, with its note) answers 0 in the estimate and the 409,
    whose detail says that no ε is admissible."""
    dataset_id = upload(client, keys, epsilon=1.0)
    with client.app.state.db.write() as session:
        session.get_one(Budget, dataset_id).filter_note = "the committed fits exceed the filter (migration 0005)"
    estimate = _estimate(client, keys, dataset_id, 0.1)
    assert not estimate["admissible"] and estimate["max_admissible_epsilon"] == 0.0
    refused = _fit(client, keys, dataset_id, 0.1)
    assert refused.status_code == 409 and refused.json()["reason"] == "closed"
    assert refused.json()["max_admissible_epsilon"] == 0.0
    assert "no target ε of this solver, model and parameters is admissible now" in refused.json()["detail"]

"""The largest admissible ε in the Python client and the CLI (issue 36, item 4): ``Estimate.max_admissible_epsilon``,
``BudgetExceededError.max_admissible_epsilon``, the ``privfit estimate`` row and the refusal's hint, against the
app in process (the client on the test client's transport)."""

from __future__ import annotations

import argparse

import pytest
from api_helpers import upload

from privfit.client import BudgetExceededError, Client
from privfit.client.cli import Output, _estimate, _hint


def _arguments(dataset_id: str, epsilon: float) -> argparse.Namespace:
    return argparse.Namespace(dataset=dataset_id, model="logistic", solver="dp_gd", epsilon=epsilon, params=None,
                              param=None)  # fmt: skip


def test_the_client_and_the_cli_state_the_largest_admissible_epsilon(idle_client, idle_keys, capsys):
    dataset_id = upload(idle_client, idle_keys, epsilon=1.0)
    key = idle_keys.analyst["Authorization"].removeprefix("Bearer ")
    with Client("http://testserver", key, transport=idle_client._transport) as client:
        estimate = client.estimate(dataset_id, epsilon=5.0)
        largest = estimate.max_admissible_epsilon
        assert largest is not None and 0.0 < largest < 1.0 and not estimate.admissible

        assert _estimate(client, _arguments(dataset_id, 5.0), Output(as_json=False, quiet=True)) == 0
        table = capsys.readouterr().out
        assert "largest admissible ε now" in table and f"{largest:g}" in table

        with pytest.raises(BudgetExceededError) as refused:
            client.fit(dataset_id, epsilon=5.0)
        assert refused.value.max_admissible_epsilon == largest
        assert f"the largest --epsilon this fit can have now: {largest:.4g}" in _hint(refused.value, key)
        assert client.fit(dataset_id, epsilon=largest).status == "queued"  # exactly that ε is admitted


def test_the_hint_says_when_nothing_is_admissible():
    problem = {"title": "Privacy budget exceeded", "status": 409, "detail": "…", "remaining_epsilon": 0.0,
               "max_admissible_epsilon": 0.0}  # fmt: skip
    error = BudgetExceededError(409, problem)
    assert error.max_admissible_epsilon == 0.0
    assert "no --epsilon of this fit is admissible now" in _hint(error, "key")
    older = BudgetExceededError(409, {**problem, "max_admissible_epsilon": None})  # a server that does not state it
    assert older.max_admissible_epsilon is None and _hint(older, "key") == "\n(remaining ε on this dataset: 0)"

"""The request path of issue 23: the plan cache (identical answers, keyed by every public input), the admitted fit
answered without reading it back, and group commit (a batch admits what separate transactions would)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
from api_helpers import Keys, make_client, upload
from fastapi.testclient import TestClient
from sqlalchemy import select

from privfit.api.admission import Admission, AdmissionGroup
from privfit.api.auth import Principal, authenticate
from privfit.api.planning import EstimateCache, PlanCache, plan_key
from privfit.db import Budget, Dataset, Job, LedgerEntry
from privfit.ledger import BudgetExceededError
from privfit.privacy import DeltaAllowance, PrivacyCost, get_grid
from privfit.solvers.base import PublicMetadata

FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.3}}


def test_cached_and_uncached_plans_answer_identically(idle_client: TestClient, idle_keys: Keys):
    dataset_id = upload(idle_client, idle_keys, epsilon=100.0)
    request = {"dataset_id": dataset_id, **FIT, "params": {"steps": 50}}
    plans: PlanCache = idle_client.app.state.plans
    first = idle_client.post("/v1/fits/estimate?include=rdp", headers=idle_keys.analyst, json=request)
    cached = idle_client.post("/v1/fits/estimate?include=rdp", headers=idle_keys.analyst, json=request)
    assert first.status_code == cached.status_code == 200, first.text
    assert plans.hits >= 1
    idle_client.app.state.plans = PlanCache(size=0)  # nothing kept: every request plans anew
    idle_client.app.state.estimates = EstimateCache(size=0)  # and renders its answer anew
    uncached = idle_client.post("/v1/fits/estimate?include=rdp", headers=idle_keys.analyst, json=request)
    assert first.content == cached.content == uncached.content
    other = idle_client.post("/v1/fits/estimate?include=rdp", headers=idle_keys.analyst,
                             json={**request, "params": {"steps": 60}})  # fmt: skip
    assert other.json()["settings"]["steps"] == 60 and other.json()["cost"] != first.json()["cost"]


def test_a_cached_estimate_is_the_fresh_answer_and_follows_the_ledger_of_every_process(
    idle_client: TestClient, idle_keys: Keys, database_url: str, tmp_path: Path
):
    """The estimate cache (api/planning.py, EstimateCache) answers the bytes a fresh estimate renders, and a fit
    admitted by ANOTHER API process (a second app on the same database: a cache of its own) changes the committed
    state the next estimate reads, hence its key: the answer counts the new fit, as an uncached one does."""
    dataset_id = upload(idle_client, idle_keys, epsilon=1.0)
    request = {"dataset_id": dataset_id, **FIT}
    estimates: EstimateCache = idle_client.app.state.estimates

    def estimate(query: str = "") -> bytes:
        response = idle_client.post(f"/v1/fits/estimate{query}", headers=idle_keys.analyst, json=request)
        assert response.status_code == 200, response.text
        return response.content

    first = estimate()
    hits = estimates.hits
    assert estimate() == first and estimates.hits == hits + 1
    with_rdp = estimate("?include=rdp")  # another part asked for: another entry
    assert with_rdp != first and "rdp" in idle_client.post(
        "/v1/fits/estimate?include=rdp", headers=idle_keys.analyst, json=request).json()["cost"]  # fmt: skip
    with make_client(database_url, tmp_path, workers=False) as other:  # another API process
        admitted = other.post("/v1/fits", headers=idle_keys.analyst, json=request)
        assert admitted.status_code == 202, admitted.text
    after = estimate()
    old, new = json.loads(first), json.loads(after)
    assert new["committed_epsilon_before"] > old["committed_epsilon_before"]
    assert new["committed_epsilon_before"] == pytest.approx(old["committed_epsilon_after"])
    assert new["max_admissible_epsilon"] < old["max_admissible_epsilon"]
    idle_client.app.state.estimates = EstimateCache(size=0)  # nothing kept: rendered anew
    idle_client.app.state.headroom.clear()
    assert estimate() == after


def test_an_admitted_fit_answers_what_reading_it_back_answers(idle_client: TestClient, idle_keys: Keys):
    """The 202 is built from the plan cache's JSON and the row just written; a GET reads the stored row."""
    dataset_id = upload(idle_client, idle_keys, epsilon=100.0)
    request = {"dataset_id": dataset_id, **FIT}
    estimate = idle_client.post("/v1/fits/estimate", headers=idle_keys.analyst, json=request).json()
    for _ in range(2):  # a cache miss, then a hit
        admitted = idle_client.post("/v1/fits", headers=idle_keys.analyst, json=request)
        assert admitted.status_code == 202, admitted.text
        read = idle_client.get(admitted.headers["Location"], headers=idle_keys.analyst)
        assert admitted.json() == read.json()
        assert admitted.json()["cost"] == estimate["cost"] and admitted.json()["settings"] == estimate["settings"]


def test_a_refused_plan_is_not_cached(idle_client: TestClient, idle_keys: Keys):
    dataset_id = upload(idle_client, idle_keys, epsilon=100.0)
    plans: PlanCache = idle_client.app.state.plans
    bad = {"dataset_id": dataset_id, **FIT, "params": {"steps": -1}}
    for _ in range(2):
        response = idle_client.post("/v1/fits/estimate", headers=idle_keys.analyst, json=bad)
        assert response.status_code == 422 and "steps" in response.text
    assert plans.hits == 0 and plans.misses == 2


def test_the_plan_key_holds_every_public_input():
    meta = PublicMetadata(n=100, d=3, row_norm_bound=1.0)
    budget = Budget(epsilon_max=1.0, delta_max=1e-6, grid_name="g", filter_orders=[8.0], filter_order_deltas=[5e-7],
                    filter_approximate_delta=1e-7, filter_slack_delta=5e-8, filter_version="v")  # fmt: skip
    params = {"steps": 1, "lr": 0.5}
    base = plan_key("dp_gd", "logistic", params, 0.3, meta, budget, None, ())
    assert base == plan_key("dp_gd", "logistic", {"lr": 0.5, "steps": 1}, 0.3, meta, budget, None, ())
    other_meta = PublicMetadata(n=101, d=3, row_norm_bound=1.0)
    changed = [
        plan_key("dp_gd", "logistic", {**params, "steps": 1.0}, 0.3, meta, budget, None, ()),  # 1.0 is not 1
        plan_key("dp_gd", "logistic", {**params, "steps": True}, 0.3, meta, budget, None, ()),
        plan_key("dp_sgd", "logistic", params, 0.3, meta, budget, None, ()),
        plan_key("dp_gd", "linear", params, 0.3, meta, budget, None, ()),
        plan_key("dp_gd", "logistic", params, 0.31, meta, budget, None, ()),
        plan_key("dp_gd", "logistic", params, 0.3, other_meta, budget, None, ()),
        plan_key("dp_gd", "logistic", params, 0.3, meta, budget, DeltaAllowance(1e-8, 1e-8, 2.0), ()),
        plan_key("dp_gd", "logistic", params, 0.3, meta, budget, None, (("cap", 1),)),
    ]
    budget.delta_max = 1e-7
    changed.append(plan_key("dp_gd", "logistic", params, 0.3, meta, budget, None, ()))
    budget.filter_slack_delta = 0.0
    changed.append(plan_key("dp_gd", "logistic", params, 0.3, meta, budget, None, ()))
    assert len({base, *changed}) == len(changed) + 1


def test_a_cached_cost_cannot_be_modified_in_place(idle_client: TestClient, idle_keys: Keys):
    dataset_id = upload(idle_client, idle_keys, epsilon=100.0)
    idle_client.post("/v1/fits/estimate", headers=idle_keys.analyst, json={"dataset_id": dataset_id, **FIT})
    (entry,) = idle_client.app.state.plans._entries.values()
    with pytest.raises(ValueError, match="read-only"):
        entry.plan.cost.rdp[0] = 0.0


def _admission(client: TestClient, dataset_id: str, principal: Principal, cost_of: dict) -> Admission:
    """An admission of a fit costing what ``cost_of``'s plan costs (the same plan object: the cache's)."""
    with client.app.state.db.read() as session:
        dataset = session.get_one(Dataset, dataset_id)
    (planned,) = [p for p in client.app.state.plans._entries.values() if p.cost == cost_of["cost"]]
    job_id = str(uuid.uuid4())
    row = {"id": job_id, "dataset_id": dataset_id, "api_key_id": principal.key_id, "idempotency_key": None,
           "request_hash": "0" * 64, "solver": "dp_gd", "model": "logistic", "params": planned.settings,
           "cost": planned.cost, "status": "queued"}  # fmt: skip
    return Admission(row, principal, dataset, planned.plan.cost, "dp_gd/logistic")


def test_a_batch_admits_in_order_and_each_member_gets_its_own_outcome(idle_client: TestClient, idle_keys: Keys):
    """One shared transaction: fits admitted in arrival order until the budget is full, then refused (409), and a
    revoked key's fit refused (401) without touching the others; the ledger holds exactly the admitted ones."""
    probe = upload(idle_client, idle_keys, epsilon=100.0)
    estimate = idle_client.post("/v1/fits/estimate?include=rdp", headers=idle_keys.owner,
                                json={"dataset_id": probe, **FIT})  # fmt: skip
    cost = estimate.json()["cost"]
    one = PrivacyCost(np.array(cost["rdp"], dtype=float), get_grid(cost["grid"]))
    limit = ((one * 2).epsilon(cost["delta"]).epsilon + (one * 3).epsilon(cost["delta"]).epsilon) / 2
    db = idle_client.app.state.db
    dataset_id = upload(idle_client, idle_keys, epsilon=limit)  # room for two of them, not three
    owner = authenticate(db, idle_keys.owner["Authorization"])
    analyst = authenticate(db, idle_keys.analyst["Authorization"])
    batch = [_admission(idle_client, dataset_id, owner, estimate.json()) for _ in range(4)]
    revoked = _admission(idle_client, dataset_id, analyst, estimate.json())
    assert idle_client.delete(f"/v1/keys/{analyst.key_id}", headers=idle_keys.admin).status_code == 204
    batch.insert(1, revoked)
    AdmissionGroup(db)._execute(batch)
    assert all(a.done for a in batch)
    assert revoked.error is not None and getattr(revoked.error, "status", None) == 401
    admitted = [a for a in batch if a.error is None]
    assert [a.job["id"] for a in admitted] == [batch[0].job["id"], batch[2].job["id"]]  # arrival order
    assert all(isinstance(a.error, BudgetExceededError) for a in batch[3:])
    with db.read() as session:
        jobs = set(session.scalars(select(Job.id).where(Job.dataset_id == dataset_id)))
        entries = session.scalars(select(LedgerEntry).where(LedgerEntry.dataset_id == dataset_id)).all()
    assert jobs == {a.job["id"] for a in admitted}
    assert sorted(e.budget_version for e in entries) == [1, 2] and {e.job_id for e in entries} == jobs
    budget = idle_client.get(f"/v1/datasets/{dataset_id}/budget", headers=idle_keys.owner).json()
    assert budget["committed_epsilon"] <= budget["epsilon_max"]


def test_a_batch_that_fails_as_a_whole_is_run_one_transaction_each(idle_client: TestClient, idle_keys: Keys):
    """Two fits under one Idempotency-Key in one batch: the shared transaction fails on the unique constraint, the
    members are run again alone — the first is admitted, the second gets the constraint's error (the API replays)."""
    dataset_id = upload(idle_client, idle_keys, epsilon=100.0)
    estimate = idle_client.post("/v1/fits/estimate?include=rdp", headers=idle_keys.owner,
                                json={"dataset_id": dataset_id, **FIT})  # fmt: skip
    owner = authenticate(idle_client.app.state.db, idle_keys.owner["Authorization"])
    first, second = (_admission(idle_client, dataset_id, owner, estimate.json()) for _ in range(2))
    first.job["idempotency_key"] = second.job["idempotency_key"] = "same"
    AdmissionGroup(idle_client.app.state.db)._execute([first, second])
    assert first.error is None and first.result is not None and first.result.id == first.job["id"]
    assert second.error is not None and "unique" in str(second.error).lower()
    ledger = idle_client.get(f"/v1/datasets/{dataset_id}/ledger", headers=idle_keys.owner).json()
    assert ledger["total"] == 1

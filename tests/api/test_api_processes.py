"""Real processes: `privfit serve` under 64 concurrent clients, and a `privfit worker` killed mid-fit."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from process_helpers import PRIVFIT, environment, keys_for, process, register, server

from privfit.privacy import PrivacyCost, get_grid


@pytest.mark.parametrize("api_workers", [1, 2])
@pytest.mark.parametrize("admitted", [5])
def test_64_concurrent_fit_requests_admit_exactly_k(database_url: str, tmp_path: Path, admitted: int, api_workers: int):
    """64 concurrent admissions against a budget that holds exactly K, through one API process or two (each
    grouping the admissions it receives into shared transactions, the two competing for the budget's lock)."""
    owner, _ = keys_for(database_url)
    headers = {"Authorization": f"Bearer {owner}"}
    fit = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.3}}
    with server(database_url, tmp_path, PRIVFIT_QUEUE="none", PRIVFIT_API_WORKERS=str(api_workers)) as base:
        probe = register(base, owner, 100.0)
        cost = httpx.post(f"{base}/v1/fits/estimate", headers=headers, json={"dataset_id": probe, **fit}).json()["cost"]
        one = PrivacyCost(np.array(cost["rdp"]), get_grid(cost["grid"]))
        limit = ((one * admitted).epsilon(1e-6).epsilon + (one * (admitted + 1)).epsilon(1e-6).epsilon) / 2
        dataset_id = register(base, owner, limit)

        def request(_: int) -> int:
            with httpx.Client(timeout=60) as client:
                return client.post(
                    f"{base}/v1/fits", headers=headers, json={"dataset_id": dataset_id, **fit}
                ).status_code

        with ThreadPoolExecutor(64) as pool:
            statuses = list(pool.map(request, range(64)))
        budget = httpx.get(f"{base}/v1/datasets/{dataset_id}/budget", headers=headers).json()
        ledger = httpx.get(f"{base}/v1/datasets/{dataset_id}/ledger", headers=headers).json()
    assert statuses.count(202) == admitted and statuses.count(409) == 64 - admitted, statuses
    assert budget["committed_epsilon"] <= budget["epsilon_max"]
    assert ledger["total"] == admitted


def test_worker_killed_mid_fit_keeps_the_charge_and_releases_nothing(database_url: str, tmp_path: Path):
    owner, _ = keys_for(database_url)
    headers = {"Authorization": f"Bearer {owner}"}
    worker_env = environment(database_url, tmp_path, PRIVFIT_LEASE_SECONDS="2", PRIVFIT_HEARTBEAT_SECONDS="0.2",
                             PRIVFIT_POLL_SECONDS="0.1")  # fmt: skip
    with server(database_url, tmp_path, PRIVFIT_QUEUE="none") as base:
        dataset_id = register(base, owner, 10.0)
        long_fit = {"dataset_id": dataset_id, "privacy": {"epsilon": 0.5}, "params": {"steps": 100_000}}
        fit_id = httpx.post(f"{base}/v1/fits", headers=headers, json=long_fit).json()["id"]
        queued_id = None
        with process([*PRIVFIT, "worker", "--concurrency", "1"], worker_env, tmp_path / "worker1.log") as worker:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                body = httpx.get(f"{base}/v1/fits/{fit_id}", headers=headers).json()
                if body["status"] == "running" and body["progress"] > 0:
                    break
                time.sleep(0.1)
            assert body["status"] == "running", body
            # A second fit waits in the queue behind the running one (one worker thread).
            short_fit = {"dataset_id": dataset_id, "privacy": {"epsilon": 0.5}}
            queued_id = httpx.post(f"{base}/v1/fits", headers=headers, json=short_fit).json()["id"]
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
        cancelled = httpx.post(f"{base}/v1/fits/{queued_id}/cancel", headers=headers).json()
        assert cancelled["status"] == "cancelled"
        with process([*PRIVFIT, "worker", "--concurrency", "1"], worker_env, tmp_path / "worker2.log"):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                body = httpx.get(f"{base}/v1/fits/{fit_id}", headers=headers).json()
                if body["status"] != "running":
                    break
                time.sleep(0.2)
        ledger = httpx.get(f"{base}/v1/datasets/{dataset_id}/ledger", headers=headers).json()["entries"]
    assert body["status"] == "failed" and body["error"]["type"] == "worker_lost" and "result" not in body
    kinds = sorted((entry["job_id"] == fit_id, entry["kind"]) for entry in ledger)
    assert kinds == [(False, "release"), (False, "reservation"), (True, "charge"), (True, "reservation")]

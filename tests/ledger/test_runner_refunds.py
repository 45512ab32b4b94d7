"""The job runner's refunds on SQLite and PostgreSQL (issue #18, part 3): a fit that ends before reading any row —
dataset deleted while queued, store unreachable, a transient error — is failed and refunded in one transaction; a
fit that read rows keeps its charge and shows the analyst a fixed error that names no exception."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from ledger_helpers import DELTA
from sqlalchemy import select

from privfit.datasets import parse_and_encode
from privfit.datasets.store import LocalDatasetStore
from privfit.db import ApiKey, Database, Dataset, Job, LedgerEntry
from privfit.jobs.runner import FAILED_AFTER_READING, run_job
from privfit.ledger import create_budget, reserve, status
from privfit.privacy import DEFAULT_GRID
from privfit.solvers.base import PublicMetadata
from privfit.solvers.registry import get_solver

SCHEMA = {
    "label": {"name": "y", "type": "binary", "positive": "1", "negative": "0"},
    "features": [{"name": "x", "type": "numeric", "lower": -1, "upper": 1}],
    "missing": "reject",
    "budget": {"epsilon": 5.0, "delta": DELTA},
}


def _csv(n: int = 200) -> bytes:
    x = np.linspace(-1, 1, n)
    return ("x,y\n" + "".join(f"{v:.4f},{int(v > 0)}\n" for v in x)).encode()


@pytest.fixture
def store(tmp_path: Path) -> LocalDatasetStore:
    return LocalDatasetStore(tmp_path / "store")


def _queued_fit(db: Database, store: LocalDatasetStore) -> tuple[str, str]:
    """A stored dataset with one admitted dp_gd fit (queued)."""
    encoded = parse_and_encode(_csv(), SCHEMA)
    key = store.put(encoded)
    key_id, dataset_id, job_id = (str(uuid.uuid4()) for _ in range(3))
    meta = PublicMetadata.from_dataset(encoded)
    plan = get_solver("dp_gd").plan({"steps": 5}, meta, target_epsilon=0.5, delta=DELTA, grid=DEFAULT_GRID)
    with db.write() as session:
        session.add(ApiKey(id=key_id, prefix=key_id[:12], secret_hash=uuid.uuid4().hex * 2, role="owner", name="o"))
        session.flush()
        session.add(Dataset(
            id=dataset_id, owner_key_id=key_id, name="d", schema_json={}, feature_names=list(encoded.feature_names),
            n=encoded.n, d=encoded.d, row_norm_bound=encoded.row_norm_bound, label_bound=encoded.label_bound,
            content_hash=encoded.content_hash, storage_key=key,
        ))  # fmt: skip
        session.flush()
        create_budget(session, dataset_id, 5.0, DELTA, DEFAULT_GRID)
        session.add(Job(id=job_id, dataset_id=dataset_id, api_key_id=key_id, request_hash="0" * 64, solver="dp_gd",
                        model="logistic", params=plan.resolved.model_dump(mode="json"), cost={}))  # fmt: skip
        session.flush()
        reserve(session, dataset_id, job_id, plan.cost)
    return dataset_id, job_id


def _run(db: Database, store: LocalDatasetStore, job_id: str) -> str | None:
    return run_job(db, store, job_id, "w1", lease_seconds=60.0, heartbeat_seconds=30.0)


def _outcome(db: Database, dataset_id: str, job_id: str) -> tuple[Job, list[str], float]:
    with db.read() as session:
        job = session.get(Job, job_id)
        kinds = sorted(session.execute(select(LedgerEntry.kind).where(LedgerEntry.job_id == job_id)).scalars())
        return job, kinds, status(session, dataset_id).committed_epsilon


def test_a_dataset_deleted_while_queued_is_refunded(database: Database, store: LocalDatasetStore):
    dataset_id, job_id = _queued_fit(database, store)
    with database.write() as session:
        session.get(Dataset, dataset_id).storage_key = None
    assert _run(database, store, job_id) == "failed"
    job, kinds, committed = _outcome(database, dataset_id, job_id)
    assert job.error["type"] == "dataset_deleted" and "refunded" in job.error["detail"]
    assert kinds == ["charge", "release", "reservation"] and committed == 0.0 and job.data_read_at is None


def test_an_unreachable_store_is_refunded(database: Database, store: LocalDatasetStore):
    dataset_id, job_id = _queued_fit(database, store)
    with database.read() as session:
        store.delete(session.get(Dataset, dataset_id).storage_key)
    assert _run(database, store, job_id) == "failed"
    job, kinds, committed = _outcome(database, dataset_id, job_id)
    assert job.error["type"] == "dataset_unavailable" and "refunded" in job.error["detail"]
    assert kinds == ["charge", "release", "reservation"] and committed == 0.0


def test_a_transient_error_before_reading_is_refunded(
    database: Database, store: LocalDatasetStore, monkeypatch: pytest.MonkeyPatch
):
    dataset_id, job_id = _queued_fit(database, store)

    def unreachable(key: str) -> None:
        raise ConnectionError("network is unreachable")

    monkeypatch.setattr(store, "get", unreachable)
    assert _run(database, store, job_id) == "failed"
    job, kinds, committed = _outcome(database, dataset_id, job_id)
    assert job.error["type"] == "fit_failed_before_reading" and "ConnectionError" not in str(job.error)
    assert kinds == ["charge", "release", "reservation"] and committed == 0.0


def test_a_failure_after_reading_keeps_the_charge_and_names_no_exception(
    database: Database, store: LocalDatasetStore, monkeypatch: pytest.MonkeyPatch
):
    dataset_id, job_id = _queued_fit(database, store)
    solver = get_solver("dp_gd")

    def data_dependent_failure(*args: object, **kwargs: object) -> None:
        raise FloatingPointError("row 17 has x = 0.4142")

    monkeypatch.setattr(type(solver), "fit", data_dependent_failure)
    assert _run(database, store, job_id) == "failed"
    job, kinds, committed = _outcome(database, dataset_id, job_id)
    assert job.error == FAILED_AFTER_READING  # fixed: no type, no message
    assert kinds == ["charge", "reservation"] and committed > 0.0 and job.data_read_at is not None


def test_a_fit_that_succeeds_keeps_its_charge(database: Database, store: LocalDatasetStore):
    dataset_id, job_id = _queued_fit(database, store)
    assert _run(database, store, job_id) == "succeeded"
    job, kinds, committed = _outcome(database, dataset_id, job_id)
    assert kinds == ["charge", "reservation"] and committed > 0.0 and job.result is not None

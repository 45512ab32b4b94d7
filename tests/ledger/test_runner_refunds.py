"""The job runner's refunds and re-runs on SQLite and PostgreSQL (issues #18 and #35): a fit that ends before reading
any row — dataset deleted while queued, store unreachable, a transient error — is failed and refunded in one
transaction; a fit that read rows keeps its charge and shows the analyst a fixed error that names no exception; a
fit stopped by its process's shutdown or by a MemoryError goes back to the queue and its next run releases exactly
what one fresh run would, with one charge, and nothing an analyst sees of the runs depends on the rows."""

from __future__ import annotations

import threading
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


def _csv(n: int = 200, first: float | None = None) -> bytes:
    x = np.linspace(-1, 1, n)
    if first is not None:  # a neighbouring dataset: the first row replaced
        x[0] = first
    return ("x,y\n" + "".join(f"{v:.4f},{int(v > 0)}\n" for v in x)).encode()


@pytest.fixture
def store(tmp_path: Path) -> LocalDatasetStore:
    return LocalDatasetStore(tmp_path / "store")


def _queued_fit(db: Database, store: LocalDatasetStore, steps: int = 5, csv: bytes | None = None) -> tuple[str, str]:
    """A stored dataset with one admitted dp_gd fit (queued)."""
    encoded = parse_and_encode(_csv() if csv is None else csv, SCHEMA)
    key = store.put(encoded)
    key_id, dataset_id, job_id = (str(uuid.uuid4()) for _ in range(3))
    meta = PublicMetadata.from_dataset(encoded)
    plan = get_solver("dp_gd").plan({"steps": steps}, meta, target_epsilon=0.5, delta=DELTA, grid=DEFAULT_GRID)
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


def _run(db: Database, store: LocalDatasetStore, job_id: str, stopping: threading.Event | None = None) -> str | None:
    return run_job(db, store, job_id, "w1", lease_seconds=60.0, heartbeat_seconds=30.0, stopping=stopping)


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

    monkeypatch.setattr(store, "read", unreachable)
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


class StopsAtPoll(threading.Event):
    """A process-stopping event that turns on at its ``poll``-th look: the solver's stop callback looks once before
    the rows are read and once per step, so the stop comes at a fixed, public step — never at a data-chosen one."""

    def __init__(self, poll: int) -> None:
        super().__init__()
        self.polls_left = poll

    def is_set(self) -> bool:
        self.polls_left -= 1
        return self.polls_left < 0 or super().is_set()


def _seeded_runs(monkeypatch: pytest.MonkeyPatch, *seeds: int) -> None:
    """Each run's generator, in order, from ``seeds`` (the runner's OS-seeded generator, made reproducible)."""
    generators = iter([np.random.default_rng(seed) for seed in seeds])
    monkeypatch.setattr("privfit.jobs.runner.secure_generator", lambda: next(generators))


def _observed(db: Database, dataset_id: str, job_id: str) -> tuple[object, ...]:
    """What an analyst sees of the job (status, progress, error, result or not) and its ledger kinds."""
    job, kinds, _ = _outcome(db, dataset_id, job_id)
    return job.status, job.progress, job.error, job.result is None, kinds


def test_a_fit_stopped_by_shutdown_runs_again_and_releases_one_fresh_run(
    database: Database, store: LocalDatasetStore, monkeypatch: pytest.MonkeyPatch
):
    dataset_id, job_id = _queued_fit(database, store, steps=50)
    _seeded_runs(monkeypatch, 1, 2, 2)
    assert _run(database, store, job_id, stopping=StopsAtPoll(10)) == "queued"
    job, kinds, committed = _outcome(database, dataset_id, job_id)
    assert job.result is None and job.progress == 0.0 and job.data_read_at is not None  # nothing of run 1 kept
    assert kinds == ["charge", "reservation"] and committed > 0.0
    assert _run(database, store, job_id) == "succeeded"
    _, reference = _queued_fit(database, store, steps=50)  # one uninterrupted run with run 2's randomness
    assert _run(database, store, reference) == "succeeded"
    rerun, kinds, _ = _outcome(database, dataset_id, job_id)
    with database.read() as session:
        fresh = session.get(Job, reference).result
    assert rerun.attempt == 2 and kinds == ["charge", "reservation"]  # charged once over both runs
    assert rerun.result["coefficients"] == fresh["coefficients"] and rerun.result["intercept"] == fresh["intercept"]


def test_a_run_that_carried_state_over_would_be_detected(
    database: Database, store: LocalDatasetStore, monkeypatch: pytest.MonkeyPatch
):
    """The check above is sharp: a second run that continued run 1's generator (state carried over) releases
    something else than a fresh run."""
    _, job_id = _queued_fit(database, store, steps=50)
    carried = np.random.default_rng(1)
    monkeypatch.setattr("privfit.jobs.runner.secure_generator", lambda: carried)  # the broken variant
    assert _run(database, store, job_id, stopping=StopsAtPoll(10)) == "queued"
    assert _run(database, store, job_id) == "succeeded"
    _seeded_runs(monkeypatch, 1)
    _, reference = _queued_fit(database, store, steps=50)
    assert _run(database, store, reference) == "succeeded"
    with database.read() as session:
        broken, fresh = session.get(Job, job_id).result, session.get(Job, reference).result
    assert broken["coefficients"] != fresh["coefficients"]


def test_what_an_analyst_sees_of_the_runs_is_the_same_on_neighbouring_datasets(
    database: Database, store: LocalDatasetStore, monkeypatch: pytest.MonkeyPatch
):
    seen = []
    for first in (-1.0, 1.0):  # one row replaced, at either end of its bounds
        dataset_id, job_id = _queued_fit(database, store, steps=50, csv=_csv(first=first))
        _seeded_runs(monkeypatch, 1, 2)
        observed = [_run(database, store, job_id, stopping=StopsAtPoll(10))]
        observed.append(_observed(database, dataset_id, job_id))
        observed.append(_run(database, store, job_id))
        status, progress, error, no_result, kinds = _observed(database, dataset_id, job_id)
        observed.append((status, progress, error, no_result, kinds))
        seen.append(observed)
    assert seen[0] == seen[1]


def test_a_memory_error_after_reading_runs_the_fit_again_not_failed(
    database: Database, store: LocalDatasetStore, monkeypatch: pytest.MonkeyPatch
):
    """Item 9 of issue 35: a crash whose cause is the machine (memory) does not show as a different status."""
    dataset_id, job_id = _queued_fit(database, store)
    solver = get_solver("dp_gd")
    real_fit = type(solver).fit
    calls = []

    def out_of_memory_once(self: object, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(type(solver), "fit", out_of_memory_once)
    assert _run(database, store, job_id) == "queued"
    assert _run(database, store, job_id) == "succeeded"
    job, kinds, _ = _outcome(database, dataset_id, job_id)
    assert job.attempt == 2 and kinds == ["charge", "reservation"] and job.result is not None


def test_a_fit_stopped_on_every_run_fails_with_the_one_fixed_error(database: Database, store: LocalDatasetStore):
    dataset_id, job_id = _queued_fit(database, store, steps=50)
    outcomes = [
        run_job(database, store, job_id, "w1", lease_seconds=60.0, heartbeat_seconds=30.0, max_attempts=2,
                stopping=StopsAtPoll(10))
        for _ in range(2)
    ]  # fmt: skip
    job, kinds, _ = _outcome(database, dataset_id, job_id)
    assert outcomes == ["queued", "failed"] and job.error == FAILED_AFTER_READING
    assert kinds == ["charge", "reservation"]

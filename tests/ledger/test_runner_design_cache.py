"""The job runner names the rows it read (the dataset's id and storage key), so that a dataset's second dp_gd fit in
a worker process reuses the float32 design of its first (privfit.solvers.design_cache, issue 40)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from ledger_helpers import DELTA

from privfit.datasets import parse_and_encode
from privfit.datasets.store import LocalDatasetStore
from privfit.db import ApiKey, Database, Dataset, Job
from privfit.jobs.runner import run_job
from privfit.ledger import create_budget, reserve
from privfit.privacy import DEFAULT_GRID
from privfit.solvers.base import PublicMetadata
from privfit.solvers.design_cache import design_cache
from privfit.solvers.float32_design import Float32Design
from privfit.solvers.registry import get_solver

SCHEMA = {
    "label": {"name": "y", "type": "binary", "positive": "1", "negative": "0"},
    "features": [{"name": "x", "type": "numeric", "lower": -1, "upper": 1}],
    "missing": "reject",
    "budget": {"epsilon": 5.0, "delta": DELTA},
}


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    design_cache().clear()
    yield
    design_cache().clear()


def _dataset_with_fits(db: Database, store: LocalDatasetStore, fits: int) -> tuple[str, str, list[str]]:
    """A stored dataset with ``fits`` admitted dp_gd fits (queued): its id, storage key and the jobs' ids."""
    x = np.linspace(-1, 1, 300)
    encoded = parse_and_encode(("x,y\n" + "".join(f"{v:.4f},{int(v > 0)}\n" for v in x)).encode(), SCHEMA)
    key = store.put(encoded)
    key_id, dataset_id = str(uuid.uuid4()), str(uuid.uuid4())
    meta = PublicMetadata.from_dataset(encoded)
    plan = get_solver("dp_gd").plan({"steps": 5}, meta, target_epsilon=0.5, delta=DELTA, grid=DEFAULT_GRID)
    jobs = [str(uuid.uuid4()) for _ in range(fits)]
    with db.write() as session:
        session.add(ApiKey(id=key_id, prefix=key_id[:12], secret_hash=uuid.uuid4().hex * 2, role="owner", name="o"))
        session.flush()
        session.add(Dataset(
            id=dataset_id, owner_key_id=key_id, name="d", schema_json=SCHEMA, feature_names=list(encoded.feature_names),
            n=encoded.n, d=encoded.d, row_norm_bound=encoded.row_norm_bound, label_bound=encoded.label_bound,
            content_hash=encoded.content_hash, storage_key=key,
        ))  # fmt: skip
        session.flush()
        create_budget(session, dataset_id, 5.0, DELTA, DEFAULT_GRID)
        for job_id in jobs:
            params = plan.resolved.model_dump(mode="json")
            session.add(Job(id=job_id, dataset_id=dataset_id, api_key_id=key_id, request_hash="0" * 64,
                            solver="dp_gd", model="logistic", params=params, cost={}))  # fmt: skip
            session.flush()
            reserve(session, dataset_id, job_id, plan.cost)
    return dataset_id, key, jobs


def test_a_datasets_second_fit_reuses_the_design_of_its_first(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalDatasetStore(tmp_path / "store")
    built: list[int] = []
    build = Float32Design.of.__func__  # type: ignore[attr-defined]

    def of(cls: type[Float32Design], X: np.ndarray) -> Float32Design:
        built.append(X.shape[0])
        return build(cls, X)

    monkeypatch.setattr(Float32Design, "of", classmethod(of))
    dataset_id, key, jobs = _dataset_with_fits(database, store, 2)
    for job_id in jobs:
        assert run_job(database, store, job_id, "w1", lease_seconds=60.0, heartbeat_seconds=30.0) == "succeeded"
    assert built == [300]
    kept = design_cache().keys()
    assert [entry[1] for entry in kept] == [(dataset_id, key)]  # type: ignore[index]


def test_a_deleted_datasets_design_leaves_the_workers_memory_before_its_next_job(
    database: Database, tmp_path: Path
) -> None:
    """The entry is keyed by (dataset id, storage key); once the dataset is deleted (its storage key cleared), the
    next job any dataset runs in that worker drops it first — and a live dataset's entry stays."""
    from privfit.db.models import utcnow
    from privfit.jobs.runner import forget_deleted_designs

    store = LocalDatasetStore(tmp_path / "store")
    deleted_id, deleted_key, deleted_jobs = _dataset_with_fits(database, store, 1)
    live_id, live_key, live_jobs = _dataset_with_fits(database, store, 2)
    for job_id in (deleted_jobs[0], live_jobs[0]):
        assert run_job(database, store, job_id, "w1", lease_seconds=60.0, heartbeat_seconds=30.0) == "succeeded"
    assert design_cache().dataset_keys() == {(deleted_id, deleted_key), (live_id, live_key)}
    assert forget_deleted_designs(database) == 0
    with database.write() as session:
        row = session.get(Dataset, deleted_id)
        row.deleted_at, row.storage_key = utcnow(), None
    assert run_job(database, store, live_jobs[1], "w1", lease_seconds=60.0, heartbeat_seconds=30.0) == "succeeded"
    assert design_cache().dataset_keys() == {(live_id, live_key)}

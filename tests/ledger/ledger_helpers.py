"""Rows the ledger and job tests need: a dataset with its budget and queued job rows, and a fit's cost."""

from __future__ import annotations

import uuid

from privfit.db import ApiKey, Database, Dataset, Job
from privfit.ledger import create_budget
from privfit.privacy import DEFAULT_GRID, PrivacyCost, gaussian_rdp

DELTA = 1e-6


def fit_cost(sigma: float = 20.0) -> PrivacyCost:
    return PrivacyCost(gaussian_rdp(DEFAULT_GRID, sigma=sigma))


def make_dataset(db: Database, epsilon_max: float, jobs: int = 0) -> tuple[str, list[str]]:
    """A dataset with a budget and ``jobs`` queued job rows (the ledger's foreign keys need them)."""
    key_id, dataset_id = str(uuid.uuid4()), str(uuid.uuid4())
    job_ids = [str(uuid.uuid4()) for _ in range(jobs)]
    with db.write() as session:
        session.add(ApiKey(id=key_id, prefix=key_id[:12], secret_hash=uuid.uuid4().hex * 2, role="owner", name="t"))
        session.flush()
        session.add(Dataset(
            id=dataset_id, owner_key_id=key_id, name="d", schema_json={}, feature_names=["x"], n=100, d=1,
            row_norm_bound=1.0, label_bound=1.0, content_hash="0" * 64, storage_key=None,
        ))  # fmt: skip
        session.flush()
        create_budget(session, dataset_id, epsilon_max, DELTA, DEFAULT_GRID)
        for job_id in job_ids:
            session.add(Job(
                id=job_id, dataset_id=dataset_id, api_key_id=key_id, request_hash="0" * 64, solver="dp_gd",
                model="logistic", params={}, cost={},
            ))  # fmt: skip
    return dataset_id, job_ids

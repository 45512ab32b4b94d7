"""Privacy domains at the ledger (issue 37, item 2), on SQLite and PostgreSQL: every ledger function given a member
dataset works on its domain's budget, and threads fitting two members at once never admit more than the one budget
does fit after fit."""

from __future__ import annotations

import threading
import uuid

from ledger_helpers import make_dataset
from sqlalchemy import select

from privfit.db import Budget, Database, Dataset, Job, LedgerEntry
from privfit.ledger import BudgetExceededError, charge, reserve, status
from privfit.ledger.ledger import budget_filter
from privfit.privacy import PrivacyCost

FIT = PrivacyCost.pure_dp(0.1)


def member_of(db: Database, domain: str, jobs: int) -> tuple[str, list[str]]:
    """A dataset registered into ``domain``'s privacy domain (no budget of its own) and ``jobs`` queued jobs on it."""
    with db.write() as session:
        first = session.get_one(Dataset, domain)
        member_id = str(uuid.uuid4())
        session.add(Dataset(id=member_id, owner_key_id=first.owner_key_id, name="m", schema_json={},
                            feature_names=["x"], n=100, d=1, row_norm_bound=1.0, label_bound=1.0, content_hash="1" * 64,
                            budget_dataset_id=domain))  # fmt: skip
        session.flush()
        job_ids = [str(uuid.uuid4()) for _ in range(jobs)]
        for job_id in job_ids:
            session.add(Job(id=job_id, dataset_id=member_id, api_key_id=first.owner_key_id, request_hash="0" * 64,
                            solver="dp_gd", model="logistic", params={}, cost={}))  # fmt: skip
    return member_id, job_ids


def test_a_member_spends_its_domains_budget(database: Database):
    domain, (job_a,) = make_dataset(database, epsilon_max=1.0, jobs=1)
    member, (job_b,) = member_of(database, domain, 1)
    with database.write() as session:
        reserve(session, domain, job_a, FIT)
        reserve(session, member, job_b, FIT)
        charge(session, member, job_b)
    with database.read() as session:
        assert session.get(Budget, member) is None
        entries = session.scalars(select(LedgerEntry).where(LedgerEntry.dataset_id == domain)).all()
        assert [(e.job_id, e.kind) for e in entries] == [(job_a, "reservation"), (job_b, "reservation"),
                                                          (job_b, "charge")]  # fmt: skip
        assert status(session, member) == status(session, domain)


def test_threads_fitting_two_members_never_exceed_the_one_budget(database: Database):
    domain, jobs_a = make_dataset(database, epsilon_max=1.0, jobs=12)
    member, jobs_b = member_of(database, domain, 12)
    with database.read() as session:
        privacy_filter = budget_filter(session.get_one(Budget, domain))
    allowed = 0
    while privacy_filter.admits(FIT * (allowed + 1)):
        allowed += 1
    assert 2 <= allowed < 12  # each member alone could take every fit it tries
    # one fit on each member first, in order: both members spend from the one budget whatever the race's schedule
    admitted: list[str] = [jobs_a.pop(0), jobs_b.pop(0)]
    with database.write() as session:
        reserve(session, domain, admitted[0], FIT)
    with database.write() as session:
        reserve(session, member, admitted[1], FIT)
    lock = threading.Lock()
    start = threading.Barrier(4)

    def run(dataset_id: str, job_ids: list[str]) -> None:
        start.wait()
        for job_id in job_ids:
            try:
                with database.write() as session:
                    reserve(session, dataset_id, job_id, FIT)
                with lock:
                    admitted.append(job_id)
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=run, args=(d, jobs[i::2])) for d, jobs in ((domain, jobs_a), (member, jobs_b))
               for i in range(2)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == allowed  # exactly as many as fit after fit: no overspend, no lost admission
    with database.read() as session:
        budget = session.get_one(Budget, domain)
        assert budget_filter(budget).measure(PrivacyCost.pure_dp(0.1) * allowed).share <= 1.0
        assert status(session, domain).entries == allowed

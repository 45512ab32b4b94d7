"""API keys with roles (owner, analyst, admin): ``Authorization: Bearer pf_<prefix>_<secret>``.

Only SHA-256 digests of keys are stored; a key is shown once, at creation. Owners create datasets and see
their ledgers; analysts fit, estimate and read the budgets of datasets they were granted; admins read every
dataset's metadata and ledger and manage keys. Nobody can read rows back.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select
from sqlalchemy.orm import Session

from privfit.db import ApiKey, Database, Dataset, DatasetGrant

from .identifiers import is_resource_id, normalize_id
from .problems import Problem, dataset_not_found

ROLES = ("owner", "analyst", "admin")


@dataclass(frozen=True)
class Principal:
    """The authenticated caller."""

    key_id: str
    role: str
    name: str


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_api_key(db: Database, role: str, name: str = "") -> tuple[str, str]:
    """Create a key; returns (key id, the secret key string — shown once)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    prefix = secrets.token_hex(6)
    key = f"pf_{prefix}_{secrets.token_urlsafe(32)}"
    key_id = str(uuid.uuid4())
    with db.write() as session:
        session.add(ApiKey(id=key_id, prefix=prefix, secret_hash=_digest(key), role=role, name=name))
    return key_id, key


_PREFIX = re.compile(r"[0-9a-f]{1,16}")

#: Documents the scheme in OpenAPI (every route that authenticates lists it); the header is read by
#: :func:`authenticate`, which gives the same 401 for a missing, malformed, unknown or revoked key.
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key: `Authorization: Bearer pf_<prefix>_<secret>` (created by an admin; shown once).",
)


def _unauthorized() -> Problem:
    return Problem(401, "Unauthorized", "missing or invalid API key (use 'Authorization: Bearer <key>')",
                   headers={"WWW-Authenticate": "Bearer"})  # fmt: skip


def authenticate(db: Database, authorization: str | None) -> Principal:
    """Resolve a bearer key to its principal, or raise 401.

    Nothing is cached: every request reads the key's row, so a revoked key (``revoked_at`` set) is refused from
    the next request on, in every API process.
    """
    if not authorization or not authorization.startswith("Bearer "):
        raise _unauthorized()
    key = authorization.removeprefix("Bearer ").strip()
    parts = key.split("_")
    if len(parts) < 3 or parts[0] != "pf" or not _PREFIX.fullmatch(parts[1]):
        raise _unauthorized()
    columns = (ApiKey.id, ApiKey.role, ApiKey.name, ApiKey.secret_hash, ApiKey.revoked_at)
    with db.read() as session:  # the columns only: no ORM object is built for the hottest query of the API
        row = session.execute(select(*columns).where(ApiKey.prefix == parts[1])).one_or_none()
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.secret_hash, _digest(key)):
        raise _unauthorized()
    return Principal(row.id, row.role, row.name)


def get_db(request: Request) -> Database:
    return request.app.state.db


def current_principal(
    request: Request,
    _: HTTPAuthorizationCredentials | None = Depends(bearer_scheme),  # noqa: B008
) -> Principal:
    return authenticate(request.app.state.db, request.headers.get("authorization"))


def require_role(*roles: str) -> Callable[..., Coroutine[Any, Any, Principal]]:
    """A dependency that admits only the given roles (403 otherwise). It is ``async``: a comparison of strings
    needs no thread of the pool (a sync dependency would cost every request a second trip to the pool)."""

    async def dependency(principal: Principal = Depends(current_principal)) -> Principal:  # noqa: B008
        if principal.role not in roles:
            raise Problem(403, "Forbidden", f"this endpoint needs one of the roles: {', '.join(roles)}")
        return principal

    return dependency


def privileged(principal: Principal, dataset: Dataset) -> bool:
    """Whether ``principal`` is ``dataset``'s owner or an admin: they see all of it — every fit and evaluation on it,
    its whole ledger, its content hash. Anyone else who may see it is an analyst it was granted to, who sees its own
    fits, evaluations and ledger entries, and of the others' activity only the budget's totals."""
    return principal.role == "admin" or dataset.owner_key_id == principal.key_id


def visible_dataset(
    db: Database,
    dataset_id: str,
    principal: Principal,
    *,
    manage: bool = False,
    include_deleted: bool = False,
    session: Session | None = None,
) -> Dataset:
    """The dataset if ``principal`` may see it (``manage``: only its owner or an admin), else 404/403.

    Whatever the reason a dataset cannot be seen — no such id, a malformed id (never sent to the database), another
    owner's dataset, an analyst without a grant, a deleted dataset — the answer is the same
    :func:`~privfit.api.problems.dataset_not_found` (only the requested id differs), so ids of others cannot be
    probed. A deleted dataset is visible only if ``include_deleted`` and the caller is its owner or an admin (its
    ledger, budget and fits stay readable to them); to analysts, granted or not, it does not exist. ``manage`` on a
    dataset the caller can see but does not own is 403. The reads run in ``session`` when given (a caller that
    reads more in the same transaction), else in a session of their own.
    """
    if not is_resource_id(dataset_id):
        raise dataset_not_found(dataset_id)
    if session is None:
        with db.read() as own:
            return _visible_dataset(own, dataset_id, principal, manage=manage, include_deleted=include_deleted)
    return _visible_dataset(session, dataset_id, principal, manage=manage, include_deleted=include_deleted)


def _visible_dataset(
    session: Session, dataset_id: str, principal: Principal, *, manage: bool, include_deleted: bool
) -> Dataset:
    def granted(dataset: Dataset) -> bool:
        return (
            session.execute(
                select(DatasetGrant.id).where(
                    DatasetGrant.dataset_id == dataset.id, DatasetGrant.api_key_id == principal.key_id
                )
            ).first()
            is not None
        )

    dataset = session.get(Dataset, normalize_id(dataset_id))
    return check_visible(dataset, dataset_id, principal, granted, manage=manage, include_deleted=include_deleted)


def check_visible(
    dataset: Dataset | None,
    dataset_id: str,
    principal: Principal,
    granted: Callable[[Dataset], bool],
    *,
    manage: bool = False,
    include_deleted: bool = False,
) -> Dataset:
    """The rule of :func:`visible_dataset` applied to ``dataset`` as read (None: no row with the id ``dataset_id``
    asked for), ``granted(dataset)`` telling whether ``principal`` holds a grant on it (asked only of a caller who
    is neither its owner nor an admin). For a caller that read the dataset and the grant itself, e.g. in one
    statement with the other rows it needs (:func:`privfit.api.routers.fits.admission_inputs`)."""
    if dataset is None:
        raise dataset_not_found(dataset_id)
    sees_all = privileged(principal, dataset)
    if dataset.deleted_at is not None and not (include_deleted and sees_all):
        raise dataset_not_found(dataset_id)
    if sees_all:
        return dataset
    if not granted(dataset):
        raise dataset_not_found(dataset_id)
    if manage:
        raise Problem(403, "Forbidden", "only the dataset's owner can do this")
    return dataset


def usable_dataset(db: Database, dataset_id: str, principal: Principal, *, session: Session | None = None) -> Dataset:
    """The dataset for a new fit or estimate: as :func:`visible_dataset`, but a deleted dataset is refused to its
    owner and admins with 410 Gone (its data was purged; its ledger stays readable) instead of 404."""
    return check_usable(visible_dataset(db, dataset_id, principal, include_deleted=True, session=session), dataset_id)


def check_usable(dataset: Dataset, dataset_id: str) -> Dataset:
    """``dataset`` (visible to the caller, deleted ones included) if it can still be fitted; 410 Gone if deleted."""
    if dataset.deleted_at is not None:
        raise Problem(410, "Dataset deleted", f"dataset {dataset_id} was deleted and its data purged; it cannot be "
                      "fitted any more (its budget and ledger stay readable)", field="dataset_id")  # fmt: skip
    return dataset


def confirm_access(session: Session, principal: Principal, dataset: Dataset) -> None:
    """In the write transaction that admits a fit: lock the caller's key row (and, for a grantee, its grant row)
    against concurrent revocation and check both still stand — 401 if the key was revoked, the uniform 404 if
    the grant was.

    With the rows locked (``FOR SHARE`` on PostgreSQL; SQLite serialises writers), a revocation either commits
    first — then this sees it and nothing is admitted — or waits for this transaction, and the revocation's
    cancellation of the key's (or grantee's) queued and running fits, which runs after it commits, sees the new
    fit. So no fit is admitted for a key or grant after its revocation has cancelled the others.
    """
    key = session.execute(
        select(ApiKey.revoked_at).where(ApiKey.id == principal.key_id).with_for_update(read=True)
    ).first()
    if key is None or key.revoked_at is not None:
        raise _unauthorized()
    if privileged(principal, dataset):
        return
    granted = session.execute(
        select(DatasetGrant.id)
        .where(DatasetGrant.dataset_id == dataset.id, DatasetGrant.api_key_id == principal.key_id)
        .with_for_update(read=True)
    ).first()
    if granted is None:
        raise dataset_not_found(dataset.id)

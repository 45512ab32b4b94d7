"""API keys with roles (owner, analyst, admin): ``Authorization: Bearer pf_<prefix>_<secret>``.

Only SHA-256 digests of keys are stored; a key is shown once, at creation. Owners create datasets and see
their ledgers; analysts fit, estimate and read the budgets of datasets they were granted; admins read every
dataset's metadata and ledger and manage keys. Nobody can read rows back.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Depends, Request
from sqlalchemy import select

from privfit.db import ApiKey, Database, Dataset, DatasetGrant

from .problems import Problem

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


def authenticate(db: Database, authorization: str | None) -> Principal:
    """Resolve a bearer key to its principal, or raise 401."""
    unauthorized = Problem(401, "Unauthorized", "missing or invalid API key (use 'Authorization: Bearer <key>')")
    if not authorization or not authorization.startswith("Bearer "):
        raise unauthorized
    key = authorization.removeprefix("Bearer ").strip()
    parts = key.split("_")
    if len(parts) < 3 or parts[0] != "pf":
        raise unauthorized
    with db.read() as session:
        row = session.execute(select(ApiKey).where(ApiKey.prefix == parts[1])).scalar_one_or_none()
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.secret_hash, _digest(key)):
        raise unauthorized
    return Principal(row.id, row.role, row.name)


def get_db(request: Request) -> Database:
    return request.app.state.db


def current_principal(request: Request) -> Principal:
    return authenticate(request.app.state.db, request.headers.get("authorization"))


def require_role(*roles: str) -> Callable[..., Principal]:
    """A dependency that admits only the given roles (403 otherwise)."""

    def dependency(principal: Principal = Depends(current_principal)) -> Principal:  # noqa: B008
        if principal.role not in roles:
            raise Problem(403, "Forbidden", f"this endpoint needs one of the roles: {', '.join(roles)}")
        return principal

    return dependency


def visible_dataset(
    db: Database, dataset_id: str, principal: Principal, *, manage: bool = False, include_deleted: bool = False
) -> Dataset:
    """The dataset if ``principal`` may see it (``manage``: only its owner or an admin), else 404/403.

    An analyst without a grant gets 404, so dataset ids of others cannot be probed. A deleted dataset is 404 unless
    ``include_deleted`` and the caller is its owner or an admin (its ledger, budget and fits stay readable to
    them); to analysts, granted or not, a deleted dataset does not exist.
    """
    with db.read() as session:
        dataset = session.get(Dataset, dataset_id)
        if dataset is None:
            raise Problem(404, "Not Found", f"dataset {dataset_id} does not exist")
        privileged = principal.role == "admin" or dataset.owner_key_id == principal.key_id
        if dataset.deleted_at is not None and not (include_deleted and privileged):
            raise Problem(404, "Not Found", f"dataset {dataset_id} does not exist")
        if privileged:
            return dataset
        granted = session.execute(
            select(DatasetGrant.id).where(
                DatasetGrant.dataset_id == dataset_id, DatasetGrant.api_key_id == principal.key_id
            )
        ).first()
    if granted is None:
        raise Problem(404, "Not Found", f"dataset {dataset_id} does not exist")
    if manage:
        raise Problem(403, "Forbidden", "only the dataset's owner can do this")
    return dataset


def usable_dataset(db: Database, dataset_id: str, principal: Principal) -> Dataset:
    """The dataset for a new fit or estimate: as :func:`visible_dataset`, but a deleted dataset is refused to its
    owner and admins with 410 Gone (its data was purged; its ledger stays readable) instead of 404."""
    dataset = visible_dataset(db, dataset_id, principal, include_deleted=True)
    if dataset.deleted_at is not None:
        raise Problem(410, "Dataset deleted", f"dataset {dataset_id} was deleted and its data purged; it cannot be "
                      "fitted any more (its budget and ledger stay readable)", field="dataset_id")  # fmt: skip
    return dataset

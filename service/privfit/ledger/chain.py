"""The ledger's hash chain (issue 37, item 4): every entry carries the hash of its content and of the entry before it
in the same budget, so an auditor can check offline that no entry was edited, removed or moved.

**What is hashed.** An entry's *content* (:func:`entry_content`) is everything the ledger records of it: the
dataset, its place in the budget (``sequence``, the budget version it produced), its kind and subject (fit,
evaluation or preprocessing), its RDP curve, δ parts, pure-ε bound and Gaussian-DP μ², grid and formula version,
its own ε and optimal order, the committed ε after it, its description and its time. The μ² is a member of the
content only when the entry has one (``gdp_mu_squared`` not NULL): no entry before revision 0014 has one, so each of
those keeps the hash it was chained with, under the same format. Its hash (:func:`entry_hash`) is

    h_i = SHA-256("privfit-ledger-chain/v1" ‖ "\\n" ‖ h_{i−1} ‖ "\\n" ‖ canonical JSON of content_i)

with h_0, the *genesis* of the budget (:func:`genesis_hash`), the SHA-256 of the format name and the dataset id.
Canonical JSON is sorted keys, no spaces, UTF-8, numbers as Python's shortest round-trip ``repr`` of the stored
float (both databases store IEEE doubles, so a value read back hashes as it was written; −0 is hashed as 0, which
SQLite returns for it); +∞ (no bound at an order,
no pure-ε bound) is ``null``, as the ledger stores it; the time is UTC with microseconds.

**Where the chain is kept.** :func:`privfit.ledger.ledger._entry` computes h_i when it appends an entry, with the
budget row locked (every entry of a budget is appended under that lock, so the chain is a total order), stores
h_{i−1} and h_i on the entry and h_i on the budget (``chain_head``). Nothing else writes ledger entries.

**What a check shows, and what it does not.** :func:`verify` walks an export (``GET …/ledger/export``, JSON lines):
each entry must name the hash of the one before it (genesis for the first) and hash to what it states. Editing an
entry's content breaks its own hash; deleting or reordering entries breaks the next entry's link; the first entry
that fails is reported. Someone who can write the database could rewrite an entry *and* every hash after it: the
chain is then consistent again, which only an anchor kept outside the database reveals — a head hash recorded
earlier (an earlier export's ``head``, ``privfit ledger verify --head``) must still be on the chain. Publishing
the head from time to time (a ticket, a signed mail) makes the ledger tamper-evident up to that point.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

FORMAT = "privfit-ledger-chain/v1"
"""The name and version of the chain's hashing rule (part of every hash, and of an export's header)."""

_HASH_LENGTH = 64


def genesis_hash(dataset_id: str) -> str:
    """h_0 of the budget of ``dataset_id``: what its first entry names as the previous hash."""
    return hashlib.sha256(f"{FORMAT}\ngenesis\n{dataset_id}".encode()).hexdigest()


def _number(value: float | int | None) -> float | None:
    """A stored float as the chain hashes it: a float, or None for +∞ (the ledger's JSON null)."""
    if value is None:
        return None
    number = float(value)
    if math.isinf(number) and number > 0:
        return None
    if not math.isfinite(number):
        raise ValueError(f"a ledger number must be finite or +inf, got {value!r}")
    return number + 0.0  # -0.0 becomes 0.0: SQLite stores a negative zero as 0


def timestamp(value: datetime) -> str:
    """``value`` in UTC with microseconds (SQLite returns naive datetimes, which the ledger writes in UTC)."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entry_content(entry: Any) -> dict[str, Any]:
    """The hashed content of a :class:`~privfit.db.models.LedgerEntry` (or any object with its attributes; one
    without ``gdp_mu_squared``, as revision 0010 reads the entries, has no GDP bound)."""
    content: dict[str, Any] = {
        "dataset_id": entry.dataset_id,
        "sequence": int(entry.budget_version),
        "kind": entry.kind,
        "job_id": entry.job_id,
        "evaluation_id": entry.evaluation_id,
        "preprocessing_dataset_id": entry.preprocessing_dataset_id,
        "rdp": [_number(value) for value in entry.rdp],
        "extra_delta": _number(entry.extra_delta),
        "approx_delta": _number(entry.approx_delta),
        "pure_epsilon": _number(entry.pure_epsilon),
        "grid": entry.grid_name,
        "formula_version": entry.formula_version,
        "epsilon": _number(entry.epsilon),
        "optimal_order": _number(entry.optimal_order),
        "committed_epsilon_after": _number(entry.committed_epsilon_after),
        "description": entry.description,
        "created_at": timestamp(entry.created_at),
    }
    gdp_mu_squared = _number(getattr(entry, "gdp_mu_squared", None))
    if gdp_mu_squared is not None:  # only a finite bound is hashed (module docstring): +∞ hashes as an entry without
        content["gdp_mu_squared"] = gdp_mu_squared
    return content


def canonical(content: dict[str, Any]) -> str:
    """The canonical JSON of ``content`` (sorted keys, no spaces, UTF-8, no NaN)."""
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def entry_hash(previous_hash: str, content: dict[str, Any]) -> str:
    """h_i from h_{i−1} and the entry's content (module docstring)."""
    return hashlib.sha256(f"{FORMAT}\n{previous_hash}\n{canonical(content)}".encode()).hexdigest()


@dataclass(frozen=True)
class Verification:
    """The result of :func:`verify`.

    Attributes:
        ok: every entry links to the one before it and hashes to what it states (and the anchors hold).
        entries: how many entries were read.
        head: the last entry's hash (the genesis for an empty ledger): the value to record as an anchor.
        first_bad: the 1-based position of the first entry that fails (0 for a failing header or anchor), else None.
        problem: what failed there, in one sentence, else None.
    """

    ok: bool
    entries: int
    head: str
    first_bad: int | None = None
    problem: str | None = None


class ExportFormatError(ValueError):
    """An export that is not JSON lines of the chain's format (a truncated or foreign file)."""


def parse_export(lines: Iterable[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An export's header and its entry records, in file order (blank lines are skipped)."""
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ExportFormatError(f"line {number} is not JSON: {error.msg}") from error
        if not isinstance(record, dict):
            raise ExportFormatError(f"line {number} is not a JSON object")
        records.append(record)
    if not records or records[0].get("format") != FORMAT:
        raise ExportFormatError(f"the first line is not a {FORMAT} header")
    return records[0], records[1:]


def _is_hash(value: Any) -> bool:
    return isinstance(value, str) and len(value) == _HASH_LENGTH and all(c in "0123456789abcdef" for c in value)


def verify(header: dict[str, Any], records: Sequence[dict[str, Any]], anchors: Sequence[str] = ()) -> Verification:
    """Check an export (:func:`parse_export`): the first record links to the genesis of the header's dataset, each
    next one to the one before, each hashes to its stated ``entry_hash``, every record is of that dataset, the last
    hash is the header's ``head``, and each of ``anchors`` (head hashes recorded earlier) is on the chain."""
    dataset_id = header.get("dataset_id")
    if not isinstance(dataset_id, str):
        return Verification(False, 0, "", 0, "the header names no dataset_id")
    previous = genesis_hash(dataset_id)
    seen = {previous}
    for position, record in enumerate(records, start=1):
        content = record.get("content")
        stated = record.get("entry_hash")
        if not isinstance(content, dict) or not _is_hash(stated):
            return Verification(False, position - 1, previous, position, "the record has no content or entry_hash")
        if content.get("dataset_id") != dataset_id:
            return Verification(False, position - 1, previous, position,
                                f"the entry is of dataset {content.get('dataset_id')!r}, not {dataset_id}")  # fmt: skip
        if record.get("previous_hash") != previous:
            return Verification(False, position - 1, previous, position,
                                "it does not link to the entry before it (an entry was removed, inserted or moved "
                                "here)")  # fmt: skip
        try:
            recomputed = entry_hash(previous, content)
        except ValueError as error:  # a NaN in the content
            return Verification(False, position - 1, previous, position, f"its content cannot be hashed: {error}")
        if recomputed != stated:
            return Verification(False, position - 1, previous, position,
                                "its content does not hash to its entry_hash (the entry was edited)")  # fmt: skip
        previous = stated
        seen.add(previous)
    if header.get("head") != previous:
        return Verification(False, len(records), previous, 0,
                            "the last entry is not the budget's head (entries after it were removed)")  # fmt: skip
    for anchor in anchors:
        if anchor not in seen:
            return Verification(False, len(records), previous, 0,
                                f"the anchor {anchor} is not on the chain (the ledger was rewritten or truncated "
                                "since it was recorded)")  # fmt: skip
    return Verification(True, len(records), previous)

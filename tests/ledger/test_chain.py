"""The ledger's hash chain on its own (:mod:`privfit.ledger.chain`): the hash is a function of every recorded field,
stable across the forms a database returns (naive SQLite times, +∞ as null, JSON numbers), and :func:`verify`
names the first entry that was edited, removed, inserted or moved, a truncated end and a broken anchor. The same
checks on entries written by the ledger and tampered with in SQLite and PostgreSQL are in
tests/api/test_api_ledger_chain.py."""

from __future__ import annotations

import copy
import math
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from privfit.ledger.chain import (
    FORMAT,
    ExportFormatError,
    canonical,
    entry_content,
    entry_hash,
    genesis_hash,
    parse_export,
    verify,
)

DATASET = "7d1b5c1e-0000-4000-8000-000000000001"

#: The hash of ``_entry(2)`` after the genesis as the chain hashed it before entries could record a Gaussian-DP μ²
#: (revision 0014): an entry without one (every entry written before) must keep it.
HASH_WITHOUT_GDP = "abcaac7815bd8fa0366f8613a344abf785cc86c151854f72637cd87ad6fbf13a"


def _entry(sequence: int, **changes: Any) -> SimpleNamespace:
    fields: dict[str, Any] = {
        "dataset_id": DATASET, "budget_version": sequence, "kind": "reservation", "job_id": f"job-{sequence}",
        "evaluation_id": None, "preprocessing_dataset_id": None, "rdp": [0.5 * sequence, None, 1e-3],
        "extra_delta": 0.0, "approx_delta": 0.0, "pure_epsilon": None, "grid_name": "dp-accounting-156/v1",
        "formula_version": "f/v1", "epsilon": 0.1 * sequence, "optimal_order": 8.0,
        "committed_epsilon_after": 0.25 * sequence, "description": "fit dp_gd",
        "created_at": datetime(2026, 11, 28, 12, 0, sequence, 123456, tzinfo=UTC),
    }  # fmt: skip
    return SimpleNamespace(**{**fields, **changes})


def _export(count: int = 5) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    previous, records = genesis_hash(DATASET), []
    for sequence in range(1, count + 1):
        content = entry_content(_entry(sequence))
        digest = entry_hash(previous, content)
        records.append({"previous_hash": previous, "entry_hash": digest, "content": content})
        previous = digest
    return {"format": FORMAT, "dataset_id": DATASET, "head": previous}, records


def test_an_intact_export_verifies_and_names_its_head():
    header, records = _export()
    result = verify(header, records)
    assert result.ok and result.entries == 5 and result.head == records[-1]["entry_hash"] == header["head"]
    assert verify({"format": FORMAT, "dataset_id": DATASET, "head": genesis_hash(DATASET)}, []).ok  # empty ledger


def test_every_field_is_in_the_hash():
    base = entry_content(_entry(3))
    reference = entry_hash("0" * 64, base)
    for name, value in base.items():
        changed = copy.deepcopy(base)
        if isinstance(value, list):
            changed[name] = [*value[:-1], 2e-3]
        elif isinstance(value, float):
            changed[name] = math.nextafter(value, math.inf)  # one ulp
        elif value is None:
            changed[name] = 1.0
        else:
            changed[name] = f"{value}x"
        assert entry_hash("0" * 64, changed) != reference, name
    assert entry_hash("1" * 64, base) != reference  # and the previous hash


def test_the_content_is_the_same_for_every_form_a_database_returns():
    """SQLite returns naive UTC times and 0 for a stored −0 (an evaluation's δ part is −0.0); PostgreSQL aware
    times in the session's zone; +∞ is stored as null; a JSON number may come back as an int."""
    written = entry_content(_entry(2))
    sqlite = entry_content(_entry(2, created_at=datetime(2026, 11, 28, 12, 0, 2, 123456)))
    zoned = entry_content(_entry(2, created_at=written_at(2).astimezone(timezone(timedelta(hours=-5)))))
    numbers = entry_content(_entry(2, rdp=[1, None, 1e-3], pure_epsilon=math.inf, extra_delta=-0.0))
    assert canonical(written) == canonical(sqlite) == canonical(zoned) == canonical(numbers)
    with pytest.raises(ValueError, match="finite"):
        entry_content(_entry(2, epsilon=math.nan))


def written_at(second: int) -> datetime:
    return datetime(2026, 11, 28, 12, 0, second, 123456, tzinfo=UTC)


def test_an_edited_entry_is_the_first_bad_one():
    header, records = _export()
    records[2]["content"]["rdp"][0] = 0.0  # a smaller charge
    result = verify(header, records)
    assert not result.ok and result.first_bad == 3 and "edited" in result.problem
    assert result.entries == 2 and result.head == records[1]["entry_hash"]


def test_a_rehashed_edit_breaks_the_next_link():
    header, records = _export()
    records[2]["content"]["epsilon"] = 0.0
    records[2]["entry_hash"] = entry_hash(records[2]["previous_hash"], records[2]["content"])
    result = verify(header, records)
    assert not result.ok and result.first_bad == 4 and "link" in result.problem


@pytest.mark.parametrize(
    ("change", "first_bad"),
    [
        (lambda rs: rs.pop(1), 2),  # removed: the third entry is now second and does not link
        (lambda rs: rs.insert(1, rs[3]), 2),  # a copy inserted
        (lambda rs: rs.__setitem__(slice(1, 3), [rs[2], rs[1]]), 2),  # two swapped
        (lambda rs: rs.pop(0), 1),  # the first removed: the next does not link to the genesis
    ],
    ids=["removed", "inserted", "swapped", "first-removed"],
)
def test_removed_inserted_and_moved_entries_are_found(change, first_bad):
    header, records = _export()
    change(records)
    result = verify(header, records)
    assert not result.ok and result.first_bad == first_bad and "link" in result.problem


def test_a_truncated_end_and_a_lost_anchor_are_found():
    header, records = _export()
    anchor = records[3]["entry_hash"]
    assert verify(header, records, anchors=[anchor]).ok
    truncated = verify(header, records[:3])
    assert not truncated.ok and truncated.first_bad == 0 and "head" in truncated.problem
    rewritten_header = {**header, "head": records[2]["entry_hash"]}  # the budget's head rewritten too
    lost = verify(rewritten_header, records[:3], anchors=[anchor])
    assert not lost.ok and "anchor" in lost.problem


def test_an_entry_of_another_dataset_and_a_foreign_file_are_refused():
    header, records = _export()
    records[1]["content"]["dataset_id"] = "another"
    assert verify(header, records).first_bad == 2
    with pytest.raises(ExportFormatError, match="header"):
        parse_export(['{"entries": 1}'])
    with pytest.raises(ExportFormatError, match="line 2"):
        parse_export([f'{{"format": "{FORMAT}", "dataset_id": "x"}}', "{not json"])


def test_a_gdp_bound_is_hashed_when_the_entry_has_one_and_an_entry_without_one_hashes_as_before():
    genesis = genesis_hash(DATASET)
    without = entry_content(_entry(2))
    assert "gdp_mu_squared" not in without and entry_hash(genesis, without) == HASH_WITHOUT_GDP
    for unbounded in (None, math.inf):  # NULL as the ledger stores "no bound", +∞ as a cost holds it
        assert entry_content(_entry(2, gdp_mu_squared=unbounded)) == without
    bounded = entry_content(_entry(2, gdp_mu_squared=0.04))
    assert bounded == {**without, "gdp_mu_squared": 0.04} and entry_hash(genesis, bounded) != HASH_WITHOUT_GDP
    one_ulp = entry_content(_entry(2, gdp_mu_squared=math.nextafter(0.04, math.inf)))
    assert entry_hash(genesis, one_ulp) != entry_hash(genesis, bounded)


@pytest.mark.parametrize(
    ("position", "tamper"),
    [
        (2, lambda content: content.update(gdp_mu_squared=0.01)),  # a smaller μ²
        (2, lambda content: content.pop("gdp_mu_squared")),  # the bound forgotten
        (2, lambda content: content.update(gdp_mu_squared=None)),  # ... or written as +∞
        (1, lambda content: content.update(gdp_mu_squared=0.0)),  # a bound given to an entry without one
    ],
    ids=["lowered", "dropped", "nulled", "added"],
)
def test_a_tampered_gdp_bound_fails_the_check(position, tamper):
    previous, records = genesis_hash(DATASET), []
    for sequence, gdp_mu_squared in ((1, None), (2, 0.04), (3, None)):
        content = entry_content(_entry(sequence, gdp_mu_squared=gdp_mu_squared))
        digest = entry_hash(previous, content)
        records.append({"previous_hash": previous, "entry_hash": digest, "content": content})
        previous = digest
    header = {"format": FORMAT, "dataset_id": DATASET, "head": previous}
    assert verify(header, records).ok
    tamper(records[position - 1]["content"])
    result = verify(header, records)
    assert not result.ok and result.first_bad == position and "edited" in result.problem

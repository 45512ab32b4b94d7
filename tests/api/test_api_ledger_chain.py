"""The ledger's hash chain through the API (issue 37, item 4), on SQLite and PostgreSQL: every entry the ledger
writes (preprocessing, reservations, charges, releases, refunds, evaluations) is chained, ``GET
…/ledger/export`` streams it as JSON lines that verify offline, and rows edited, deleted or reordered directly in the
database (the append-only trigger disabled, as an administrator could) make the check fail at the first bad entry.
Owners and admins export; an analyst gets a 403."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from api_helpers import Keys, fit_and_wait, upload, wait_for
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from privfit.db import LedgerEntry
from privfit.db.migrate import LEDGER_TRIGGERS
from privfit.ledger.chain import FORMAT, entry_content, entry_hash, genesis_hash, parse_export, verify

FIT = {"solver": "dp_gd", "model": "logistic", "privacy": {"epsilon": 0.2}, "params": {"steps": 20}}


def export(client: TestClient, headers: dict[str, str], dataset_id: str) -> tuple[dict[str, Any], list[dict]]:
    response = client.get(f"/v1/datasets/{dataset_id}/ledger/export", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return parse_export(response.text.splitlines())


def a_busy_ledger(client: TestClient, keys: Keys) -> str:
    """A dataset whose ledger has two charged fits (four entries: a reservation and a charge each)."""
    dataset_id = upload(client, keys, epsilon=5.0)
    for _ in range(2):
        fit_and_wait(client, keys, {"dataset_id": dataset_id, **FIT})
    return dataset_id


@contextmanager
def tampering(database_url: str) -> Iterator[Any]:
    """A connection that may rewrite ``ledger_entries`` (the append-only trigger off, as a database administrator
    could), restoring the trigger afterwards."""
    engine = create_engine(database_url)
    sqlite = engine.dialect.name == "sqlite"
    with engine.begin() as connection:
        if sqlite:
            for name in LEDGER_TRIGGERS:
                connection.execute(text(f"DROP TRIGGER IF EXISTS {name}"))
        else:
            connection.execute(text("ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only"))
        yield connection
        if sqlite:
            for name, when in LEDGER_TRIGGERS.items():
                connection.execute(text(f"CREATE TRIGGER {name} {when} BEGIN SELECT RAISE(ABORT, "
                                        "'ledger_entries is append-only'); END"))  # fmt: skip
        else:
            connection.execute(text("ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_append_only"))
    engine.dispose()


def entry_ids(database_url: str, dataset_id: str) -> list[int]:
    engine = create_engine(database_url)
    with engine.connect() as connection:
        ids = connection.execute(text("SELECT id FROM ledger_entries WHERE dataset_id = :d "
                                      "ORDER BY budget_version, id"), {"d": dataset_id}).scalars().all()  # fmt: skip
    engine.dispose()
    return list(ids)


def test_every_entry_is_chained_and_the_export_verifies(client: TestClient, keys: Keys) -> None:
    dataset_id = a_busy_ledger(client, keys)
    header, records = export(client, keys.owner, dataset_id)
    ledger = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()
    assert header["format"] == FORMAT and header["dataset_id"] == dataset_id
    assert header["genesis"] == genesis_hash(dataset_id) == records[0]["previous_hash"]
    assert header["entries"] == len(records) == ledger["total"] == 4
    assert [r["id"] for r in records] == [e["id"] for e in ledger["entries"]]
    assert [r["content"]["kind"] for r in records] == [e["kind"] for e in ledger["entries"]]
    result = verify(header, records)
    assert result.ok and result.head == header["head"] == records[-1]["entry_hash"], result
    # the admin may export too; the analyst (granted) may not: the export is every fit's entries
    assert export(client, keys.admin, dataset_id)[0]["head"] == header["head"]
    refused = client.get(f"/v1/datasets/{dataset_id}/ledger/export", headers=keys.analyst)
    assert refused.status_code == 403 and refused.headers["content-type"] == "application/problem+json"
    assert client.get("/v1/datasets/not-an-id/ledger/export", headers=keys.owner).status_code == 404


def test_later_entries_extend_the_chain_an_earlier_head_anchors(client: TestClient, keys: Keys) -> None:
    dataset_id = a_busy_ledger(client, keys)
    anchor = export(client, keys.owner, dataset_id)[0]["head"]
    queued = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **FIT})
    assert queued.status_code == 202, queued.text
    wait_for(client, queued.json()["id"], keys.analyst)
    header, records = export(client, keys.owner, dataset_id)
    assert len(records) == 6 and header["head"] != anchor
    assert verify(header, records, anchors=[anchor]).ok


@pytest.mark.parametrize("tamper", ["edit", "edit-gdp", "forget-gdp", "rehashed-edit", "delete", "reorder",
                                    "delete-last"])  # fmt: skip
def test_rows_changed_in_the_database_fail_the_check_at_the_first_bad_entry(
    client: TestClient, keys: Keys, database_url: str, tamper: str
) -> None:
    dataset_id = a_busy_ledger(client, keys)
    ids = entry_ids(database_url, dataset_id)
    header_before, records_before = export(client, keys.owner, dataset_id)
    assert records_before[2]["content"]["gdp_mu_squared"] > 0  # dp_gd's Gaussian steps: a GDP bound, hashed
    with tampering(database_url) as connection:
        if tamper == "edit":  # the third entry's charge made smaller
            connection.execute(text("UPDATE ledger_entries SET epsilon = epsilon / 2 WHERE id = :id"), {"id": ids[2]})
        elif tamper == "edit-gdp":  # its Gaussian-DP μ² made smaller
            connection.execute(text("UPDATE ledger_entries SET gdp_mu_squared = gdp_mu_squared / 2 WHERE id = :id"),
                               {"id": ids[2]})  # fmt: skip
        elif tamper == "forget-gdp":  # ... or forgotten (+∞ only forgoes a certificate, but it is still an edit)
            connection.execute(text("UPDATE ledger_entries SET gdp_mu_squared = NULL WHERE id = :id"), {"id": ids[2]})
        elif tamper == "rehashed-edit":  # ... with its own hash recomputed by someone who knows the rule
            with Session(bind=connection) as session:
                row = session.get_one(LedgerEntry, ids[2])
                row.epsilon /= 2
                row.entry_hash = entry_hash(row.previous_hash, entry_content(row))
                session.flush()
        elif tamper == "delete":
            connection.execute(text("DELETE FROM ledger_entries WHERE id = :id"), {"id": ids[2]})
        elif tamper == "reorder":  # the third and fourth swap places in the budget's order
            versions = dict(connection.execute(text("SELECT id, budget_version FROM ledger_entries WHERE id IN "
                                                    "(:a, :b)"), {"a": ids[2], "b": ids[3]}).all())  # fmt: skip
            for mine, theirs in ((ids[2], ids[3]), (ids[3], ids[2])):
                connection.execute(text("UPDATE ledger_entries SET budget_version = :v WHERE id = :id"),
                                   {"v": versions[theirs], "id": mine})  # fmt: skip
        else:  # the last entry removed (the budget's head still names it)
            connection.execute(text("DELETE FROM ledger_entries WHERE id = :id"), {"id": ids[-1]})
    header, records = export(client, keys.owner, dataset_id)
    result = verify(header, records)
    assert not result.ok, result
    # an edit fails its own hash; a re-hashed edit, a deletion or a swap fails the next link (the 4th entry, or the
    # 3rd position once the 3rd entry is gone or moved); a removed last entry leaves the head dangling
    expected = {"edit": 3, "edit-gdp": 3, "forget-gdp": 3, "rehashed-edit": 4, "delete": 3, "reorder": 3,
                "delete-last": 0}[tamper]  # fmt: skip
    assert result.first_bad == expected, result
    if tamper == "delete-last":
        assert "head" in result.problem
    assert header["head"] == header_before["head"]  # the budget row was not touched


def test_the_cli_exports_and_verifies_offline(client: TestClient, keys: Keys, tmp_path, capsys) -> None:
    """``privfit ledger export`` writes the stream to a file; ``privfit ledger verify`` checks it without a server:
    exit 0 and the head, or exit 10 naming the first bad entry."""
    from privfit.cli import main

    dataset_id = a_busy_ledger(client, keys)
    header, records = export(client, keys.owner, dataset_id)
    path = tmp_path / "ledger.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [header, *records]) + "\n")
    assert main(["ledger", "verify", str(path)]) == 0
    shown = capsys.readouterr()
    assert header["head"] in shown.out and "4 entries" in shown.err
    records[3]["content"]["description"] = "edited"
    path.write_text("\n".join(json.dumps(line) for line in [header, *records]) + "\n")
    assert main(["ledger", "verify", str(path), "--json"]) == 10
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["first_bad"] == 4 and report["first_bad_id"] == records[3]["id"]

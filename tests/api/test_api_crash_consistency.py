"""Crash consistency of uploads and store misconfiguration, with real ``privfit serve`` processes.

A server is killed (SIGKILL, through the test-only ``PRIVFIT_TEST_CRASH_AT`` hook of :mod:`privfit.faults`) at
each step of an upload; whatever it left behind (a pending upload, half a temporary file, a complete matrix no
dataset points to — a file or a ``dataset_blobs`` row) is private data nothing accounts for, and the next start's
sweep must remove it all, while data of live datasets survives the periodic sweep.

Two processes with different data directories on one database: the second refuses to start once datasets exist,
and a worker whose directory does not hold a dataset refuses its fits before charging them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from process_helpers import PRIVFIT, environment, free_port, keys_for, process, register, server
from sqlalchemy import func, select

from privfit.db import Dataset, DatasetBlob, make_database
from privfit.db.models import DatasetUpload

RUNNING = ("queued", "running")
FIT = {"model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}
#: the restarted server: uploads pending longer than 0.2 s are abandoned, and the sweep runs every 0.2 s
SWEEP = {"PRIVFIT_UPLOAD_GRACE_SECONDS": "0.2", "PRIVFIT_ORPHAN_SWEEP_SECONDS": "0.2"}
#: How long a test waits for a fit to leave a state, or for a process to exit, and a request's timeout: wait bounds,
#: generous for a busy machine (each wait ends as soon as its condition holds).
WAIT_SECONDS = 300.0


def submit_fit(base: str, headers: dict[str, str], dataset_id: str) -> str:
    """POST the small :data:`FIT` on the dataset (accepted, 202); its id."""
    response = httpx.post(
        f"{base}/v1/fits", headers=headers, json={"dataset_id": dataset_id, **FIT}, timeout=WAIT_SECONDS
    )
    assert response.status_code == 202, response.text
    return response.json()["id"]


def wait_while(base: str, headers: dict[str, str], fit_id: str, statuses: tuple[str, ...]) -> dict:
    """Poll the fit while its status is one of ``statuses``; its body then. Fails after WAIT_SECONDS."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        body = httpx.get(f"{base}/v1/fits/{fit_id}", headers=headers, timeout=WAIT_SECONDS).json()
        if body["status"] not in statuses:
            return body
        assert time.monotonic() < deadline, f"fit {fit_id} still {body['status']} after {WAIT_SECONDS:.0f} s"
        time.sleep(0.1)


def leftovers(database_url: str, data_dir: Path) -> dict[str, int]:
    """What is stored and what accounts for it: files by kind, blob rows, pending uploads, datasets."""
    db = make_database(database_url)
    try:
        with db.read() as session:
            counts = {
                "blob rows": session.scalar(select(func.count()).select_from(DatasetBlob)),
                "pending uploads": session.scalar(select(func.count()).select_from(DatasetUpload)),
                "datasets": session.scalar(select(func.count()).select_from(Dataset)),
            }
    finally:
        db.dispose()
    files = list(data_dir.glob("*")) if data_dir.exists() else []
    counts["npz files"] = sum(path.suffix == ".npz" for path in files)
    counts["tmp files"] = sum(path.suffix == ".tmp" for path in files)
    return counts


def crashing_upload(base: str, owner: str, split: bool = False) -> None:
    """Upload the small dataset to a server that kills itself on the way: the connection drops, no answer. With
    ``split`` the schema declares a validation fraction: two matrices are stored."""
    from api_helpers import SMALL_SCHEMA, small_csv

    schema = {**SMALL_SCHEMA, "validation_fraction": 0.25} if split else SMALL_SCHEMA
    with pytest.raises(httpx.TransportError):
        httpx.post(f"{base}/v1/datasets", headers={"Authorization": f"Bearer {owner}"},
                   files={"file": ("d.csv", small_csv())}, data={"schema": json.dumps(schema)},
                   timeout=WAIT_SECONDS)  # fmt: skip


CASES = [
    # (store, crash step, split upload, what the crash must have left behind)
    ("local", "upload:pending", False, {"pending uploads": 1}),
    ("local", "store:partial", False, {"pending uploads": 1, "tmp files": 1}),
    ("local", "upload:stored", False, {"pending uploads": 1, "npz files": 1}),
    ("database", "upload:pending", False, {"pending uploads": 1}),
    ("database", "upload:stored", False, {"pending uploads": 1, "blob rows": 1}),
    ("local", "upload:training-stored", True, {"pending uploads": 1, "npz files": 1}),
    ("local", "upload:stored", True, {"pending uploads": 1, "npz files": 2}),
    ("database", "upload:stored", True, {"pending uploads": 1, "blob rows": 2}),
]


@pytest.mark.parametrize(
    ("store", "step", "split", "left"), CASES,
    ids=[f"{store}-{step}{'-split' if split else ''}" for store, step, split, _ in CASES],
)  # fmt: skip
def test_a_server_killed_during_an_upload_leaves_nothing_after_its_restart(
    sqlite_url: str, tmp_path: Path, store: str, step: str, split: bool, left: dict
):
    owner, _ = keys_for(sqlite_url)
    data_dir = tmp_path / "store"
    with server(sqlite_url, tmp_path, PRIVFIT_STORE=store, PRIVFIT_TEST_CRASH_AT=step) as base:
        crashing_upload(base, owner, split)
    nothing = {"blob rows": 0, "pending uploads": 0, "datasets": 0, "npz files": 0, "tmp files": 0}
    assert leftovers(sqlite_url, data_dir) == {**nothing, **left}  # the crash happened exactly there
    time.sleep(0.3)  # older than the restarted server's grace period
    with server(sqlite_url, tmp_path, PRIVFIT_STORE=store, **SWEEP) as base:
        assert leftovers(sqlite_url, data_dir) == nothing  # the start-up sweep removed everything
        # a live dataset's data survives the periodic sweep, and fits
        dataset_id = register(base, owner, 5.0)
        time.sleep(0.6)
        headers = {"Authorization": f"Bearer {owner}"}
        fit_id = submit_fit(base, headers, dataset_id)
        body = wait_while(base, headers, fit_id, RUNNING)
        assert body["status"] == "succeeded", body
    stored = "npz files" if store == "local" else "blob rows"
    assert leftovers(sqlite_url, data_dir) == {**nothing, "datasets": 1, stored: 1}


def test_orphans_left_by_earlier_versions_are_swept_at_start_up(sqlite_url: str, tmp_path: Path):
    """An ``.npz`` and a ``dataset_blobs`` row no dataset references (what a crash of an earlier version left):
    both removed when the server starts; the data of a live dataset stays."""
    owner, _ = keys_for(sqlite_url)
    data_dir = tmp_path / "store"
    data_dir.mkdir()
    orphan_file = data_dir / f"{'ab' * 32}.npz"
    np.savez(orphan_file, X=np.zeros((2, 2)), y=np.zeros(2))
    stale_tmp = data_dir / "tmpx1y2.tmp"
    stale_tmp.write_bytes(b"half")
    db = make_database(sqlite_url)
    with db.write() as session:
        session.add(DatasetBlob(key="cd" * 32, content=b"orphan", size=6))
    db.dispose()
    time.sleep(0.3)
    with server(sqlite_url, tmp_path, **SWEEP) as base:
        register(base, owner, 5.0)
        time.sleep(0.6)  # periodic sweeps ran meanwhile
    assert not orphan_file.exists() and not stale_tmp.exists()
    assert leftovers(sqlite_url, data_dir) == {"blob rows": 0, "pending uploads": 0, "datasets": 1,
                                               "npz files": 1, "tmp files": 0}  # fmt: skip


@pytest.mark.parametrize("api_workers", ["1", "2"])
def test_a_server_on_another_data_directory_refuses_to_start(sqlite_url: str, tmp_path: Path, api_workers: str):
    """Refused with a non-zero exit, in one process or with several (checked before uvicorn starts them)."""
    owner, _ = keys_for(sqlite_url)
    with server(sqlite_url, tmp_path) as base:
        register(base, owner, 5.0)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # PRIVFIT_DATA_DIR = elsewhere/store: not where the dataset lives
    env = environment(sqlite_url, elsewhere, PRIVFIT_API_WORKERS=api_workers)
    log = elsewhere / "serve.log"
    with process([*PRIVFIT, "serve", "--port", str(free_port()), "--log-level", "warning"], env, log) as proc:
        assert proc.wait(WAIT_SECONDS) != 0
    text = log.read_text()
    assert "dataset store mismatch" in text and str((elsewhere / "store").resolve()) in text, text[-3000:]


def test_a_worker_that_cannot_see_the_dataset_refuses_the_fit_before_charging(sqlite_url: str, tmp_path: Path):
    """Two servers started on one database (no dataset yet, so both start) with different data directories: the
    first takes uploads and runs no workers, the second's workers cannot read its data — they refuse the fit
    before claiming it, the reservation is released, and the operator reads why in the log."""
    owner, _ = keys_for(sqlite_url)
    headers = {"Authorization": f"Bearer {owner}"}
    second_dir = tmp_path / "second"
    second_dir.mkdir()
    with server(sqlite_url, tmp_path, PRIVFIT_QUEUE="none") as base, server(sqlite_url, second_dir):
        dataset_id = register(base, owner, 5.0)
        fit_id = submit_fit(base, headers, dataset_id)
        body = wait_while(base, headers, fit_id, ("queued",))
        ledger = httpx.get(f"{base}/v1/datasets/{dataset_id}/ledger", headers=headers, timeout=WAIT_SECONDS).json()
        budget = httpx.get(f"{base}/v1/datasets/{dataset_id}/budget", headers=headers, timeout=WAIT_SECONDS).json()
    assert body["status"] == "failed" and body["error"]["type"] == "dataset_store_mismatch", body
    assert [entry["kind"] for entry in ledger["entries"]] == ["reservation", "release"]  # never charged
    assert budget["committed_epsilon"] == 0.0
    text = (second_dir / "serve.log").read_text()
    assert "fit refused before charging" in text and "PRIVFIT_DATA_DIR" in text, text[-3000:]

"""Cancel stops a running fit at its next step (issue 20), and a fit whose cancel was answered before it finished
never releases a result.

The apps here renew leases every 5 s (the default ``PRIVFIT_HEARTBEAT_SECONDS``, not the tests' usual 0.2 s): the
heartbeat is not what carries a cancel. In-process, the cancel request sets the runner's stop event at once; from
another process (``privfit worker``), the solver's step callback polls the job's cancel flag every
``PRIVFIT_CANCEL_POLL_SECONDS`` (0.2 s); and the result commit re-checks the flag in its own transaction.

How fast a fit stops is compared with the API's own round trip measured just before the cancel on the same machine
(:func:`_assert_stopped_promptly`), never with a wall-clock limit: on a busy machine both stretch alike, while a
cancel that waited for the next heartbeat (5 s) or for the fit's end would still stand out on a quiet one.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import Keys, bearer, make_client, small_csv, upload, wait_for, wait_until_running
from fastapi.testclient import TestClient
from process_helpers import PRIVFIT, environment, process

from privfit.api.auth import create_api_key

LONG_FIT = {"solver": "dp_gd", "privacy": {"epsilon": 0.5}, "params": {"steps": 100_000}}  # ~20 s of steps
SHORT_FIT = {"solver": "dp_gd", "privacy": {"epsilon": 0.05}, "params": {"steps": 7500}}  # ~1 s on a quiet machine
#: A fit stops within this many of the API's round trips (:func:`_round_trip`) plus STOP_SLACK seconds of a cancel:
#: the cancel, the runner's wake-up at its next step, the status write and the poll that sees it are each about one
#: round trip (an in-process cancel) or one PRIVFIT_CANCEL_POLL_SECONDS (0.2 s; from another process).
STOP_WITHIN_ROUND_TRIPS = 20
STOP_SLACK = 1.0


def _keys(client: TestClient) -> Keys:
    db = client.app.state.db
    owner_id, owner = create_api_key(db, "owner", "owner")
    analyst_id, analyst = create_api_key(db, "analyst", "analyst")
    _, admin = create_api_key(db, "admin", "admin")
    return Keys(bearer(owner), owner_id, bearer(owner), bearer(analyst), analyst_id, bearer(analyst), bearer(admin))


@pytest.fixture
def slow_beat(database_url: str, tmp_path: Path) -> Iterator[tuple[TestClient, Keys]]:
    """An app with its embedded workers and the default 5 s heartbeat."""
    with make_client(database_url, tmp_path, heartbeat_seconds=5.0) as client:
        yield client, _keys(client)


def _round_trip(client: TestClient, keys: Keys, fit_id: str, samples: int = 5) -> float:
    """The slowest of ``samples`` reads of the fit (seconds): the API's latency on this machine at this moment (the
    fit running beside it), the baseline a stop is compared with."""
    slowest = 0.0
    for _ in range(samples):
        started = time.monotonic()
        assert client.get(f"/v1/fits/{fit_id}", headers=keys.analyst).status_code == 200
        slowest = max(slowest, time.monotonic() - started)
    return slowest


def _assert_stopped_promptly(elapsed: float, round_trip: float) -> None:
    """The fit stopped at its next step, not at its next heartbeat (every 5 s here) nor at its end: within
    STOP_WITHIN_ROUND_TRIPS of the API's round trips just before the cancel, plus STOP_SLACK."""
    bound = STOP_WITHIN_ROUND_TRIPS * round_trip + STOP_SLACK
    assert elapsed <= bound, (
        f"the fit took {elapsed:.2f} s to stop after the cancel, more than {STOP_WITHIN_ROUND_TRIPS} round trips of "
        f"the API ({round_trip:.3f} s each, measured just before) + {STOP_SLACK} s"
    )


def _cancel_and_time(client: TestClient, keys: Keys, fit_id: str) -> tuple[dict[str, Any], dict[str, Any], float]:
    """Cancel the fit; (the cancel's answer, the fit's final body, seconds from the cancel to its final status)."""
    started = time.monotonic()
    answered = client.post(f"/v1/fits/{fit_id}/cancel", headers=keys.analyst)
    assert answered.status_code in (200, 409), answered.text
    done = wait_for(client, fit_id, keys.analyst)
    if answered.status_code == 409:  # it had finished: a problem naming the status, nothing changed (issue 24)
        problem = answered.json()
        assert problem["title"] == "Fit already finished" and f"({done['status']})" in problem["detail"], problem
        return {"status": done["status"]}, done, time.monotonic() - started
    return answered.json(), done, time.monotonic() - started


def _assert_cancelled_without_result(client: TestClient, keys: Keys, done: dict[str, Any]) -> None:
    assert done["status"] == "cancelled" and "result" not in done, done
    predicted = client.post(f"/v1/fits/{done['id']}/predict", headers=keys.analyst,
                            json={"rows": [{"x1": 0.1, "x2": 0.2, "color": "red"}]})  # fmt: skip
    assert predicted.status_code == 409, predicted.text


def test_cancel_stops_a_running_fit_at_its_next_step(slow_beat) -> None:
    client, keys = slow_beat
    # 40,000 rows: each step takes 10× the 4,000-row default's time, so on a quiet machine the first heartbeat
    # (5 s) still reports under half of the 100,000 steps (on 4,000 rows a quiet machine had run 54 % by then)
    dataset_id = upload(client, keys, csv=small_csv(40_000))
    created = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **LONG_FIT})
    assert created.status_code == 202, created.text
    fit_id = created.json()["id"]
    running = wait_until_running(client, fit_id, keys.analyst)
    assert 0 < running["progress"] < 0.5, running
    round_trip = _round_trip(client, keys, fit_id)
    answered, done, elapsed = _cancel_and_time(client, keys, fit_id)
    assert answered["status"] in ("running", "cancelled") and answered["cancel_requested"], answered
    _assert_stopped_promptly(elapsed, round_trip)
    _assert_cancelled_without_result(client, keys, done)
    # it stopped where the cancel found it, far from its end: the progress shown at the cancel (under half) is where
    # it ended, give or take the one heartbeat that may have come in between
    assert done["progress"] < 0.5, done
    # the ledger's rules for a cancelled fit are unchanged: it read rows, so its charge is kept
    ledger = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()
    assert [entry["kind"] for entry in ledger["entries"]] == ["reservation", "charge"]


def test_cancel_reaches_a_fit_running_in_another_process(database_url: str, tmp_path: Path) -> None:
    """The API process does not run the fit (``privfit worker`` does): the worker's step callback polls the flag."""
    with make_client(database_url, tmp_path, workers=False, queue="none") as client:
        keys = _keys(client)
        dataset_id = upload(client, keys)
        env = environment(database_url, tmp_path, PRIVFIT_QUEUE="none", PRIVFIT_HEARTBEAT_SECONDS="5",
                          PRIVFIT_POLL_SECONDS="0.1")  # fmt: skip
        with process([*PRIVFIT, "worker", "--concurrency", "1"], env, tmp_path / "worker.log"):
            created = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **LONG_FIT})
            assert created.status_code == 202, created.text
            fit_id = created.json()["id"]
            wait_until_running(client, fit_id, keys.analyst)
            round_trip = _round_trip(client, keys, fit_id)
            answered, done, elapsed = _cancel_and_time(client, keys, fit_id)
        # the answer re-reads the fit after the cancel committed: the worker, polling every 0.2 s, may have stopped it
        # by then (seen on a loaded machine), as in test_cancel_stops_a_running_fit_at_its_next_step
        assert answered["status"] in ("running", "cancelled") and answered["cancel_requested"], answered
        _assert_stopped_promptly(elapsed, round_trip)
        _assert_cancelled_without_result(client, keys, done)


def test_a_cancel_answered_before_the_fit_finished_never_releases_a_result(slow_beat) -> None:
    """Short fits cancelled at random moments (queued, running, just finishing, finished): whenever the cancel was
    answered with the fit not yet finished, the fit ends cancelled with no result; otherwise it had succeeded."""
    client, keys = slow_beat
    dataset_id = upload(client, keys, epsilon=10.0)
    rng = random.Random(20)
    outcomes: dict[str, int] = {}
    # the cancels land at random moments over 1.25 × one fit's time measured here first: before, during or after the
    # fit, whatever the machine's speed (a fixed 0–1.2 s window let a fast machine finish 12 of 16 fits first). The
    # time is a second fit's: the first also builds the dataset's shared float32 design, which the later fits reuse,
    # so a window from the first fit let 12 of 16 finish before their cancel (CI, issue 40's design cache)
    # The shortest of the later two: a fit slowed by a passing load spike would stretch the window so far that most
    # fits finish before their cancel (CI beside a concurrent benchmark: 12 of 16).
    durations = []
    for _ in range(3):
        started = time.monotonic()
        fit = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **SHORT_FIT}).json()["id"]
        assert wait_for(client, fit, keys.analyst)["status"] == "succeeded"
        durations.append(time.monotonic() - started)
    window = 1.25 * min(durations[1:])
    for _ in range(16):
        created = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **SHORT_FIT})
        assert created.status_code == 202, created.text
        fit_id = created.json()["id"]
        time.sleep(rng.uniform(0.0, window))
        answered, done, _ = _cancel_and_time(client, keys, fit_id)
        before = answered["status"]
        outcomes[before] = outcomes.get(before, 0) + 1
        if before == "succeeded":  # it had finished when the cancel arrived: the cancel changed nothing
            assert done["status"] == "succeeded" and "result" in done, done
        else:
            assert before in ("queued", "running", "cancelled"), answered
            _assert_cancelled_without_result(client, keys, done)
    assert outcomes.get("running", 0) + outcomes.get("cancelled", 0) >= 5, outcomes  # the race was exercised


def test_cancelling_a_finished_fit_is_a_409_that_changes_nothing(slow_beat) -> None:
    """Issue 24: a succeeded fit answers 409 "Fit already finished" naming its status (was 200 with nothing changed
    and no hint); the fit and the ledger are as before. Cancelling a cancelled fit stays a harmless 200 (a retried
    cancel whose first answer was lost)."""
    client, keys = slow_beat
    dataset_id = upload(client, keys, epsilon=10.0)
    fit_id = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **SHORT_FIT}).json()["id"]
    finished = wait_for(client, fit_id, keys.analyst)
    assert finished["status"] == "succeeded"
    ledger = client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json()
    answered = client.post(f"/v1/fits/{fit_id}/cancel", headers=keys.analyst)
    assert answered.status_code == 409 and answered.headers["content-type"] == "application/problem+json"
    assert "(succeeded)" in answered.json()["detail"]
    assert client.get(f"/v1/fits/{fit_id}", headers=keys.analyst).json() == finished
    assert client.get(f"/v1/datasets/{dataset_id}/ledger", headers=keys.owner).json() == ledger
    queued = client.post("/v1/fits", headers=keys.analyst, json={"dataset_id": dataset_id, **LONG_FIT}).json()["id"]
    assert client.post(f"/v1/fits/{queued}/cancel", headers=keys.analyst).status_code == 200
    wait_for(client, queued, keys.analyst)
    again = client.post(f"/v1/fits/{queued}/cancel", headers=keys.analyst)
    assert again.status_code == 200 and again.json()["status"] == "cancelled"

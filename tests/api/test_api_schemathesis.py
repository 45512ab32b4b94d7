"""The OpenAPI document is a contract the API keeps: schemathesis runs every check it has (``--checks all``: no
5xx, documented statuses, content types and headers, response schemas, positive data accepted, negative data
rejected, missing required headers, ignored auth, use after free, unsupported methods and the 405 ``Allow``
header, …) against the in-process app, on SQLite and on PostgreSQL, authenticated.

* ``test_every_operation_keeps_the_contract``: the examples, coverage and fuzzing phases over every operation
  (bounded: :data:`MAX_EXAMPLES` per operation and phase), with the admin key — except for the operations only
  owners may call (uploads, fits, estimates), which use an owner key so that their bodies are exercised, not
  refused with 403. The database holds a dataset with a granted analyst, a succeeded fit and a queued one, so
  the ids schemathesis learns from responses reach real resources.
* ``test_stateful_sequences_keep_the_contract``: schemathesis's stateful phase (sequences linked through the ids
  that responses return: create a key then revoke it, list datasets then read or delete one, …).
* ``test_real_resources_conform``: every read operation on those real resources, validated against the
  document — response schemas on real bodies, whatever the random phases happen to reach.

Checks narrowed (each only where it cannot apply, for the reason given):

* ``positive_data_acceptance`` also accepts 422 on the operations whose bodies have constraints OpenAPI cannot
  state: an upload's CSV must match the schema sent beside it (a JSON document in a form field); a fit's ``params``
  depend on its ``solver`` and ``model`` and the noise on the privacy parameters; a grant's ``api_key_id`` must be
  an analyst's; prediction rows must match the dataset's schema; an allocation's key must be an analyst granted the
  dataset and its (ε, δ) at most the dataset's budget; a list's ``cursor`` must be one the same listing issued (an
  opaque string: any other is a 422 naming ``cursor``, :mod:`privfit.api.pagination`).
* ``use_after_free`` is off for the ledger views (budget, ledger): the ledger of a deleted dataset stays readable
  by its owner and admins by design (DESIGN §2, append-only; issue #20), so a 200 after ``DELETE`` is the contract.

One check is added (:func:`allow_names_every_method`): schemathesis accepts a 405 whose ``Allow`` is present but
empty; here it must name exactly the methods the path documents.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis
import hypothesis.errors
import pytest
import schemathesis
from api_helpers import SMALL_SCHEMA, bearer, small_csv
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url

from privfit.api.app import create_app
from privfit.api.auth import create_api_key
from privfit.db import ApiKey
from privfit.jobs.runner import run_job
from privfit.settings import Settings

POSTGRES_URL = os.environ.get("PRIVFIT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")

#: Examples per operation and phase; the whole file (both dialects) runs in about two minutes on two cores.
MAX_EXAMPLES = 25
STATEFUL_SCENARIOS = 30

#: Operations only owners (and, for fits, analysts) may call: sent with an owner key, not the admin's.
OWNER_OPERATIONS = {("POST", "/v1/datasets"), ("POST", "/v1/fits"), ("POST", "/v1/fits/estimate")}

#: positive_data_acceptance: 422 is also expected here (module docstring).
SEMANTIC_422 = [
    ("POST", "/v1/datasets"),
    ("POST", "/v1/fits"),
    ("POST", "/v1/fits/estimate"),
    ("POST", "/v1/fits/{job_id}/predict"),
    ("POST", "/v1/datasets/{dataset_id}/grants"),
    ("PUT", "/v1/datasets/{dataset_id}/allocations/{api_key_id}"),
    # the paged lists: only a cursor the listing issued is valid
    ("GET", "/v1/datasets"),
    ("GET", "/v1/datasets/duplicates"),
    ("GET", "/v1/datasets/{dataset_id}/grants"),
    ("GET", "/v1/datasets/{dataset_id}/allocations"),
    ("GET", "/v1/fits"),
    ("GET", "/v1/fits/{job_id}/evaluations"),
    ("GET", "/v1/keys"),
]
ACCEPTED_POSITIVE = ["2xx", "3xx", "401", "403", "404", "409", "410", "422", "429", "5xx"]

#: use_after_free does not apply: a deleted dataset's ledger stays readable (module docstring).
LEDGER_VIEWS = ["/v1/datasets/{dataset_id}/budget", "/v1/datasets/{dataset_id}/ledger"]


@dataclass
class Api:
    """The app under test (its lifespan running), its database and the keys and resources in it."""

    app: Any
    database_url: str
    admin: str
    owner: str
    owner_id: str
    analyst_id: str
    dataset_id: str
    fit_id: str
    queued_fit_id: str

    def owner_headers(self) -> dict[str, str]:
        """The owner's key — a fresh one if a fuzzed ``DELETE /v1/keys/{id}`` revoked it (ids are learnt from
        ``GET /v1/keys``; only the admin's own key cannot be revoked)."""
        db = self.app.state.db
        with db.read() as session:
            revoked = session.scalar(select(ApiKey.revoked_at).where(ApiKey.id == self.owner_id))
        if revoked is not None:
            self.owner_id, self.owner = create_api_key(db, "owner", "schemathesis owner")
        return bearer(self.owner)

    def headers_for(self, method: str, path: str) -> dict[str, str]:
        return self.owner_headers() if (method.upper(), path) in OWNER_OPERATIONS else bearer(self.admin)


class _CurrentApp:
    """What schemathesis calls: the app of the running fixture (:func:`api`). Its lifespan (database, store,
    sweeper) is run by the fixture, once; a lifespan scope is refused before any message, which ASGI servers take as
    "no lifespan support". (The schema is loaded when this module is imported, so that ``parametrize`` makes one
    test per operation and dialect; schemathesis's fixture-based loader does not run on this pytest.)"""

    def __init__(self) -> None:
        # until a fixture sets one: an app without a database, enough to serve /openapi.json
        self.app: Any = create_app(Settings(database_url="sqlite:///:memory:"), run_workers=False)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            raise RuntimeError("the test fixture runs this app's lifespan")
        await self.app(scope, receive, send)


CURRENT = _CurrentApp()


def _postgres_database(template: str) -> tuple[str, Any]:
    name = f"privfit_st_{uuid.uuid4().hex[:10]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT", pool_size=1)
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False), drop


def _populate(client: TestClient, tmp: Path) -> dict[str, str]:
    """Keys of every role, a dataset granted to the analyst, a succeeded fit (run here, synchronously) and a
    queued one."""
    db = client.app.state.db
    _, admin = create_api_key(db, "admin", "schemathesis admin")
    owner_id, owner = create_api_key(db, "owner", "schemathesis owner")
    analyst_id, analyst = create_api_key(db, "analyst", "schemathesis analyst")
    uploaded = client.post("/v1/datasets", headers=bearer(owner), files={"file": ("d.csv", small_csv(500))},
                           data={"schema": json.dumps(SMALL_SCHEMA), "name": "contract"})  # fmt: skip
    assert uploaded.status_code == 201, uploaded.text
    dataset_id = uploaded.json()["id"]
    granted = client.post(f"/v1/datasets/{dataset_id}/grants", headers=bearer(owner), json={"api_key_id": analyst_id})
    assert granted.status_code == 201, granted.text
    fits = []
    for _ in range(2):
        request = {"dataset_id": dataset_id, "privacy": {"epsilon": 0.2}, "params": {"steps": 20}}
        fit = client.post("/v1/fits", headers=bearer(analyst), json=request)
        assert fit.status_code == 202, fit.text
        fits.append(fit.json()["id"])
    status = run_job(db, client.app.state.store, fits[0], "contract", lease_seconds=60, heartbeat_seconds=30)
    assert status == "succeeded"
    return {"admin": admin, "owner": owner, "owner_id": owner_id, "analyst_id": analyst_id,
            "dataset_id": dataset_id, "fit_id": fits[0], "queued_fit_id": fits[1]}  # fmt: skip


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    tmp = tmp_path_factory.mktemp(f"contract-{request.param}")
    drop = None
    if request.param == "postgresql":
        database_url, drop = _postgres_database(request.getfixturevalue("postgres_template"))
    else:
        database_url = f"sqlite:///{tmp / 'privfit.db'}"
    # fits stay queued (no solver runs while schemathesis fuzzes), so a fit's event stream would stay open for its
    # longest life: 1 s here (it then ends with reason "timeout"), not the default 10 minutes per call
    settings = Settings(database_url=database_url, data_dir=tmp / "store", max_upload_bytes=1024 * 1024,
                        event_stream_seconds=1.0, event_poll_seconds=0.05)  # fmt: skip
    app = create_app(settings, run_workers=False)
    previous = CURRENT.app
    try:
        with TestClient(app) as client:  # runs the lifespan for the whole module
            CURRENT.app = app
            yield Api(app=app, database_url=database_url, **_populate(client, tmp))
    finally:
        CURRENT.app = previous
        if drop is not None:
            drop()


def allow_names_every_method(ctx: Any, response: Any, case: schemathesis.Case) -> bool | None:
    """A 405 names in ``Allow`` exactly the methods the OpenAPI document gives its path (HEAD aside)."""
    if response.status_code != 405:
        return None
    values = response.headers.get("allow") or [""]
    header = values if isinstance(values, str) else ", ".join(values)
    allowed = {method.strip().upper() for method in header.split(",") if method.strip()} - {"HEAD"}
    documented = {method.upper() for method in case.operation.schema.raw_schema["paths"][case.operation.path]}
    assert allowed == documented, f"405 Allow: {header!r}; the path documents {sorted(documented)}"
    return True


def _config() -> schemathesis.Config:
    operations: list[dict[str, Any]] = [
        {"include-method": method, "include-path": path,
         "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED_POSITIVE}}}
        for method, path in SEMANTIC_422
    ]  # fmt: skip
    operations += [
        {"include-method": "GET", "include-path": path, "checks": {"use_after_free": {"enabled": False}}}
        for path in LEDGER_VIEWS
    ]
    return schemathesis.Config.from_dict({
        "cache": {"enabled": False},  # no .schemathesis/ state between runs: each run stands alone
        "generation": {"max-examples": MAX_EXAMPLES},
        "phases": {"stateful": {"max-steps": 8}},
        "operations": operations,
    })  # fmt: skip


def _timestamps(document: Any) -> list[str]:
    if isinstance(document, list):
        return [stamp for item in document for stamp in _timestamps(item)]
    if isinstance(document, dict):
        found = [value for key, value in document.items() if key.endswith("_at") and isinstance(value, str)]
        return found + [stamp for value in document.values() for stamp in _timestamps(value)]
    return []


contract = schemathesis.openapi.from_asgi("/openapi.json", CURRENT, config=_config())


READS = [
    ("GET", "/v1/me", {}, {}),
    ("GET", "/v1/keys", {}, {}),
    ("GET", "/v1/solvers", {}, {}),
    ("GET", "/v1/datasets", {}, {}),
    ("GET", "/v1/datasets/duplicates", {}, {}),
    ("GET", "/v1/datasets/{dataset_id}", {"dataset_id": "dataset"}, {}),
    ("GET", "/v1/datasets/{dataset_id}/budget", {"dataset_id": "dataset"}, {}),
    ("GET", "/v1/datasets/{dataset_id}/ledger", {"dataset_id": "dataset"}, {}),
    ("GET", "/v1/datasets/{dataset_id}/grants", {"dataset_id": "dataset"}, {}),
    ("GET", "/v1/fits", {}, {"dataset_id": "dataset"}),
    ("GET", "/v1/fits", {}, {}),
    ("GET", "/v1/fits/{job_id}", {"job_id": "fit"}, {}),
    ("GET", "/v1/fits/{job_id}", {"job_id": "queued"}, {}),
    ("GET", "/healthz", {}, {}),
    ("GET", "/readyz", {}, {}),
]


def test_real_resources_conform(api: Api) -> None:
    """Each read on the fixture's real dataset and fits: 200, and the body, headers and content type conform. (First
    in this file: the fuzzing phases may delete the dataset.)"""
    ids = {"dataset": api.dataset_id, "fit": api.fit_id, "queued": api.queued_fit_id}
    for method, path, path_parameters, query in READS:
        operation = contract[path][method]
        case = operation.Case(
            path_parameters={name: ids[value] for name, value in path_parameters.items()} or None,
            query={name: ids[value] for name, value in query.items()} or None,
        )
        response = case.call_and_validate(headers=api.headers_for(method, path))
        assert response.status_code == 200, (method, path, response.text)
        for stamp in _timestamps(response.json()):  # UTC, with its offset, on either database
            assert stamp.endswith("+00:00"), (method, path, stamp)
    predicted = contract["/v1/fits/{job_id}/predict"]["POST"].Case(
        path_parameters={"job_id": api.fit_id}, body={"rows": [{"x1": 0.5, "x2": -0.5, "color": "red"}]}
    )
    assert predicted.call_and_validate(headers=bearer(api.admin)).status_code == 200


@contract.parametrize()
@hypothesis.settings(deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
def test_every_operation_keeps_the_contract(case: schemathesis.Case, api: Api) -> None:
    case.call_and_validate(
        headers=api.headers_for(case.method, case.path), additional_checks=[allow_names_every_method]
    )


def test_stateful_sequences_keep_the_contract(api: Api) -> None:
    class Sequences(contract.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"headers": api.headers_for(case.method, case.path)}

        def validate_response(self, response: Any, case: schemathesis.Case, **kwargs: Any) -> None:
            super().validate_response(response, case, additional_checks=[allow_names_every_method], **kwargs)

    settings = hypothesis.settings(
        max_examples=STATEFUL_SCENARIOS, stateful_step_count=8, deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck), database=None,
    )  # fmt: skip
    for _ in range(3):
        try:
            Sequences.run(settings=settings)
            break
        except hypothesis.errors.FlakyStrategyDefinition:
            # The sequences draw their ids from earlier responses, and the API's state lives on between Hypothesis's
            # replays (a dataset deleted, a key revoked): a replay may draw differently. That is not a contract
            # failure (a failed check raises FailureGroup, or FlakyFailure when its replay differs, and fails the
            # test); schemathesis's own runner treats it so too, and runs the sequences again.
            continue
    else:
        pytest.fail("three stateful runs in a row were cut short by Hypothesis's replay of a changed API state")

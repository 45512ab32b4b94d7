"""The ``privfit`` client commands against a live ``privfit serve`` subprocess: the CLI example of docs/client.md
run verbatim, every error class giving a clear message and its documented exit status, server text printed as
text (never as rich markup), and keys and grants listed and revoked."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from process_helpers import PRIVFIT, environment, keys_for, register, server, sqlite_server
from sqlalchemy import create_engine, text
from walkthrough import clone_environment, section, shape_matches, steps
from walkthrough import run as run_walkthrough

from privfit.client.cli import (
    EXIT_AUTH,
    EXIT_CONFLICT,
    EXIT_FIT_FAILED,
    EXIT_INVALID,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    first_clause,
)
from privfit.solvers import get_solver, solver_names

REPO = Path(__file__).resolve().parents[2]
SLOW_FIT = ["--epsilon", "0.2", "--param", "steps=100000"]  # tens of seconds on 4000 rows: cancelled by the tests


def run(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PRIVFIT, *args], env=env, capture_output=True, text=True, input=stdin, timeout=120,
                          cwd=REPO)  # fmt: skip


def cli_env(database_url: str, tmp_path: Path, base: str, key: str | None) -> dict[str, str]:
    env = environment(database_url, tmp_path, PRIVFIT_URL=base)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if key is not None:
        env["PRIVFIT_API_KEY"] = key
    return env


def test_the_docs_cli_example_runs_verbatim(database_url: str, tmp_path: Path, clone: Path):
    """docs/client.md's CLI walkthrough as printed, from a fresh clone with nothing beside it (issue 36), then its
    console example (the 409 over-budget message, exit 6): every step succeeds and every answer shown has the shape
    printed (:mod:`walkthrough`; issue 24)."""
    walk = steps(section((clone / "docs" / "client.md").read_text(), "## CLI"))
    assert any(step.may_fail for step in walk) and any(step.expected == "6" for step in walk)
    _, admin = keys_for(database_url)
    with server(database_url, tmp_path) as base:
        env = clone_environment(clone, cli_env(database_url, tmp_path, base, None))
        outputs = run_walkthrough(walk, cwd=clone, env=env, timeout=300)
        headers = {"Authorization": f"Bearer {admin}"}
        (dataset,) = httpx.get(f"{base}/v1/datasets", headers=headers).json()
        (fit,) = httpx.get(f"{base}/v1/fits", params={"dataset_id": dataset["id"]}, headers=headers).json()
        budget = httpx.get(f"{base}/v1/datasets/{dataset['id']}/budget", headers=headers).json()
    for step, output in zip(walk, outputs, strict=True):
        assert step.expected is None or shape_matches(step.expected, output), (step, output[-2000:])
        if step.commands.strip() == "echo $?":  # an exit status is shown exactly, not only by its shape
            assert output.strip() == step.expected, (step, output)
    stdout = "".join(outputs)
    assert "predictions of fit" in stdout and "coefficients" in stdout, stdout
    assert "remaining ε" in stdout and "ledger of" in stdout
    assert "admissible" in stdout
    assert re.search(r"│ 1\s+│ [-0-9.]+\s+│ (yes|no)", stdout), stdout  # the second prediction row
    assert dataset["name"] == "loans" and dataset["n"] == 3000
    preprocessing = dataset["preprocessing"]["committed_epsilon"]  # the upload's private preprocessing (default on)
    assert fit["status"] == "succeeded" and preprocessing > 0
    assert budget["committed_epsilon"] == pytest.approx(preprocessing + fit["cost"]["filter_epsilon"])


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One SQLite-backed server for the error cases: its URL, an owner, an admin and an analyst key."""
    with sqlite_server(tmp_path_factory.mktemp("cli")) as running:
        analyst = httpx.post(f"{running.base}/v1/keys", headers={"Authorization": f"Bearer {running.admin}"},
                             json={"role": "analyst", "name": "ana"}).json()  # fmt: skip
        yield {"base": running.base, "url": running.database_url, "tmp": str(running.tmp_path),
               "owner": running.owner, "admin": running.admin, "analyst": analyst["key"],
               "analyst_id": analyst["key_id"], "dataset": register(running.base, running.owner, 1.0)}  # fmt: skip


def env_for(live: dict[str, str], role: str | None) -> dict[str, str]:
    return cli_env(live["url"], Path(live["tmp"]), live["base"], live[role] if role else None)


def test_over_budget_is_a_409_with_the_remaining_budget_and_exit_6(live: dict[str, str]):
    env = env_for(live, "owner")
    done = run(env, "fit", live["dataset"], "--epsilon", "5")
    assert done.returncode == EXIT_CONFLICT == 6
    assert "error: 409 Privacy budget exceeded: this fit costs ε = 5" in done.stderr
    assert "remaining ε on this dataset: 1" in done.stderr
    as_json = run(env, "estimate", live["dataset"], "--epsilon", "5", "--json")
    assert as_json.returncode == EXIT_OK and json.loads(as_json.stdout)["admissible"] is False
    assert json.loads(as_json.stdout)["outlook"]["level"] in ("low", "moderate", "high")  # JSON: the API's answer
    assert "noise outlook: " in as_json.stderr  # the outlook line goes to stderr, never into the JSON
    refused = run(env, "fit", live["dataset"], "--epsilon", "5", "--json")
    problem = json.loads(refused.stdout)
    assert refused.returncode == EXIT_CONFLICT and problem["status"] == 409 and problem["remaining_epsilon"] == 1.0


def test_bad_schema_bad_parameter_and_bad_csv_are_422s_with_exit_7(live: dict[str, str], tmp_path: Path):
    env = env_for(live, "owner")
    bad_schema = tmp_path / "schema.json"
    bad_schema.write_text(json.dumps({"label": {"name": "y", "type": "binary"}, "features": []}))
    done = run(env, "datasets", "upload", "examples/loans.csv", "--schema", str(bad_schema))
    assert done.returncode == EXIT_INVALID == 7
    assert "error: 422 Invalid schema:" in done.stderr and "budget" in done.stderr
    done = run(env, "datasets", "upload", "examples/loans.csv", "--schema", "examples/adult-schema.json")
    assert done.returncode == EXIT_INVALID and "422 Invalid dataset" in done.stderr
    done = run(env, "fit", live["dataset"], "--epsilon", "0.1", "--param", "steps=-3")
    assert done.returncode == EXIT_INVALID and "422 Invalid parameter: steps" in done.stderr
    done = run(env, "estimate", live["dataset"], "--solver", "no_such_solver", "--epsilon", "0.1")
    assert done.returncode == EXIT_INVALID and "no_such_solver" in done.stderr


def test_a_parquet_file_uploads_like_its_csv(live: dict[str, str], tmp_path: Path):
    env = env_for(live, "owner")
    parquet = tmp_path / "loans.parquet"
    pq.write_table(pa_csv.read_csv(REPO / "examples" / "loans.csv"), parquet)
    shown = []
    for path in ("examples/loans.csv", str(parquet)):
        done = run(env, "datasets", "upload", path, "--schema", "examples/loans-schema.json", "--allow-duplicate",
                   "--json")  # fmt: skip
        assert done.returncode == EXIT_OK, done.stderr
        shown.append(json.loads(done.stdout))
    assert shown[1]["name"] == "loans.parquet" and shown[1]["n"] == 3000
    assert shown[0]["content_hash"] == shown[1]["content_hash"]


def test_bad_or_missing_key_is_401_and_wrong_role_is_403_with_exit_4(live: dict[str, str]):
    done = run({**env_for(live, None), "PRIVFIT_API_KEY": "pf_0000_nope"}, "datasets", "list")
    assert done.returncode == EXIT_AUTH == 4 and "error: 401 Unauthorized: missing or invalid API key" in done.stderr
    done = run(env_for(live, None), "budget", live["dataset"])
    assert done.returncode == EXIT_AUTH and "no API key given: pass --api-key or set PRIVFIT_API_KEY" in done.stderr
    analyst = env_for(live, "analyst")
    done = run(analyst, "datasets", "upload", "examples/loans.csv", "--schema", "examples/loans-schema.json")
    assert done.returncode == EXIT_AUTH
    assert "error: 403 Forbidden: this endpoint needs one of the roles: owner" in done.stderr
    grant = run(env_for(live, "owner"), "datasets", "grant", live["dataset"], live["analyst_id"])
    assert grant.returncode == EXIT_OK
    done = run(analyst, "datasets", "delete", live["dataset"])
    assert done.returncode == EXIT_AUTH and "403 Forbidden: only the dataset's owner" in done.stderr
    assert run(analyst, "budget", live["dataset"]).returncode == EXIT_OK


def test_unknown_ids_unreachable_servers_and_local_mistakes(live: dict[str, str]):
    env = env_for(live, "owner")
    done = run(env, "datasets", "show", "00000000-0000-0000-0000-000000000000")
    assert done.returncode == EXIT_NOT_FOUND == 5 and "404 Not Found: dataset 00000000" in done.stderr
    done = run({**env, "PRIVFIT_URL": "http://127.0.0.1:9"}, "solvers")
    assert done.returncode == EXIT_UNAVAILABLE == 3 and "cannot reach http://127.0.0.1:9" in done.stderr
    done = run(env, "datasets", "upload", "no-such.csv", "--schema", "examples/loans-schema.json")
    assert done.returncode == EXIT_USAGE == 2 and "no-such.csv: no such file" in done.stderr
    done = run(env, "fit", live["dataset"], "--param", "steps")
    assert done.returncode == EXIT_USAGE and "expected NAME=VALUE" in done.stderr
    assert run(env, "fit").returncode == EXIT_USAGE  # argparse: the dataset is required


def test_wait_timeout_is_exit_9_and_a_cancelled_fit_is_exit_8(live: dict[str, str]):
    env = env_for(live, "owner")
    fit_id = run(env, "fit", live["dataset"], *SLOW_FIT, "-q").stdout.strip()
    try:
        done = run(env, "fits", "wait", fit_id, "--timeout", "0.5")
        assert done.returncode == EXIT_TIMEOUT == 9 and f"fit {fit_id} still" in done.stderr
    finally:
        cancelled = run(env, "fits", "cancel", fit_id, "--json")
    assert json.loads(cancelled.stdout)["cancel_requested"] is True
    done = run(env, "fits", "wait", fit_id, "--timeout", "60")
    assert done.returncode == EXIT_FIT_FAILED == 8 and f"fit {fit_id} cancelled" in done.stderr


def test_cancelling_a_succeeded_fit_is_exit_6(live: dict[str, str]):
    """Issue 24: a finished fit is a 409 "Fit already finished", exit 6 — not a silent 0."""
    env = env_for(live, "owner")
    fit_id = run(env, "fit", live["dataset"], "--epsilon", "0.05", "--param", "steps=20", "--wait", "-q").stdout.strip()
    again = run(env, "fits", "cancel", fit_id)
    assert again.returncode == EXIT_CONFLICT == 6, again.stderr
    assert "409 Fit already finished" in again.stderr and "(succeeded)" in again.stderr


def test_fit_wait_reports_progress_and_json_outputs_parse(live: dict[str, str]):
    env = env_for(live, "owner")
    done = run(env, "fit", live["dataset"], "--epsilon", "0.1", "--param", "steps=8000", "--wait")
    assert done.returncode == EXIT_OK, done.stderr
    assert re.search(r"^running \d+%$", done.stderr, re.M) and re.search(r"^succeeded 100%$", done.stderr, re.M)
    # 8,000 noisy full-batch steps at ε = 0.1: the noise outlook is printed, with its warning, before the wait
    assert re.search(r"^noise outlook: high \(noise/radius = [0-9.]+\)$", done.stderr, re.M), done.stderr
    assert re.search(r"^warning: the noise is expected to move the model", done.stderr, re.M)
    assert "noise outlook" in done.stdout  # and in the fit's table
    assert "coefficients" in done.stdout and "(intercept)" in done.stdout
    listed = json.loads(run(env, "fits", "list", live["dataset"], "--json").stdout)
    assert "succeeded" in {f["status"] for f in listed}
    budget = json.loads(run(env, "budget", live["dataset"], "--json").stdout)
    ledger = json.loads(run(env, "ledger", live["dataset"], "--all", "--json").stdout)
    assert ledger[-1]["committed_epsilon_after"] == pytest.approx(budget["committed_epsilon"])
    solvers = json.loads(run(env, "solvers", "--json").stdout)
    assert "dp_gd" in {s["name"] for s in solvers} and "resque_localized" not in {s["name"] for s in solvers}
    me = json.loads(run(env, "whoami", "--json").stdout)
    assert me["role"] == "owner"
    rows = run(env, "predict", next(f["id"] for f in listed if f["status"] == "succeeded"), "--rows", "-", "--json",
               stdin="x1,x2,color\n0.9,-0.5,red\n-0.9,0.5,blue\n")  # fmt: skip
    prediction = json.loads(rows.stdout)
    assert prediction["n"] == 2 and set(prediction["predictions"]) <= {"yes", "no"}  # CSV rows from stdin, decoded


def test_fits_evaluate_prints_the_noisy_metrics_and_lists_them(live: dict[str, str], tmp_path: Path):
    env = env_for(live, "owner")
    dataset = register(live["base"], live["owner"], 3.0, validation_fraction=0.25)
    fit_id = run(env, "fit", dataset, "--epsilon", "0.5", "--wait", "-q").stdout.strip()
    done = run(env, "fits", "evaluate", fit_id, "--epsilon", "0.5", "--metrics", "accuracy,roc_auc")
    assert done.returncode == EXIT_OK, done.stderr
    assert "metrics (noisy, on the private validation rows)" in done.stdout and "roc_auc" in done.stdout
    assert "validation rows" in done.stdout and "1000" in done.stdout
    as_json = json.loads(run(env, "fits", "evaluate", fit_id, "--epsilon", "0.2", "--json").stdout)
    assert as_json["status"] == "succeeded" and as_json["metrics"] == ["accuracy", "roc_auc", "log_loss"]
    listed = json.loads(run(env, "fits", "evaluations", fit_id, "--json").stdout)
    assert len(listed) == 2 and listed[1]["id"] == as_json["id"]
    ledger = json.loads(run(env, "ledger", dataset, "--all", "--json").stdout)
    assert ledger[-1]["evaluation_id"] == as_json["id"] and ledger[-1]["kind"] == "charge"
    assert "evaluation" in run(env, "ledger", dataset, "--all").stdout
    # the ledger, evaluations included, exported with its hash chain and checked offline (issue 37)
    exported = tmp_path / "ledger.jsonl"
    done = run(env, "ledger", "export", dataset, "--output", str(exported))
    assert done.returncode == EXIT_OK and f"privfit ledger verify {exported}" in done.stderr, done.stderr
    checked = run(env_for(live, None), "ledger", "verify", str(exported))  # no key: it runs offline
    assert checked.returncode == EXIT_OK and f"{len(ledger)} entries" in checked.stderr, checked.stderr
    assert checked.stdout.strip() == json.loads(exported.read_text().splitlines()[0])["head"]
    assert run(env, "datasets", "grant", dataset, live["analyst_id"]).returncode == EXIT_OK
    refused = run(env_for(live, "analyst"), "ledger", "export", dataset, "-o", str(tmp_path / "no.jsonl"))
    assert refused.returncode == EXIT_AUTH and not (tmp_path / "no.jsonl").exists()
    invalid = run(env, "fits", "evaluate", fit_id, "--epsilon", "0")
    assert invalid.returncode == EXIT_INVALID and "epsilon" in invalid.stderr
    over = run(env, "fits", "evaluate", fit_id, "--epsilon", "5")
    assert over.returncode == EXIT_CONFLICT and "409 Privacy budget exceeded" in over.stderr


def test_server_text_is_printed_as_text_never_as_markup(live: dict[str, str]):
    """Dataset names are the owner's text, shown to everyone granted: rich markup in them is printed as written
    (``[/bold]`` used to crash ``datasets list`` for all who could see it; ``[link=…]`` was rendered), and control
    characters — terminal escape sequences, only possible in data written before names were checked — are shown
    escaped."""
    names = ["[/bold]", "[link=https://evil.example]click here[/link]", ":warning: [red]alert[/red]"]
    ids = [register(live["base"], live["owner"], 1.0, name=name) for name in names]
    escaped = register(live["base"], live["owner"], 1.0, name="legacy")
    legacy = "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07\x1b[2J"  # a hyperlink, then "clear the screen"
    engine = create_engine(live["url"])
    with engine.begin() as connection:
        connection.execute(text("UPDATE datasets SET name = :name WHERE id = :id"), {"name": legacy, "id": escaped})
    engine.dispose()
    env = env_for(live, "owner")
    listed = run(env, "datasets", "list")
    assert listed.returncode == EXIT_OK, listed.stderr
    for name in names:
        assert name in listed.stdout
    assert "\x1b" not in listed.stdout and "\\x1b]8;;https://evil.example\\x07click" in listed.stdout
    for dataset_id, name in zip(ids, names, strict=True):
        shown = run(env, "datasets", "show", dataset_id)
        assert shown.returncode == EXIT_OK and f"dataset {name}" in shown.stdout, shown.stdout + shown.stderr
    analyst = env_for(live, "analyst")
    run(env, "datasets", "grant", ids[0], live["analyst_id"])
    assert "[/bold]" in run(analyst, "datasets", "list").stdout  # and so for everyone who can see it


def test_keys_and_grants_are_listed_and_revoked_from_the_cli(live: dict[str, str]):
    admin, owner = env_for(live, "admin"), env_for(live, "owner")
    created = httpx.post(f"{live['base']}/v1/keys", headers={"Authorization": f"Bearer {live['admin']}"},
                         json={"role": "analyst", "name": "[bold]temp[/bold]"}).json()  # fmt: skip
    key_id, secret = created["key_id"], created["key"]
    listed = run(admin, "keys", "list")
    assert listed.returncode == EXIT_OK, listed.stderr
    assert key_id in listed.stdout and "[bold]temp[/bold]" in listed.stdout and secret not in listed.stdout
    (row,) = [k for k in json.loads(run(admin, "keys", "list", "--json").stdout) if k["key_id"] == key_id]
    assert row["role"] == "analyst" and row["revoked_at"] is None
    assert run(owner, "keys", "list").returncode == EXIT_AUTH  # admins only

    dataset = register(live["base"], live["owner"], 1.0)
    assert run(owner, "datasets", "grant", dataset, key_id).returncode == EXIT_OK
    grants = json.loads(run(owner, "datasets", "grants", dataset, "--json").stdout)
    assert [g["api_key_id"] for g in grants] == [key_id]
    shown = run(owner, "datasets", "grants", dataset).stdout
    assert key_id in shown and "[bold]temp[/bold]" in shown  # the key's name, printed as plain text, and its id
    revoked = run(owner, "datasets", "revoke", dataset, key_id)
    assert revoked.returncode == EXIT_OK and "may no longer see or fit" in revoked.stderr
    again = run(owner, "datasets", "revoke", dataset, key_id)
    assert again.returncode == EXIT_NOT_FOUND and "has no grant" in again.stderr

    done = run(admin, "keys", "revoke", key_id)
    assert done.returncode == EXIT_OK and "revoked" in done.stderr
    whoami = run({**env_for(live, None), "PRIVFIT_API_KEY": secret}, "whoami")
    assert whoami.returncode == EXIT_AUTH and "401" in whoami.stderr
    (row,) = [k for k in json.loads(run(admin, "keys", "list", "--json").stdout) if k["key_id"] == key_id]
    assert row["revoked_at"] is not None


def test_a_multiclass_fit_shows_its_coefficient_matrix_and_predicts_class_probabilities(live: dict[str, str]):
    from test_api_multiclass import MULTICLASS_SCHEMA, multiclass_csv

    declared = {**MULTICLASS_SCHEMA, "budget": {"epsilon": 1.0, "delta": 1e-6}}
    uploaded = httpx.post(
        f"{live['base']}/v1/datasets", headers={"Authorization": f"Bearer {live['owner']}"},
        files={"file": ("m.csv", multiclass_csv())}, data={"schema": json.dumps(declared), "allow_duplicate": "true"},
        timeout=30,
    )  # fmt: skip
    assert uploaded.status_code == 201, uploaded.text
    env = env_for(live, "owner")
    done = run(env, "fit", uploaded.json()["id"], "--epsilon", "0.5", "--wait")
    assert done.returncode == EXIT_OK, done.stderr
    assert "coefficients (one column per class)" in done.stdout
    assert all(level in done.stdout for level in ("low", "mid", "high")) and "(intercept)" in done.stdout
    fit_id = json.loads(run(env, "fits", "list", uploaded.json()["id"], "--json").stdout)[0]["id"]
    table = run(env, "predict", fit_id, "--rows", "-", stdin="x1,x2,color\n1,-1,red\n-1,1,blue\n")
    assert table.returncode == EXIT_OK and "probabilities" in table.stdout and "0.99" in table.stdout, table.stderr
    prediction = json.loads(run(env, "predict", fit_id, "--rows", "-", "--json",
                                stdin="x1,x2,color\n1,-1,red\n-1,1,blue\n").stdout)  # fmt: skip
    assert prediction["predictions"] == ["high", "low"] and prediction["classes"] == ["low", "mid", "high"]
    assert [sum(p) for p in prediction["probabilities"]] == pytest.approx([1.0, 1.0])
    auto = run(env, "fit", uploaded.json()["id"], "--solver", "auto", "--epsilon", "0.3", "--param",
               "mode=recommended", "--wait")  # fmt: skip
    assert auto.returncode == EXIT_OK, auto.stderr
    assert any("selected candidate" in line and "dp_gd" in line for line in auto.stdout.splitlines()), auto.stdout


def test_keys_create_prints_the_key_and_nothing_else(tmp_path: Path):
    """Issue 24: on a fresh SQLite database (migrated by the command itself) the output is the four lines of the
    key — no Alembic INFO lines above them."""
    env = environment(f"sqlite:///{tmp_path / 'fresh.db'}", tmp_path)
    done = run(env, "keys", "create", "--role", "owner")
    assert done.returncode == EXIT_OK, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["key id", "role", "key"]
    assert re.fullmatch(r"key:\s+pf_\S+", lines[2]) and lines[3] == "(the key is shown only now)" and len(lines) == 4


def test_the_solvers_table_never_cuts_a_description_inside_parentheses():
    """Issue 24: "Objective perturbation (Chaudhuri et al. 2011" was cut at the "; " inside its parenthesis."""
    assert (
        first_clause("Objective perturbation (A 2011; B 2012): the rest") == "Objective perturbation (A 2011; B 2012)"
    )
    assert first_clause("DP-SGD: noisy steps; more") == "DP-SGD"
    for name in solver_names():
        summary = first_clause(get_solver(name).description)
        assert summary and summary.count("(") == summary.count(")"), (name, summary)


def test_global_options_go_before_the_subcommand_too(live: dict[str, str]):
    """Issue 24: ``privfit --url … --api-key … --json datasets list`` (was "invalid choice"); an option after the
    subcommand wins over the same one before it."""
    env = env_for(live, None)
    env.pop("PRIVFIT_URL", None)
    before = run(env, "--url", live["base"], "--api-key", live["owner"], "--json", "datasets", "list")
    assert before.returncode == EXIT_OK, before.stderr
    assert live["dataset"] in [d["id"] for d in json.loads(before.stdout)]
    overridden = run(env, "--url", "http://127.0.0.1:9", "--api-key", live["owner"], "datasets", "list",
                     "--url", live["base"], "-q")  # fmt: skip
    assert overridden.returncode == EXIT_OK, overridden.stderr
    unreachable = run(env, "--url", "http://127.0.0.1:9", "--api-key", live["owner"], "datasets", "list")
    assert unreachable.returncode == EXIT_UNAVAILABLE and "cannot reach http://127.0.0.1:9" in unreachable.stderr

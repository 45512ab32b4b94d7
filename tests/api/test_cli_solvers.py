"""Issue 36: ``privfit solvers`` and the Python client against a live default server (exact noise sampler) show
which solvers the server runs, and for the others why not and the setting that enables them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_helpers import PRIVFIT, environment, sqlite_server

from privfit.client import Client

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """``privfit serve`` with the service's defaults (``environment`` drops the suite's PRIVFIT_NOISE_SAMPLER=float),
    and the environment of a CLI call against it with the owner's key."""
    tmp_path = tmp_path_factory.mktemp("cli-solvers")
    with sqlite_server(tmp_path) as server:
        env = environment(server.database_url, tmp_path, PRIVFIT_URL=server.base, PRIVFIT_API_KEY=server.owner)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        yield {"base": server.base, "owner": server.owner, **env}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PRIVFIT, *args], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


def test_the_solvers_table_says_which_solvers_this_server_runs_and_why_not(live: dict[str, str]) -> None:
    env = {k: v for k, v in live.items() if k not in ("base", "owner")}
    done = run(env, "solvers")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    row = {name: next(line for line in lines if f" {name} " in line) for name in ("dp_gd", "objective_perturbation")}
    assert "│ yes" in row["dp_gd"]
    assert "no: needs PRIVFIT_NOISE_SAMPLER=float" in row["objective_perturbation"]
    assert "not available on this server" in done.stdout
    below = done.stdout.split("not available on this server", 1)[1]
    assert "objective_perturbation" in below and "dp_lazy_oco" in below and "continuous density" in below
    explained = {line.split("│")[1].strip() for line in below.splitlines() if line.startswith("│")} - {"solver", ""}
    assert explained == {"objective_perturbation", "dp_lazy_oco"}  # only the refused solvers, one row each
    listed = json.loads(run(env, "solvers", "--json").stdout)
    entries = {s["name"]: s for s in listed}
    assert entries["objective_perturbation"]["available"] is False
    assert entries["objective_perturbation"]["enabled_by"] == "PRIVFIT_NOISE_SAMPLER=float"
    assert entries["dp_gd"]["available"] is True and entries["dp_gd"]["unavailable_reason"] is None


def test_the_python_client_carries_availability(live: dict[str, str]) -> None:
    with Client(live["base"], live["owner"]) as client:
        solvers = {s.name: s for s in client.solvers()}
    lazy = solvers["dp_lazy_oco"]
    assert lazy.available is False and lazy.enabled_by == "PRIVFIT_NOISE_SAMPLER=float"
    assert "exact" in (lazy.unavailable_reason or "")
    assert solvers["output_perturbation"].available is True and solvers["output_perturbation"].enabled_by is None
    assert "objective_perturbation" not in solvers["auto"].description  # not one of its candidates here

"""``privfit schema draft FILE`` (issue 36 item 8) as a command: drafts that round-trip through a live server's upload
once their placeholders are filled (examples/loans.csv) or with the wide range private preprocessing narrows (a
dev-like CSV), an unfilled draft refused with a 422 naming the field, and every error one line on stderr naming the
column with its exit status. The drafting rules themselves: tests/datasets/test_draft.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from process_helpers import PRIVFIT, environment, sqlite_server
from walkthrough import section, steps

from privfit.client import cli as client_cli
from privfit.client import schema_cli
from privfit.datasets.draft import DEFAULT_WIDE_BOUND, draft_schema, unfilled

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PRIVFIT, *args], env=env, capture_output=True, text=True, timeout=300, cwd=REPO)


@dataclass(frozen=True)
class Live:
    """A running server, its owner key and the environment of the owner's CLI."""

    base: str
    owner: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """One SQLite-backed server for the module's uploads."""
    with sqlite_server(tmp_path_factory.mktemp("draft")) as running:
        env = environment(running.database_url, running.tmp_path, PRIVFIT_URL=running.base,
                          PRIVFIT_API_KEY=running.owner)  # fmt: skip
        yield Live(running.base, running.owner, env)


def fill(document: dict, values: dict[str, float]) -> dict:
    filled = json.loads(json.dumps(document))
    for path in unfilled(filled):
        *parents, key = path.split(".")
        container = filled
        for part in parents:
            container = container[int(part)] if isinstance(container, list) else container[part]
        container[key] = values[path]
    return filled


def dataset(live: Live, dataset_id: str) -> dict:
    answer = httpx.get(f"{live.base}/v1/datasets/{dataset_id}", headers={"Authorization": f"Bearer {live.owner}"},
                       timeout=60)  # fmt: skip
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_loans_draft_is_refused_unfilled_and_uploads_filled_from_the_codebook(live: Live, tmp_path: Path):
    draft_path = tmp_path / "loans-draft.json"
    done = run("schema", "draft", "examples/loans.csv", "--label", "default", "--output", str(draft_path))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert f"wrote {draft_path} (3000 rows read)" in done.stderr
    assert "note: numeric bounds of age, income, debt_ratio are placeholders" in done.stderr
    assert "never from the data's minimum or maximum" in done.stderr and "part of the public schema" in done.stderr
    drafted = json.loads(draft_path.read_text())

    refused = run("datasets", "upload", "examples/loans.csv", "--schema", str(draft_path), env=live.env)
    assert refused.returncode == client_cli.EXIT_INVALID, refused.stderr
    assert "422 Invalid schema: features.0.numeric.lower: Input should be a valid number" in refused.stderr

    codebook = json.loads((REPO / "examples" / "loans-schema.json").read_text())
    values = {f"budget.{key}": value for key, value in codebook["budget"].items()}
    for i, feature in enumerate(codebook["features"][:3]):
        values.update({f"features.{i}.lower": feature["lower"], f"features.{i}.upper": feature["upper"]})
    filled = tmp_path / "loans-filled.json"
    filled.write_text(json.dumps(fill(drafted, values)))
    done = run("datasets", "upload", "examples/loans.csv", "--schema", str(filled), "--allow-duplicate", "-q",
               env=live.env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    uploaded = dataset(live, done.stdout.strip())
    assert uploaded["n"] == 3000 and uploaded["schema"]["label"]["positive"] == "yes"
    assert [f["name"] for f in uploaded["schema"]["features"]] == ["age", "income", "debt_ratio", "employment"]


def test_a_dev_like_csv_drafted_for_private_preprocessing_uploads(live: Live, tmp_path: Path):
    """A telco-like file: an identifier, a 0/1 code, blanks in an amount, a `;` separator; drafted with
    ``--bounds derive``, its only placeholders are the fills, and the upload's preprocessing narrows the range."""
    header = ["customer", "plan", "senior", "tenure", "monthly", "total", "churn"]
    lines = [";".join(header)]
    for i in range(2400):
        tenure = (i * 37) % 72
        monthly = 20 + (i * 13) % 95 + (i % 7) / 10
        total = " " if tenure == 0 else f"{tenure * monthly:.2f}"
        plan = ["Month-to-month", "One year", "Two year"][i % 3]
        lines.append(f"{i:04d}-C{i * 7919 % 10007};{plan};{i % 2};{tenure};{monthly:.1f};{total};"
                     f"{'Yes' if (i * 31) % 5 == 0 else 'No'}")  # fmt: skip
    data = tmp_path / "churn.csv"
    data.write_text("\n".join(lines) + "\n")
    base = ["schema", "draft", str(data), "--label", "churn", "--delimiter", ";"]
    steps = [
        ([], "column 'customer' has more than 50 distinct values"),
        (["--ignore", "customer"], "column 'senior' holds only 2 distinct integers"),
        (["--ignore", "customer", "--categorical", "senior"], "column 'total' has missing cells"),
    ]
    for extra, says in steps:
        done = run(*base, *extra)
        assert done.returncode == schema_cli.EXIT_INVALID and f"error: {says}" in done.stderr, done.stderr
        assert done.stdout == "" and done.stderr.count("\n") == 1
    done = run(*base, "--ignore", "customer", "--categorical", "senior", "--missing", "impute", "--bounds", "derive",
               "--epsilon", "3", "--delta", "1e-6")  # fmt: skip
    assert done.returncode == 0, done.stderr
    drafted = json.loads(done.stdout)
    assert unfilled(drafted) == ["features.3.fill", "features.4.fill", "features.5.fill"]
    assert drafted["preprocessing"] == {"share": 0.05} and drafted["csv"] == {"delimiter": ";"}
    schema = tmp_path / "churn-schema.json"
    schema.write_text(json.dumps(fill(drafted, dict.fromkeys(unfilled(drafted), 0.0))))
    done = run("datasets", "upload", str(data), "--schema", str(schema), "-q", env=live.env)
    assert done.returncode == 0, done.stderr
    uploaded = dataset(live, done.stdout.strip())
    assert uploaded["n"] == 2400 and uploaded["preprocessing"] is not None
    derived = {f["name"]: f for f in uploaded["schema"]["features"] if f["type"] == "numeric"}
    assert set(derived) == {"tenure", "monthly", "total"}
    for feature in derived.values():  # declared on the wide range; preprocessing derived a narrower clip inside it
        assert (feature["lower"], feature["upper"]) == (-DEFAULT_WIDE_BOUND, DEFAULT_WIDE_BOUND)
        if feature.get("transform"):
            a, b = feature["transform"]["clip"]
            assert -DEFAULT_WIDE_BOUND <= a < b <= DEFAULT_WIDE_BOUND and b - a < DEFAULT_WIDE_BOUND
    assert any(feature.get("transform") for feature in derived.values())


def test_command_line_errors_and_exit_statuses(tmp_path: Path):
    done = run("schema", "draft", "examples/loans.csv", "--label", "nope")
    assert done.returncode == schema_cli.EXIT_INVALID and done.stdout == ""
    assert done.stderr == "error: unknown label column 'nope' (columns: age, income, debt_ratio, employment, default)\n"
    (tmp_path / "table.xlsx").write_bytes(b"PK\x03\x04")
    done = run("schema", "draft", str(tmp_path / "table.xlsx"), "--label", "y")
    assert done.returncode == schema_cli.EXIT_INVALID and "not a CSV or Parquet file" in done.stderr
    done = run("schema", "draft", str(tmp_path / "absent.csv"), "--label", "y")
    assert done.returncode == schema_cli.EXIT_USAGE and "absent.csv: no such file" in done.stderr
    existing = tmp_path / "schema.json"
    existing.write_text("{}")
    done = run("schema", "draft", "examples/loans.csv", "--label", "default", "-o", str(existing))
    assert done.returncode == schema_cli.EXIT_USAGE and "pass --force" in done.stderr
    assert existing.read_text() == "{}"
    done = run("schema", "draft", "--help")
    assert done.returncode == 0 and "never from the data's minimum or maximum" in " ".join(done.stdout.split())


def test_exit_statuses_are_the_clients_and_help_does_not_import_the_draft():
    assert (schema_cli.EXIT_USAGE, schema_cli.EXIT_INVALID) == (client_cli.EXIT_USAGE, client_cli.EXIT_INVALID)
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "privfit.cli", "--help"], capture_output=True,
                          text=True, timeout=300, cwd=REPO)  # fmt: skip
    assert done.returncode == 0 and "schema" in done.stdout
    assert "privfit.client.schema_cli" not in done.stderr and "privfit.datasets.draft" not in done.stderr


def test_the_docs_draft_command_runs_as_printed(tmp_path: Path):
    """docs/datasets.md's drafting example, run as printed beside a copy of examples/loans.csv, writes the draft
    that privfit.datasets.draft makes of that file."""
    (step,) = steps(section((REPO / "docs" / "datasets.md").read_text(), "## Drafting a schema from the file"))
    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / "examples" / "loans.csv", tmp_path / "examples" / "loans.csv")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-e", "-c", step.commands], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "loans-draft.json").read_text())
    assert written == draft_schema(REPO / "examples" / "loans.csv", label="default").schema

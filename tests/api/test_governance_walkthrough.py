"""docs/governance.md's worked example (issue 37) runs as printed from a fresh clone, on SQLite and PostgreSQL: the
owner grants and allocates, Alice and Bob fit within their shares, Bob's fit over his allocation is refused (exit 6)
although the dataset has room, the owner lists the allocations and an auditor verifies the exported ledger."""

from __future__ import annotations

from pathlib import Path

import httpx
from process_helpers import keys_for, server
from test_cli import cli_env
from walkthrough import clone_environment, section, steps
from walkthrough import run as run_walkthrough


def test_the_governance_example_runs_as_printed(database_url: str, tmp_path: Path, clone: Path):
    walk = steps(section((clone / "docs" / "governance.md").read_text(), "## Worked example: a team of two analysts"))
    assert any(step.may_fail and "--epsilon 0.4" in step.commands for step in walk)
    _, admin = keys_for(database_url)
    with server(database_url, tmp_path) as base:
        env = clone_environment(clone, cli_env(database_url, tmp_path, base, None))
        outputs = run_walkthrough(walk, cwd=clone, env=env, timeout=300)
        headers = {"Authorization": f"Bearer {admin}"}
        (dataset,) = httpx.get(f"{base}/v1/datasets", headers=headers).json()
        allocations = httpx.get(f"{base}/v1/datasets/{dataset['id']}/allocations", headers=headers).json()
        budget = httpx.get(f"{base}/v1/datasets/{dataset['id']}/budget", headers=headers).json()
    refused = next(i for i, step in enumerate(walk) if step.may_fail and "--epsilon 0.4" in step.commands)
    assert "your allocation" in outputs[refused] and outputs[refused + 1].strip() == "6", outputs[refused:]
    stdout = "".join(outputs)
    assert "your allocation" in stdout and "alice" in stdout and "bob" in stdout
    assert "hash chain holds" in stdout or "head" in stdout, stdout[-2000:]
    shares = {a["api_key_name"]: a for a in allocations}
    assert shares["alice"]["epsilon_max"] == 1.0 and 0.0 < shares["alice"]["remaining_epsilon"] < 1.0
    assert shares["bob"]["epsilon_max"] == 0.5 and shares["bob"]["committed_epsilon"] > 0.0
    assert budget["remaining_epsilon"] > shares["bob"]["remaining_epsilon"]  # the dataset had room; Bob did not

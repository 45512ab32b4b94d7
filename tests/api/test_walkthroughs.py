"""Issue 24: the README's first command starts the service (``bash scripts/serve.sh``, with a free port) and its
curl walkthrough runs as printed against it; every answer has the shape the comment under it shows
(:mod:`walkthrough`). The CLI walkthrough is run the same way by
``test_cli.test_the_docs_cli_example_runs_verbatim`` (on SQLite and PostgreSQL), and the Python client's by
``test_client.test_the_docs_python_example_runs``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from process_helpers import environment, free_port, serving
from walkthrough import Step, run, section, shape_matches, steps

REPO = Path(__file__).resolve().parents[2]
ADULT = REPO / ".." / "shared" / "data" / "adult" / "adult.data"
VENV_PRIVFIT = REPO / ".venv" / "bin" / "privfit"


def assert_shapes(walk: list[Step], outputs: list[str]) -> int:
    """Every step with a comment answered in its shape; the number of answers checked."""
    checked = 0
    for step, output in zip(walk, outputs, strict=True):
        if step.expected is not None:
            assert shape_matches(step.expected, output), (
                f"the answer of\n{step.commands}\ndoes not have the shape\n{step.expected}\nit was\n{output[:3000]}"
            )
            checked += 1
    return checked


def shell_env(database_url: str, tmp_path: Path, base: str) -> dict[str, str]:
    env = environment(database_url, tmp_path, PRIVFIT_URL=base)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@contextmanager
def serve_script(database_url: str, tmp_path: Path) -> Iterator[str]:
    """The README's ``bash scripts/serve.sh`` (its arguments go to ``privfit serve``: a free port here), on its own
    SQLite database; the service's URL once it is ready (a first run installs privfit into .venv: 300 s)."""
    port = free_port()
    command = ["bash", "scripts/serve.sh", "--port", str(port)]
    with serving(command, environment(database_url, tmp_path), tmp_path, port, timeout=300, cwd=REPO) as base:
        yield base


@pytest.mark.skipif(not ADULT.exists(), reason=f"UCI Adult is not at {ADULT} (../shared/data/adult)")
@pytest.mark.skipif(not VENV_PRIVFIT.exists(), reason="the README runs .venv/bin/privfit: run scripts/test.sh")
def test_the_readme_curl_walkthrough_runs_as_printed(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    walk = steps(section(readme, "## Walkthrough: Adult, a fit at ε = 1, the budget"))
    assert sum(step.expected is not None for step in walk) >= 6
    url = f"sqlite:///{tmp_path / 'privfit.db'}"
    with serve_script(url, tmp_path) as base:
        outputs = run(walk, cwd=REPO, env=shell_env(url, tmp_path, base))
    assert assert_shapes(walk, outputs) >= 6

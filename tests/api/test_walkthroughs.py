"""Issues 24 and 36: the README's first command starts the service (``bash scripts/serve.sh``, with a free port) and
its curl walkthrough runs as printed against it, from a fresh clone — a copy of the repository with nothing beside it
(:func:`walkthrough.fresh_clone`), so the walkthrough can use only what the repository ships; every answer has the
shape the comment under it shows (:mod:`walkthrough`). A failing request is visible: curl prints its error and the
API's problem, and ``id_of`` says in one line that the answer has no id. The README and docs/client.md point at
nothing outside the repository, and the shipped Adult data is the original, byte for byte.

The CLI walkthrough is run the same way by ``test_cli.test_the_docs_cli_example_runs_verbatim`` (on SQLite and
PostgreSQL), and the Python client's by ``test_client.test_the_docs_python_example_runs``."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from process_helpers import environment, free_port, serving
from walkthrough import Step, clone_environment, run, section, shape_matches, steps

REPO = Path(__file__).resolve().parents[2]
WALKTHROUGH = "## Walkthrough: Adult, a fit at ε = 1, the budget"
ADULT = Path("examples/data/adult")
#: a Markdown link's target
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
#: what id_of prints, alone on its line, when an answer has no id
NO_ID = "id_of: no id in the answer above"


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


def shell_env(database_url: str, tmp_path: Path, base: str, clone: Path) -> dict[str, str]:
    env = clone_environment(clone, environment(database_url, tmp_path, PRIVFIT_URL=base))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@contextmanager
def serve_script(database_url: str, tmp_path: Path, clone: Path) -> Iterator[str]:
    """The README's ``bash scripts/serve.sh`` in ``clone`` (its arguments go to ``privfit serve``: a free port here),
    on its own SQLite database; the service's URL once it is ready."""
    port = free_port()
    command = ["bash", "scripts/serve.sh", "--port", str(port)]
    env = clone_environment(clone, environment(database_url, tmp_path))
    with serving(command, env, tmp_path, port, timeout=300, cwd=clone) as base:
        yield base


def readme_walkthrough() -> list[Step]:
    return steps(section((REPO / "README.md").read_text(), WALKTHROUGH))


def definitions() -> str:
    """The walkthrough's first step without its key: ``URL``, ``AUTH`` and ``id_of`` as printed."""
    first = readme_walkthrough()[0].commands
    assert "id_of()" in first and "KEY=$(" in first
    return "\n".join(line for line in first.splitlines() if not line.startswith("KEY="))


def upload_step() -> Step:
    (upload,) = [step for step in readme_walkthrough() if "/v1/datasets | id_of" in step.commands]
    return upload


def test_the_readme_curl_walkthrough_runs_as_printed_on_a_fresh_clone(tmp_path: Path, clone: Path) -> None:
    walk = readme_walkthrough()
    assert sum(step.expected is not None for step in walk) >= 6
    assert "../" not in "".join(step.commands for step in walk)
    url = f"sqlite:///{tmp_path / 'privfit.db'}"
    env = shell_env(url, tmp_path, "", clone)
    imported = subprocess.run([".venv/bin/python", "-c", "import privfit; print(privfit.__file__)"], cwd=clone,
                              env=env, check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert Path(imported).is_relative_to(clone / "service"), imported  # the clone's own code runs
    with serve_script(url, tmp_path, clone) as base:
        outputs = run(walk, cwd=clone, env=shell_env(url, tmp_path, base, clone))
        assert assert_shapes(walk, outputs) >= 6
        # the same upload with a key the service does not know: curl shows the problem and fails, id_of says why
        refused = subprocess.run(
            ["bash", "-o", "pipefail", "-c", f"{definitions()}\nAUTH='Authorization: Bearer pf_unknown'\n"
             f"{upload_step().commands}"],
            cwd=clone, env=shell_env(url, tmp_path, base, clone), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert refused.returncode != 0
    assert '"status":401' in refused.stderr.replace(" ", "") and "curl: (22)" in refused.stderr, refused.stderr
    assert refused.stderr.splitlines()[-1] == NO_ID and "Traceback" not in refused.stderr, refused.stderr


def test_a_walkthrough_upload_without_a_server_fails_in_two_lines(tmp_path: Path, clone: Path) -> None:
    """With no service listening, the upload step prints curl's error and id_of's one line (no traceback, no
    silence) and fails."""
    env = clone_environment(clone, {**os.environ, "PRIVFIT_URL": f"http://127.0.0.1:{free_port()}"})
    done = subprocess.run(["bash", "-o", "pipefail", "-c", f"{definitions()}\n{upload_step().commands}"], cwd=clone,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("curl: (7)") and lines[1] == NO_ID, done.stderr


@pytest.mark.parametrize("answer", ['{"type": "about:blank", "status": 422, "detail": "schema: …"}', "", "[1]", "<"])
def test_id_of_says_in_one_line_that_an_answer_has_no_id(answer: str) -> None:
    done = subprocess.run(["bash", "-c", f"{definitions()}\nprintf %s \"$ANSWER\" | id_of"], capture_output=True,
                          text=True, env={**os.environ, "ANSWER": answer}, timeout=60)  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"{answer}\n" if answer else "") + NO_ID + "\n"  # the answer on its own line, then why
    kept = subprocess.run(["bash", "-c", f"{definitions()}\necho '{{\"id\": \"abc\", \"n\": 3}}' | id_of"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert kept.returncode == 0 and kept.stdout == "abc\n"


@pytest.mark.parametrize("page", ["README.md", "docs/client.md"])
def test_the_walkthrough_pages_point_at_nothing_outside_the_repository(page: str) -> None:
    """Their commands run from the repository's root, so no ``../`` in their text; a relative link resolves inside
    the repository (from docs/, ``../README.md`` is inside)."""
    path = REPO / page
    text = path.read_text()
    for target in LINK.findall(text):
        local = target.split("#", 1)[0]
        if local and not re.match(r"[a-z][a-z0-9+.-]*:", local):
            assert (path.parent / local).resolve().is_relative_to(REPO), f"{page} links outside: {target}"
    prose = LINK.sub("", text)
    outside = [line for line in prose.splitlines() if "../" in line]
    assert not outside, f"{page} names paths outside the repository: {outside}"


def test_the_shipped_adult_data_is_the_original_its_readme_names() -> None:
    """examples/data/adult/adult.data.gz decompresses to the sha256 its README gives for adult.data (UCI's file),
    has the sha256 given for the .gz, and was written with ``gzip -n`` (no name, no time stamp: reproducible)."""
    readme = (REPO / ADULT / "README.md").read_text()
    original = re.search(r"`adult\.data` \(decompressed\): `([0-9a-f]{64})`", readme)
    compressed = re.search(r"`adult\.data\.gz`: `([0-9a-f]{64})`", readme)
    assert original and compressed, "the README gives both sha256 sums"
    packed = (REPO / ADULT / "adult.data.gz").read_bytes()
    assert hashlib.sha256(packed).hexdigest() == compressed[1]
    rows = gzip.decompress(packed)
    assert hashlib.sha256(rows).hexdigest() == original[1]
    assert packed[3] & 0x08 == 0 and packed[4:8] == b"\0\0\0\0"  # FLG.FNAME unset, MTIME 0
    assert len([line for line in rows.splitlines() if line.strip()]) == 32_561
    assert "CC BY 4.0" in readme and "https://doi.org/10.24432/C5XW20" in readme
    assert not (REPO / ADULT / "adult.test").exists() and not (REPO / ADULT / "adult.test.gz").exists()

"""The README stays a landing page (issue 19): under 200 lines, the two set-up commands, a link to every page in
docs/; and no relative link in the README or docs/ points at a file that does not exist. Issue 36: the README opens
with its title, a two-line description, the two commands and the walkthrough, the status table lives in
docs/status.md, the docs cite the design materials (not shipped) by name rather than by a path outside the repository,
and examples in the docs show what the service returns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from privfit.privacy.noise import describe_sampler

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_is_short_and_keeps_the_two_commands():
    readme = README.read_text()
    assert len(readme.splitlines()) < 200
    assert "```bash\nbash scripts/serve.sh\n```" in readme
    assert "```bash\nbash scripts/test.sh\n```" in readme


def test_the_readme_links_every_doc():
    linked = {target.split("#", 1)[0] for target in LINK.findall(README.read_text())}
    assert DOCS, "docs/ has no Markdown pages"
    missing = [doc.name for doc in DOCS if f"docs/{doc.name}" not in linked]
    assert not missing, f"docs/ pages the README does not link: {missing}"


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda page: page.relative_to(REPO).as_posix())
def test_relative_links_resolve(page: Path):
    broken = []
    for target in LINK.findall(page.read_text()):
        path = target.split("#", 1)[0]
        if not path or re.match(r"[a-z][a-z0-9+.-]*:", path):  # an anchor in the page, or a URL
            continue
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: links to missing files: {broken}"


def test_the_readme_opens_with_the_two_commands_then_the_walkthrough():
    """Title, a two-line description, then "The two commands" and the walkthrough as the first two sections; the
    status table is in docs/status.md, linked from the README."""
    readme = README.read_text()
    head, _, _ = readme.partition("\n## ")
    title, _, description = head.partition("\n\n")
    assert title == "# privfit" and len(description.strip().splitlines()) == 2, head
    sections = re.findall(r"^## (.+)$", readme, re.M)
    assert sections[:2] == ["The two commands", "Walkthrough: Adult, a fit at ε = 1, the budget"], sections
    assert "| part | state |" not in readme and "| part | state |" in (REPO / "docs" / "status.md").read_text()
    assert "(docs/status.md)" in readme


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda page: page.relative_to(REPO).as_posix())
def test_no_page_cites_the_design_materials_by_a_path_outside_the_repository(page: Path):
    """The design brief and the implementation specs are not shipped: pages name them, never by ../shared/...; only
    docs/benchmarks.md may say that benchmarks read ../shared/data (they skip a dataset that is not there)."""
    text = page.read_text()
    cited = re.findall(r"\.\./shared/(?:DESIGN\.md|specs/[\w.-]*)", text)
    assert not cited, f"{page.relative_to(REPO)} cites {cited}"
    if page.name != "benchmarks.md":
        assert "../shared" not in text, f"{page.relative_to(REPO)} points at ../shared"


def test_the_client_docs_noise_sampler_example_has_the_keys_the_service_returns():
    """docs/client.md's `noise_sampler` examples name only keys that describe_sampler returns (no "library")."""
    text = (REPO / "docs" / "client.md").read_text()
    examples = re.findall(r"`(\{\"name\": \"(exact|float)\".*?\})`", text, re.S)
    assert {kind for _, kind in examples} == {"exact", "float"}, examples
    returned = {"exact": set(describe_sampler("exact")), "float": set(describe_sampler("float"))}
    for example, kind in examples:
        keys = set(re.findall(r'"([a-z_]+)":', example))
        assert keys <= returned[kind], (kind, keys - returned[kind])
        assert "name" in keys and len(keys) > 1


def test_the_dashboard_docs_say_what_its_upload_accepts():
    """The dashboard's file picker offers CSV and Parquet and sends the file under its own name (which the API reads
    as Parquet when it ends in .parquet), and docs/dashboard.md says so — not also "CSV only"."""
    manage = (REPO / "service" / "privfit" / "ui" / "static" / "manage.js").read_text()
    accept = re.search(r'"upload-file"[^)]*?accept: "([^"]+)"', manage)
    assert accept and {".csv", ".parquet"} <= set(accept[1].split(",")), accept
    assert re.search(r'\.append\("file", (\w+), \1\.name\)', manage)
    doc = (REPO / "docs" / "dashboard.md").read_text()
    assert "a CSV or Parquet file" in doc and "CSV only" not in doc

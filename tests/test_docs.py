"""The README stays a landing page (issue 19): under 200 lines, the two set-up commands, a link to every page in
docs/; and no relative link in the README or docs/ points at a file that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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

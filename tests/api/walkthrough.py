"""Run the walkthroughs of the README and docs/client.md as printed, and compare each answer with the comment under it.

A walkthrough is the ```bash (and ```console) blocks of one section of a Markdown file. It is cut into *steps*: the
command lines up to a group of ``# …`` comment lines, which show the answer of the step's last command (in a
```console block: the lines after a ``$ `` command). The steps run in ONE bash process (variables carry over, as
in a reader's terminal) with stderr merged into stdout and a marker echoed after each step; the output between
two markers is that step's answer. A failing command stops the run, except in a ```console step, which shows its
exit status itself (``echo $?``).

Answers are compared by *shape* (:func:`shape_matches`): a JSON answer is re-printed with ``", "`` / ``": "``
separators in its own key order; in both the answer and the comment, UUIDs become ``<id>`` and numbers ``<n>``
(ids and numbers vary from run to run), and ``…`` in the comment matches anything.

Walkthroughs run from a *fresh clone* (:func:`fresh_clone`): a copy of the repository's files in a directory with
nothing beside it, so a walkthrough that reads a file outside the repository fails as it would for a new user.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

MARKER = "@@walkthrough-step"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ELIDED_UUID = re.compile(r"[0-9a-f]{8}-…")
_NUMBER = re.compile(r"(?<![\w<.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Step:
    commands: str
    expected: str | None  # the comment's text (joined lines), or None when the step shows no answer
    may_fail: bool = False  # a ```console step: its exit status is part of what it shows (`echo $?`)


def section(markdown: str, heading: str) -> str:
    """The text of the section under ``heading`` (a full heading line, e.g. ``"## CLI"``) up to the next heading of
    the same or a higher level."""
    level = len(heading.split(" ", 1)[0])
    lines, fenced = [], False
    for line in markdown.split(f"\n{heading}\n", 1)[1].splitlines():
        fenced ^= line.startswith("```")
        if not fenced and re.match(rf"#{{1,{level}}} ", line):  # a heading (not a comment inside a code block)
            break
        lines.append(line)
    return "\n".join(lines)


def run_python_example(markdown: Path, heading: str, namespace: dict | None = None) -> None:
    """Execute, as printed, the first ```python block of the section under ``heading`` of the Markdown file
    ``markdown``, with ``namespace``'s names defined (an example that continues an earlier one)."""
    block = re.search(r"```python\n(.*?)```", section(markdown.read_text(), heading), re.S)
    assert block is not None, f"{markdown.name} has no Python example under {heading!r}"
    exec(compile(block.group(1), str(markdown), "exec"), {"__name__": "doc_example", **(namespace or {})})


def steps(text: str) -> list[Step]:
    """The steps of every ```bash and ```console block in ``text``, in order."""
    found: list[Step] = []
    for kind, block in re.findall(r"```(bash|console)\n(.*?)```", text, re.S):
        found.extend(_bash_steps(block) if kind == "bash" else _console_steps(block))
    return found


def _bash_steps(block: str) -> list[Step]:
    out: list[Step] = []
    commands: list[str] = []
    comments: list[str] = []
    for line in block.splitlines():
        if line.startswith("#"):
            comments.append(line[1:].strip())
            continue
        if comments:
            out.append(Step("\n".join(commands), " ".join(comments)))
            commands, comments = [], []
        commands.append(line)
    if commands or comments:
        out.append(Step("\n".join(commands), " ".join(comments) if comments else None))
    return [step for step in out if step.commands.strip()]


def _console_steps(block: str) -> list[Step]:
    out: list[Step] = []
    for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
        command, _, answer = chunk.partition("\n")
        out.append(Step(command, " ".join(line.strip() for line in answer.splitlines()) or None, may_fail=True))
    return out


def script(walk: list[Step]) -> str:
    """One bash script running the steps with a marker after each (stderr merged into stdout)."""
    lines = ["exec 2>&1"]
    tolerant = False
    for index, step in enumerate(walk):
        if step.may_fail and not tolerant:  # from the first console step on, a failing command does not stop the run
            lines.append("set +e")  # once: `set +e` itself sets $?, which an `echo $?` step must see unchanged
            tolerant = True
        lines += [step.commands, f"walkthrough_status=$?; printf '\\n{MARKER} {index}\\n'; (exit $walkthrough_status)"]
    return "\n".join(lines) + "\n"


def run(walk: list[Step], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> list[str]:
    """Run the steps in one ``bash -eo pipefail``; the output of each step (raises with the output if one fails)."""
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script(walk)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
    parts = re.split(rf"^{MARKER} (\d+)\n", done.stdout, flags=re.M)
    outputs = [parts[i] for i in range(0, len(parts) - 1, 2)]
    if done.returncode != 0 or len(outputs) != len(walk):
        failed = walk[len(outputs)].commands if len(outputs) < len(walk) else "(after the last step)"
        raise AssertionError(f"walkthrough step failed (exit {done.returncode}):\n{failed}\n--- output ---\n"
                             f"{parts[-1][-3000:]}")  # fmt: skip
    return outputs


def _mask(text: str) -> str:
    return _NUMBER.sub("<n>", _UUID.sub("<id>", text))


def normalised(answer: str) -> str:
    """A JSON answer re-printed with ", " / ": " separators (key order kept); other text as printed, stripped."""
    stripped = answer.strip()
    try:
        return json.dumps(json.loads(stripped), ensure_ascii=False)
    except ValueError:
        return " ".join(line.strip() for line in stripped.splitlines())


def shape_matches(expected: str, answer: str) -> bool:
    """Whether ``answer`` has the shape the comment ``expected`` shows (module docstring)."""
    pattern = _mask(_ELIDED_UUID.sub("<id>", expected))
    regex = ".*?".join(re.escape(piece) for piece in pattern.split("…"))
    return re.fullmatch(regex, _mask(normalised(answer)), re.S) is not None


def repository_files(repo: Path) -> list[Path]:
    """The files a clone of ``repo`` would have, with the work not yet committed: those git tracks or would track
    (``git ls-files --cached --others --exclude-standard``) that exist in the working tree, relative to ``repo``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            check=True, capture_output=True).stdout.decode()  # fmt: skip
    return [Path(name) for name in listed.split("\0") if name and (repo / name).is_file()]


def venv_is_current(repo: Path) -> bool:
    """Whether ``repo``'s .venv holds an install of its pyproject.toml, by the stamp scripts/setup-venv.sh writes
    (``<sha256 of pyproject.toml and the venv's Python version> <extras>``): then that script skips pip."""
    stamp = repo / ".venv" / ".privfit-install"
    python = repo / ".venv" / "bin" / "python"
    if not (stamp.is_file() and python.exists()):
        return False
    version = subprocess.run([str(python), "--version"], check=True, capture_output=True).stdout
    fingerprint = hashlib.sha256((repo / "pyproject.toml").read_bytes() + version).hexdigest()
    return stamp.read_text().split(" ", 1)[0].strip() == fingerprint


def fresh_clone(repo: Path, parent: Path) -> Path:
    """A copy of ``repo``'s files (:func:`repository_files`) at ``parent/<repo's name>``, with nothing else in
    ``parent`` (so no ``../shared``), and ``repo``'s .venv linked in: installing it afresh would take minutes.

    The link is safe only while scripts/setup-venv.sh skips pip (:func:`venv_is_current`; callers check it):
    otherwise it would re-install the editable package into the shared .venv from the copy. The .venv's editable
    install points at ``repo/service``; run the copy's own code by putting ``<clone>/service`` first on PYTHONPATH
    (:func:`clone_environment`)."""
    clone = parent / repo.name
    for name in repository_files(repo):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / name, clone / name, follow_symlinks=False)
    (clone / ".venv").symlink_to(repo / ".venv", target_is_directory=True)
    assert sorted(entry.name for entry in parent.iterdir()) == [clone.name], "the clone must be alone in its folder"
    return clone


def clone_environment(clone: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``clone``'s package first on PYTHONPATH: the linked .venv then imports privfit from the clone
    (its own code, migrations and static files), as a clone's own editable install would."""
    return {**env, "PYTHONPATH": str(clone / "service")}

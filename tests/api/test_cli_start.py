"""Issue 36: a fast ``privfit`` command, and a readable ``--help``.

``privfit --help`` and the client commands import only what they use (``privfit.cli``'s docstring): checked here
by the modules a fresh interpreter holds after running them (``sys.modules``), never by timing —
``benchmarks/cli_start.py`` measures the CPU time. And every argument of every command has help text and a metavar
a person can read (the top-level options once showed ``GLOBAL_URL``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

import pytest

from privfit.cli import build_parser

#: What no --help and no client command may import: the service's numerical and server stack.
HEAVY = ("numpy", "scipy", "numba", "sqlalchemy", "fastapi", "starlette", "pydantic", "pydantic_settings", "pandas",
         "pyarrow", "alembic", "celery")  # fmt: skip

#: A subprocess that runs ``privfit.cli.main(argv)`` (a SystemExit is the end of --help), optionally against a
#: stdlib HTTP server answering ``GET /v1/me``, then prints the top-level packages it imported.
PROBE = textwrap.dedent(
    """
    import json, sys, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Me(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"key_id": "k", "role": "analyst", "name": "probe"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    argv = json.loads(sys.argv[1])
    if "{url}" in argv:
        server = ThreadingHTTPServer(("127.0.0.1", 0), Me)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        argv = [f"http://127.0.0.1:{server.server_port}" if a == "{url}" else a for a in argv]
    from privfit.cli import main
    try:
        code = main(argv)
    except SystemExit as exit:
        code = exit.code
    print(json.dumps({"code": code, "modules": sorted({name.split(".")[0] for name in sys.modules})}))
    """
)


def imported_by(*argv: str) -> tuple[int, set[str], str]:
    """(exit status, top-level packages imported, stdout before the report) of ``privfit argv`` in a fresh
    interpreter."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    *printed, report = done.stdout.strip().splitlines()
    result = json.loads(report)
    return result["code"], set(result["modules"]), "\n".join(printed)


@pytest.mark.parametrize("argv", [("--help",), ("solvers", "--help"), ("fits", "cancel", "--help"), ("keys", "-h")])
def test_help_imports_neither_the_service_nor_the_http_client(argv: tuple[str, ...]):
    code, modules, printed = imported_by(*argv)
    assert code == 0 and "usage: privfit" in printed
    assert not modules & {*HEAVY, "httpx", "rich"}, sorted(modules & {*HEAVY, "httpx", "rich"})


def test_a_client_command_imports_httpx_and_rich_but_not_the_service():
    code, modules, printed = imported_by("whoami", "--url", "{url}", "--api-key", "pf_probe")
    assert code == 0 and "probe" in printed and "analyst" in printed
    assert {"httpx", "rich"} <= modules
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_importing_the_client_package_leaves_httpx_until_the_client_is_used():
    """``privfit.client``'s errors and models are plain classes; ``Client`` (httpx) loads on first access."""
    probe = ("import sys, privfit.client as c; before = 'httpx' in sys.modules; c.Client; "
             "print(before, 'httpx' in sys.modules, c.UnknownDatasetNameError.__mro__[1].__name__)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "True", "NotFoundError"], done.stderr


def _parsers(parser: argparse.ArgumentParser, path: str = "privfit") -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _parsers(child, f"{path} {name}")
    return found


def test_every_argument_has_help_and_a_readable_metavar():
    parsers = _parsers(build_parser())
    assert len(parsers) > 25  # the server's and the client's commands, with their subcommands
    for path, parser in parsers:
        if path == "privfit schema":  # hands its arguments to its own parser (privfit.client.schema_cli)
            continue
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help, (path, action.option_strings or action.dest)
        assert "GLOBAL_" not in parser.format_help(), path
    top = build_parser().format_help()
    assert "--url URL" in top and "--api-key KEY" in top and "--request-timeout SECONDS" in top, top


def test_datasets_are_named_by_id_or_name_in_every_commands_help():
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if action.dest == "dataset":
                assert action.metavar == "DATASET" and "or its name" in str(action.help), path
            if action.dest == "fit":
                assert action.metavar == "FIT_ID", path

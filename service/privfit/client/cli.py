"""The ``privfit`` command's client commands, built on :class:`privfit.client.Client`.

``privfit datasets upload|list|show|delete|grant|grants|revoke|allocate|allocations|unallocate``, ``privfit fit``,
``privfit estimate``, ``privfit fits list|show|wait|cancel|evaluate|evaluations``, ``privfit predict``, ``privfit
budget``, ``privfit ledger``, ``privfit solvers``, ``privfit whoami``, ``privfit keys list|revoke`` (admins; ``privfit
keys create`` works on the server's database directly). The server and key come from ``--url`` / ``--api-key`` or
``PRIVFIT_URL`` / ``PRIVFIT_API_KEY``. Output is a readable table, or the API's JSON with ``--json``; ``-q`` prints
only the id of what was created. Errors go to stderr as ``error: <status> <title>: <detail>`` (with ``--json`` the
problem document also goes to stdout) and the exit status says what happened (:data:`EXIT_CODES`).

Everything the server sends (dataset and key names, error details, statuses, …) is shown as plain text, never
as rich markup: ``[bold]`` or ``[link=…]`` in a dataset's name is printed as written, and control characters
(terminal escape sequences) are shown escaped (:func:`safe_text`).

Wherever a command takes a dataset, its name does as well as its id when exactly one of the datasets this key
may see has it (:meth:`Client.resolve_dataset <privfit.client._client.Client.resolve_dataset>`): ``privfit budget
loans``. No such name is exit 5, a name several datasets share is exit 2, each listing what to pass instead.

Start-up: ``privfit --help`` builds this module's parsers only, so the module imports the standard library alone;
the client (httpx) is imported when a command runs and rich when it prints (``privfit.cli``'s docstring).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import sys
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import errors
from .models import Allocation, AllocationEstimate, ApiObject, Evaluation, Fit, LedgerEntry, Outlook

if TYPE_CHECKING:
    from rich.text import Text

    from ._client import Client

DEFAULT_URL = "http://127.0.0.1:8000"

EXIT_OK = 0
EXIT_ERROR = 1  # anything unexpected
EXIT_USAGE = 2  # bad command line or unreadable local file (argparse's own code)
EXIT_UNAVAILABLE = 3  # the server could not be reached, or answered 5xx
EXIT_AUTH = 4  # 401 / 403
EXIT_NOT_FOUND = 5  # 404
EXIT_CONFLICT = 6  # 409: over budget, fit not finished, Idempotency-Key reused
EXIT_INVALID = 7  # 400 / 413 / 422: a bad field, parameter, schema or CSV
EXIT_FIT_FAILED = 8  # --wait: the fit ended failed or cancelled
EXIT_TIMEOUT = 9  # --wait: the fit did not finish in --timeout seconds
EXIT_LEDGER_TAMPERED = 10  # privfit ledger verify: the export's hash chain does not hold

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_ERROR: "unexpected error",
    EXIT_USAGE: "bad command line or unreadable local file, or a dataset name several datasets share",
    EXIT_UNAVAILABLE: "server unreachable or failing (5xx)",
    EXIT_AUTH: "missing, invalid or insufficient API key (401, 403)",
    EXIT_NOT_FOUND: "no such dataset (id or name), fit, key, grant or allocation, or not visible to this key (404)",
    EXIT_CONFLICT: "refused by the server's state, e.g. privacy budget exceeded (409)",
    EXIT_INVALID: "invalid request: field, parameter, schema or CSV (400, 413, 422)",
    EXIT_FIT_FAILED: "the fit ended failed or cancelled (--wait)",
    EXIT_TIMEOUT: "the fit did not finish within --timeout (--wait)",
    EXIT_LEDGER_TAMPERED: "ledger verify: the export's hash chain does not hold (an entry edited, removed or moved)",
}


class UsageError(Exception):
    """A local mistake (unreadable file, malformed --param): exit status 2."""


def exit_code_for(error: BaseException) -> int:
    """The documented exit status of an error."""
    if isinstance(error, errors.AuthenticationError | errors.PermissionDeniedError):
        return EXIT_AUTH
    if isinstance(error, errors.NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(error, errors.ConflictError):
        return EXIT_CONFLICT
    if isinstance(error, errors.BadRequestError | errors.PayloadTooLargeError | errors.InvalidRequestError):
        return EXIT_INVALID
    if isinstance(error, errors.TransportError | errors.ServerError | errors.RateLimitedError):
        return EXIT_UNAVAILABLE
    if isinstance(error, errors.FitFailedError):
        return EXIT_FIT_FAILED
    if isinstance(error, errors.WaitTimeoutError):
        return EXIT_TIMEOUT
    if isinstance(error, UsageError | OSError):  # OSError: a local file (httpx's errors are TransportError)
        return EXIT_USAGE
    if isinstance(error, LookupError) and isinstance(error, errors.PrivfitError):  # an ambiguous dataset name
        return EXIT_USAGE
    return EXIT_ERROR


# --- output ---------------------------------------------------------------------------------------
class Output:
    """Where results go: JSON documents, or rich tables on stdout; messages and progress on stderr."""

    def __init__(self, as_json: bool, quiet: bool) -> None:
        from rich.console import Console  # here, not at import: `privfit --help` never prints a table

        self.as_json, self.quiet = as_json, quiet
        self.out = Console(highlight=False)
        if not self.out.is_terminal:  # a pipe or file: wide enough that ids and timestamps stay on one line
            self.out = Console(highlight=False, width=200)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    def json(self, document: Any) -> None:
        print(json.dumps(_plain(document), indent=2, default=str))

    def table(self, title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """A table; the title and every cell are plain text (they hold server-supplied strings)."""
        from rich.table import Table

        table = Table(title=safe_text(title) if title else None, title_justify="left", header_style="bold")
        for column in columns:
            table.add_column(safe_text(column), overflow="fold")
        for row in rows:
            table.add_row(*(safe_text(_cell(value)) for value in row))
        self.out.print(table)

    def fields(self, title: str, pairs: Sequence[tuple[str, Any]]) -> None:
        self.table(title, ("field", "value"), pairs)

    def message(self, text: str) -> None:
        self.err.print(safe_text(text, keep_newlines=True))


def safe_text(value: str, *, keep_newlines: bool = False) -> Text:
    """``value`` as a rich :class:`Text`: never read as markup (``[bold]``, ``[link=…]``) nor emoji codes, and with
    every control character (terminal escape sequences included) shown escaped, e.g. ``\\x1b``."""
    from rich.text import Text

    return Text("".join(_visible(char, keep_newlines) for char in value))


def _visible(char: str, keep_newlines: bool) -> str:
    if char == "\n" and keep_newlines:
        return char
    if unicodedata.category(char) in ("Cc", "Cs"):
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return char


def _plain(document: Any) -> Any:
    """The API's JSON of typed answers (``raw``), lists of them, or plain values."""
    if isinstance(document, ApiObject):
        return document.raw
    if isinstance(document, list):
        return [_plain(item) for item in document]
    return document


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return "∞" if math.isinf(value) else f"{value:.8g}"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


# --- commands -------------------------------------------------------------------------------------
def _datasets_upload(client: Client, args: argparse.Namespace, out: Output) -> int:
    data = _readable(args.csv)
    schema = _readable(args.schema)
    dataset = client.upload_dataset(data, schema, name=args.name, allow_duplicate=args.allow_duplicate,
                                    privacy_domain=args.privacy_domain)  # fmt: skip
    return _show(out, dataset, lambda: _dataset_fields(out, dataset))


def _unit_text(unit: dict[str, Any] | None) -> str | None:
    """A user-level dataset's privacy unit as shown: the column, the bound, and (in an upload's answer) the rows
    dropped."""
    if not unit:
        return None
    dropped = unit.get("rows_dropped")
    text = f"{unit['column']}, at most {unit['max_rows']} rows each"
    return text if dropped is None else f"{text} ({dropped} rows dropped at upload)"


def _dataset_fields(out: Output, dataset: Any) -> None:
    out.fields(f"dataset {dataset.name}", [
        ("id", dataset.id), ("name", dataset.name),
        ("privacy units (n)" if dataset.privacy_unit else "rows (n)", dataset.n),
        ("privacy unit", _unit_text(dataset.privacy_unit)),
        ("private validation rows", dataset.n_validation or None), ("encoded columns (d)", dataset.d),
        ("row norm bound", dataset.row_norm_bound), ("label bound", dataset.label_bound),
        ("budget", _budget_text(dataset.schema.get("budget", {}))),
        ("private preprocessing", _preprocessing_text(dataset.preprocessing)), ("created", dataset.created_at),
    ])  # fmt: skip
    if dataset.preprocessing:
        out.table("encodings derived by private preprocessing", ("column", "role", "derived encoding"), [
            (column["name"], column["role"], _derived_text(column["derived"]))
            for column in dataset.preprocessing.get("columns", [])
        ])  # fmt: skip


def _preprocessing_text(preprocessing: dict[str, Any] | None) -> str:
    if not preprocessing:
        return "none"
    return (f"{preprocessing['share']:.3g} of the budget (committed ε = {preprocessing['committed_epsilon']:.4g}; "
            f"its own ε = {preprocessing['epsilon']:.4g})")  # fmt: skip


def _derived_text(derived: dict[str, Any] | None) -> str:
    if derived is None:
        return "declared (kept)"
    if "clip" in derived:
        a, b = derived["clip"]
        return f"clip to [{a:.6g}, {b:.6g}]" + (", then log1p" if derived.get("log") else "")
    return f"bounds [{derived['lower']:.6g}, {derived['upper']:.6g}]"


def _budget_text(budget: dict[str, Any]) -> str:
    return f"ε = {budget.get('epsilon')}, δ = {budget.get('delta')}" if budget else "—"


def _datasets_list(client: Client, args: argparse.Namespace, out: Output) -> int:
    datasets = client.datasets()
    if out.as_json:
        out.json(datasets)
    else:
        rows = [(d.id, d.name, d.n, d.d, _budget_text(d.schema.get("budget", {})), d.created_at) for d in datasets]
        out.table("datasets", ("id", "name", "n", "d", "budget", "created"), rows)
    return EXIT_OK


def _datasets_show(client: Client, args: argparse.Namespace, out: Output) -> int:
    dataset = client.dataset(args.dataset)
    return _show(out, dataset, lambda: _dataset_fields(out, dataset))


def _datasets_delete(client: Client, args: argparse.Namespace, out: Output) -> int:
    dataset_id = client.resolve_dataset(args.dataset)  # a name: the message and the JSON say which id was deleted
    client.delete_dataset(dataset_id)
    if out.as_json:
        out.json({"id": dataset_id, "deleted": True})
    else:
        out.message(f"dataset {dataset_id} deleted (its rows are purged; its ledger is kept)")
    return EXIT_OK


def _datasets_grant(client: Client, args: argparse.Namespace, out: Output) -> int:
    dataset_id = client.resolve_dataset(args.dataset)
    client.grant(dataset_id, args.key_id)
    if out.as_json:
        out.json({"dataset_id": dataset_id, "api_key_id": args.key_id})
    else:
        out.message(f"key {args.key_id} may now fit dataset {dataset_id}")
    return EXIT_OK


def _datasets_grants(client: Client, args: argparse.Namespace, out: Output) -> int:
    grants = client.grants(args.dataset)
    if out.as_json:
        out.json(grants)
    else:
        rows = [(g.api_key_name, g.api_key_id, g.created_at, "revoked" if g.key_revoked else "valid") for g in grants]
        out.table(f"grants of {args.dataset}", ("analyst key", "key id", "granted", "key"), rows)
    return EXIT_OK


def _datasets_revoke(client: Client, args: argparse.Namespace, out: Output) -> int:
    dataset_id = client.resolve_dataset(args.dataset)
    client.revoke_grant(dataset_id, args.key_id)
    if out.as_json:
        out.json({"dataset_id": dataset_id, "api_key_id": args.key_id, "revoked": True})
    else:
        out.message(f"key {args.key_id} may no longer see or fit dataset {dataset_id} (its queued fits on it are "
                    "cancelled)")  # fmt: skip
    return EXIT_OK


#: The columns of an allocations table (``privfit datasets allocations``, ``allocate``): see :func:`_allocation_row`.
_ALLOCATION_COLUMNS = ("analyst key", "key id", "ε", "δ", "committed ε (its filter)", "remaining ε", "closed")


def _allocation_row(allocation: Allocation) -> tuple[Any, ...]:
    """An allocation as a row of :data:`_ALLOCATION_COLUMNS`."""
    return (allocation.api_key_name, allocation.api_key_id, allocation.epsilon_max, allocation.delta_max,
            allocation.committed_epsilon, allocation.remaining_epsilon, allocation.closed_reason)  # fmt: skip


def _allocation_text(allocation: Allocation) -> str:
    """An allocation in one line: its share and what its analyst has committed and has left of it."""
    return (f"ε = {_cell(allocation.epsilon_max)}, δ = {_cell(allocation.delta_max)}: committed ε = "
            f"{_cell(allocation.committed_epsilon)}, remaining ε = {_cell(allocation.remaining_epsilon)}")  # fmt: skip


def _datasets_allocate(client: Client, args: argparse.Namespace, out: Output) -> int:
    dataset_id = client.resolve_dataset(args.dataset)
    allocation = client.allocate(dataset_id, args.key_id, args.epsilon, args.delta)
    if out.as_json:
        out.json(allocation)
        return EXIT_OK
    if not out.quiet:
        out.table(f"allocation of {args.dataset}", _ALLOCATION_COLUMNS, [_allocation_row(allocation)])
    share = f"ε = {_cell(allocation.epsilon_max)}, δ = {_cell(allocation.delta_max)}"
    out.message(f"key {args.key_id} may now use {share} of dataset {dataset_id}'s budget (fixed once set: `privfit "
                "datasets unallocate` to change it)")  # fmt: skip
    if allocation.closed_reason:
        out.message(f"closed: {allocation.closed_reason}")
    return EXIT_OK


def _datasets_allocations(client: Client, args: argparse.Namespace, out: Output) -> int:
    allocations = client.allocations(args.dataset)
    if out.as_json:
        out.json(allocations)
    else:
        out.table(f"allocations of {args.dataset}", _ALLOCATION_COLUMNS, [_allocation_row(a) for a in allocations])
    return EXIT_OK


def _datasets_unallocate(client: Client, args: argparse.Namespace, out: Output) -> int:
    dataset_id = client.resolve_dataset(args.dataset)
    client.remove_allocation(dataset_id, args.key_id)
    if out.as_json:
        out.json({"dataset_id": dataset_id, "api_key_id": args.key_id, "removed": True})
    else:
        out.message(f"key {args.key_id} has no allocation on dataset {dataset_id} any more: it spends from the "
                    "dataset's budget alone (its fits stay in the ledger)")  # fmt: skip
    return EXIT_OK


def _keys_list(client: Client, args: argparse.Namespace, out: Output) -> int:
    keys = client.keys()
    if out.as_json:
        out.json(keys)
    else:
        rows = [(k.key_id, k.prefix, k.role, k.name, k.created_at, k.revoked_at) for k in keys]
        out.table("API keys", ("id", "prefix", "role", "name", "created", "revoked"), rows)
    return EXIT_OK


def _keys_revoke(client: Client, args: argparse.Namespace, out: Output) -> int:
    client.revoke_key(args.key_id)
    if out.as_json:
        out.json({"key_id": args.key_id, "revoked": True})
    else:
        out.message(f"key {args.key_id} revoked: it is refused from its next request on (its queued fits are "
                    "cancelled)")  # fmt: skip
    return EXIT_OK


def _fit_arguments(args: argparse.Namespace) -> dict[str, Any]:
    params = dict(_params_json(args.params)) if args.params else {}
    for item in args.param or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--param {item!r}: expected NAME=VALUE")
        params[name] = _param_value(value)
    return {"model": args.model, "solver": args.solver, "epsilon": args.epsilon, "params": params}


def _params_json(text: str) -> dict[str, Any]:
    source = Path(text[1:]).read_text() if text.startswith("@") else text
    try:
        params = json.loads(source)
    except json.JSONDecodeError as error:
        raise UsageError(f"--params is not valid JSON: {error}") from None
    if not isinstance(params, dict):
        raise UsageError("--params must be a JSON object")
    return params


def _param_value(text: str) -> Any:
    """A --param value: JSON when it parses (numbers, true/false, lists), else the string itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _report_outlook(out: Output, outlook: Outlook | None) -> None:
    """The fit's noise outlook on stderr: its line (level, ratio; not with ``-q``) and its warning, if any (always:
    a warning is not a result, and stdout stays the table, the JSON or the id)."""
    if outlook is None:
        return
    if not out.quiet:
        out.message(f"noise outlook: {outlook.describe()}")
    if outlook.warning:
        out.message(f"warning: {outlook.warning}")


def _estimate(client: Client, args: argparse.Namespace, out: Output) -> int:
    estimate = client.estimate(args.dataset, **_fit_arguments(args))
    _report_outlook(out, estimate.outlook)
    if out.as_json:
        out.json(estimate)
        return EXIT_OK
    cost = estimate.cost
    out.fields(f"estimate: {args.solver}/{args.model} on {args.dataset}", [
        ("fit ε", cost.epsilon if cost else estimate.epsilon), ("δ", cost.delta if cost else None),
        ("optimal order α", estimate.optimal_order),
        ("committed ε before (filter)", estimate.committed_epsilon_before),
        ("committed ε after (filter)", estimate.committed_epsilon_after),
        ("remaining ε after (filter)", estimate.remaining_epsilon_after), ("budget ε", estimate.epsilon_max),
        *_allocation_estimate_rows(estimate.allocation),
        ("admissible", "yes" if estimate.admissible else f"no: {_REFUSALS.get(estimate.refusal_reason or '', '')}"),
        ("largest admissible ε now", _largest(estimate.max_admissible_epsilon)),
    ])  # fmt: skip
    if estimate.measure and not out.quiet:
        out.message(f"(fit ε: this fit alone at δ; committed/remaining: {estimate.measure})")
    return EXIT_OK


def _allocation_estimate_rows(allocation: AllocationEstimate | None) -> list[tuple[str, Any]]:
    """The estimate's rows about the caller's allocation (none when it has none): its filter's committed ε before
    and after the fit, of the allocation's ε, and what would remain of it."""
    if allocation is None:
        return []
    return [
        ("your allocation: committed ε before → after", f"{_cell(allocation.committed_epsilon_before)} → "
         f"{_cell(allocation.committed_epsilon_after)} of ε = {_cell(allocation.epsilon_max)}"),
        ("your allocation: remaining ε after", allocation.remaining_epsilon_after),
    ]  # fmt: skip


def _largest(epsilon: float | None) -> str | float | None:
    """The largest admissible target ε as the CLI shows it: "none" for 0 (nothing is admissible now)."""
    return "none (nothing is admissible now)" if epsilon == 0.0 else epsilon


_REFUSALS = {
    "epsilon": "the dataset's privacy filter would exceed its ε budget",
    "delta": "its δ part would overflow the dataset's pot for δ parts (approximate_delta)",
    "closed": "the dataset admits no more fits (see its budget)",
    "allocation": "your allocation's privacy filter would exceed its ε (your share of the dataset's budget)",
}


def _fit(client: Client, args: argparse.Namespace, out: Output) -> int:
    fit = client.fit(args.dataset, idempotency_key=args.idempotency_key, **_fit_arguments(args))
    _report_outlook(out, fit.outlook)
    if not args.wait:
        return _show(out, fit, lambda: _fit_fields(out, fit))
    if not out.quiet and not out.as_json:
        cost = f"ε = {fit.cost.epsilon:.6g} reserved" if fit.cost is not None else "its cost reserved"
        out.message(f"fit {fit.id} admitted: {cost}; waiting …")
    return _wait_and_show(client, fit, args, out)


def _wait_and_show(client: Client, fit: Fit, args: argparse.Namespace, out: Output) -> int:
    with ProgressReporter(out) as report:
        final = client.wait(fit, timeout=args.timeout, on_progress=report, raise_on_failure=False)
    code = EXIT_OK if final.status == "succeeded" else EXIT_FIT_FAILED
    if code != EXIT_OK:
        out.message(f"error: {errors.FitFailedError(final)}")
    _show(out, final, lambda: _fit_fields(out, final))
    return code


class ProgressReporter:
    """A progress bar on stderr (a terminal), or one line per status change / 10 % step (a pipe or file)."""

    def __init__(self, out: Output) -> None:
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

        self.out = out
        self.live = out.err.is_terminal and not out.quiet
        self.progress = Progress(TextColumn("{task.description}", style="bold", markup=False), BarColumn(),
                                 TaskProgressColumn(), TimeElapsedColumn(), console=out.err)  # fmt: skip
        self.task = self.progress.add_task("queued", total=1.0)
        self.last: tuple[str, int] | None = None

    def __enter__(self) -> Callable[[Fit], None]:
        if self.live:
            self.progress.start()
        return self.report

    def __exit__(self, *_: object) -> None:
        if self.live:
            self.progress.stop()

    def report(self, fit: Fit) -> None:
        if self.live:
            self.progress.update(self.task, completed=fit.progress, description=fit.status)
            return
        step = (fit.status, int(fit.progress * 10))
        if not self.out.quiet and step != self.last:
            self.out.message(f"{fit.status} {fit.progress:.0%}")
        self.last = step


def _fit_fields(out: Output, fit: Fit) -> None:
    cost = fit.cost
    pairs: list[tuple[str, Any]] = [
        ("id", fit.id), ("dataset", fit.dataset_id), ("solver / model", f"{fit.solver} / {fit.model}"),
        ("status", fit.status), ("progress", f"{fit.progress:.0%}"),
        ("privacy cost", f"ε = {cost.epsilon:.6g} at δ = {cost.delta:g} (order α = {cost.optimal_order})"
         if cost else None),
        ("created", fit.created_at), ("finished", fit.finished_at),
    ]  # fmt: skip
    if fit.outlook is not None:
        pairs.append(("noise outlook", fit.outlook.describe()))
        if fit.outlook.warning:
            pairs.append(("warning", fit.outlook.warning))
    if fit.error:
        pairs.append(("error", fit.error.get("detail")))
    if fit.result is not None and fit.result.selected is not None:
        pairs.append(("selected candidate", fit.result.selected.get("solver")))
    out.fields(f"fit {fit.id}", pairs)
    if fit.result is not None and fit.result.multiclass:
        classes = fit.result.classes or []
        matrix = fit.result.coefficient_matrix()
        out.table("coefficients (one column per class)", ("feature", *classes),
                  [(name, *(row[c] for c in classes)) for name, row in matrix.items()])  # fmt: skip
    elif fit.result is not None:
        rows: list[tuple[str, Any]] = list(fit.result.coefficient_table().items())
        if fit.result.intercept is not None:
            rows.append(("(intercept)", fit.result.intercept))
        out.table("coefficients", ("feature", "coefficient"), rows)


def _fits_list(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Every fit (all pages), or one page with ``--limit``/``--cursor``: the next page's cursor then goes to stderr."""
    filters = {"status": args.status, "solver": args.solver}
    following = None
    if args.limit is None and args.cursor is None:
        fits = client.fits(args.dataset, **filters)
    else:
        page = client.fits_page(args.dataset, limit=args.limit, cursor=args.cursor, **filters)
        fits, following = page.items, page.cursor
    if out.as_json:
        out.json(fits)
    else:
        whose = args.dataset is None  # every dataset's fits: a column says whose
        columns = ("id", *(("dataset",) if whose else ()), "solver", "model", "status", "progress", "ε", "created")
        rows = [(f.id, *((f.dataset_id,) if whose else ()), f.solver, f.model, f.status, f"{f.progress:.0%}",
                 f.cost.epsilon if f.cost else None, f.created_at) for f in fits]  # fmt: skip
        out.table("fits" if whose else f"fits of {args.dataset}", columns, rows)
    if following is not None:
        out.message(f"more fits follow: the next page with --cursor {following}")
    return EXIT_OK


def _fits_show(client: Client, args: argparse.Namespace, out: Output) -> int:
    fit = client.get_fit(args.fit)
    return _show(out, fit, lambda: _fit_fields(out, fit))


def _fits_wait(client: Client, args: argparse.Namespace, out: Output) -> int:
    return _wait_and_show(client, client.get_fit(args.fit), args, out)


def _fits_cancel(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Cancel, then show the fit as the cancel left it, fetched again. A queued fit is cancelled at once; a running
    one stops at its next step, so the command waits up to ``--timeout`` seconds (default 10) for it to end: the
    answer of the cancel request itself still says ``running`` (with ``cancel_requested``), the state before the
    cancel took effect. Past the timeout it shows the state fetched then and says how to follow the fit."""
    client.cancel(args.fit)
    try:
        fit = client.wait(args.fit, timeout=args.timeout, raise_on_failure=False)
    except errors.WaitTimeoutError as timed_out:
        fit = timed_out.fit
        out.message(f"cancel requested: fit {fit.id} is still {fit.status} after {args.timeout:g} s and stops at its "
                    f"next step (follow it with `privfit fits wait {fit.id}`)")  # fmt: skip
    else:
        if fit.status != "cancelled":  # it finished its last step before it saw the request: its result stands
            out.message(f"fit {fit.id} {fit.status} before it could stop: nothing was cancelled")
    return _show(out, fit, lambda: _fit_fields(out, fit))


def _evaluation_fields(out: Output, evaluation: Evaluation) -> None:
    cost = evaluation.cost
    pairs: list[tuple[str, Any]] = [
        ("id", evaluation.id), ("fit", evaluation.fit_id), ("status", evaluation.status),
        ("validation rows", evaluation.n_validation),
        ("privacy cost", f"ε = {evaluation.epsilon:g} (pure), ε = {cost.epsilon:.6g} at δ = {cost.delta:g}"
         if cost else None),
        ("created", evaluation.created_at),
    ]  # fmt: skip
    if evaluation.error:
        pairs.append(("error", evaluation.error.get("detail")))
    out.fields(f"evaluation {evaluation.id}", pairs)
    if evaluation.results:
        rows = [(r.metric, r.value, f"[{r.interval[0]:.4g}, {r.interval[1]:.4g}]", f"{r.confidence:.0%}",
                 f"{r.noise} b = {r.scale:.4g}", r.epsilon) for r in evaluation.results]  # fmt: skip
        out.table("metrics (noisy, on the private validation rows)",
                  ("metric", "value", "interval", "level", "noise", "ε"), rows)  # fmt: skip


def _fits_evaluate(client: Client, args: argparse.Namespace, out: Output) -> int:
    metrics = None if args.metrics is None else [m.strip() for m in args.metrics.split(",") if m.strip()]
    evaluation = client.evaluate(args.fit, epsilon=args.epsilon, metrics=metrics, confidence=args.confidence,
                                 idempotency_key=args.idempotency_key)  # fmt: skip
    _show(out, evaluation, lambda: _evaluation_fields(out, evaluation))
    return EXIT_OK if evaluation.status == "succeeded" else EXIT_FIT_FAILED


def _fits_evaluations(client: Client, args: argparse.Namespace, out: Output) -> int:
    evaluations = client.evaluations(args.fit)
    if out.as_json:
        out.json(evaluations)
    else:
        rows = [(e.id, e.status, e.epsilon, ", ".join(f"{r.metric} {r.value:.4g}" for r in e.results), e.created_at)
                for e in evaluations]  # fmt: skip
        out.table(f"evaluations of fit {args.fit}", ("id", "status", "ε", "metrics", "created"), rows)
    return EXIT_OK


#: The formats of ``privfit fits export``: ``joblib``, the fit as a fitted scikit-learn Pipeline
#: (:mod:`privfit.client.sklearn_export`), written with ``joblib.dump``; ``onnx``, the ONNX model the server builds
#: (``GET /v1/fits/{id}/model.onnx``, :meth:`Client.export_onnx <privfit.client._client.Client.export_onnx>`).
EXPORT_FORMATS = ("joblib", "onnx")


def _fits_export(client: Client, args: argparse.Namespace, out: Output) -> int:
    """``privfit fits export FIT --format joblib [--output PATH]``: the succeeded fit as a fitted scikit-learn
    ``Pipeline`` (its dataset's encoding, then the released model; :meth:`Client.to_sklearn
    <privfit.client._client.Client.to_sklearn>`), written with ``joblib.dump`` to PATH (default ``fit-<id>.joblib``;
    ``-`` for stdout), under a ``.partial`` name until it is whole. Without scikit-learn: exit 1, saying what to
    install. ``--format onnx``: the server's ONNX model (:func:`_fits_export_onnx`)."""
    if args.format == "onnx":
        return _fits_export_onnx(client, args, out)
    try:
        import joblib  # type: ignore[import-untyped]  # scikit-learn's dependency: both in the `sklearn` extra

        from . import sklearn_export  # noqa: F401  (imports scikit-learn, or says what to install)
    except ImportError as missing:
        raise errors.PrivfitError(f"privfit fits export --format {args.format} needs scikit-learn, pandas and joblib: "
                                  f"pip install 'privfit[sklearn]' ({missing})") from None  # fmt: skip
    pipeline = client.to_sklearn(args.fit)
    if args.output == "-":
        joblib.dump(pipeline, sys.stdout.buffer)
        sys.stdout.flush()
        return EXIT_OK
    target = Path(args.output or f"fit-{args.fit}.joblib")
    partial = target.with_name(target.name + ".partial")
    try:
        with partial.open("wb") as file:
            joblib.dump(pipeline, file)
        partial.replace(target)  # a file named as asked only once the whole model is in it
    finally:
        partial.unlink(missing_ok=True)
    size = target.stat().st_size
    if out.as_json:
        out.json({"fit_id": args.fit, "format": args.format, "output": str(target), "bytes": size})
    elif out.quiet:
        print(target)
    else:
        kind = type(pipeline[-1]).__name__
        out.message(f"wrote {target} ({size} bytes): a scikit-learn Pipeline (encoding, then {kind}) of fit "
                    f"{args.fit}; load it with joblib.load({str(target)!r})")  # fmt: skip
    return EXIT_OK


def _fits_export_onnx(client: Client, args: argparse.Namespace, out: Output) -> int:
    """``privfit fits export FIT --format onnx [--output PATH]``: the fit's ONNX model as the server builds it
    (:meth:`Client.export_onnx <privfit.client._client.Client.export_onnx>`), written to PATH (default
    ``fit-<id>.onnx``; ``-`` for stdout) under a ``.partial`` name until it is whole. Needs nothing beyond the client;
    running the model needs onnxruntime (the ``onnx`` extra)."""
    if args.output == "-":
        client.export_onnx(args.fit, sys.stdout.buffer)
        sys.stdout.flush()
        return EXIT_OK
    target = Path(args.output or f"fit-{args.fit}.onnx")
    size = client.export_onnx(args.fit, target)
    if out.as_json:
        out.json({"fit_id": args.fit, "format": args.format, "output": str(target), "bytes": size})
    elif out.quiet:
        print(target)
    else:
        out.message(f"wrote {target} ({size} bytes): an ONNX model (encoding, then the released model) of fit "
                    f"{args.fit}; run it with onnxruntime.InferenceSession({str(target)!r})")  # fmt: skip
    return EXIT_OK


def _predict(client: Client, args: argparse.Namespace, out: Output) -> int:
    prediction = client.predict(args.fit, _read_rows(args.rows), unknown_category=args.unknown_category)
    if out.as_json:
        out.json(prediction)
    elif prediction.probabilities is not None and len(prediction.classes or []) > 2:
        classes = prediction.classes or []
        rows = zip(prediction.predictions, prediction.probabilities, strict=True)
        out.table(f"predictions of fit {args.fit} (class probabilities)", ("row", "prediction", *classes),
                  [(i, label, *(f"{p:.4f}" for p in probs)) for i, (label, probs) in enumerate(rows)])  # fmt: skip
    elif prediction.probabilities is not None:  # a binary logistic fit: the positive class's probability
        positive = (prediction.classes or ["", "positive"])[1]
        scored = zip(prediction.scores, prediction.predictions, prediction.probabilities, strict=True)
        out.table(f"predictions of fit {args.fit}", ("row", "score", "prediction", f"P({positive})"),
                  [(i, score, label, f"{probs[1]:.4f}") for i, (score, label, probs) in enumerate(scored)])  # fmt: skip
    else:
        pairs = zip(prediction.scores, prediction.predictions, strict=True)
        out.table(f"predictions of fit {args.fit}", ("row", "score", "prediction"),
                  [(i, score, label) for i, (score, label) in enumerate(pairs)])  # fmt: skip
    return EXIT_OK


def _read_rows(source: str) -> list[dict[str, Any]]:
    """Rows from a JSON file (a list of objects, or ``{"rows": [...]}``) or a CSV file with a header; ``-`` is
    stdin (JSON, or CSV when it does not start with ``[`` / ``{``)."""
    text = sys.stdin.read() if source == "-" else _readable(source).read_text()
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise UsageError(f"--rows: invalid JSON: {error}") from None
        rows = document.get("rows") if isinstance(document, dict) else document
        if not isinstance(rows, list):
            raise UsageError('--rows: expected a JSON list of objects or {"rows": [...]}')
        return rows
    return [{k: _csv_value(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


def _csv_value(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _budget(client: Client, args: argparse.Namespace, out: Output) -> int:
    budget = client.budget(args.dataset)
    if out.as_json:
        out.json(budget)
        return EXIT_OK
    rule = budget.filter
    out.fields(f"budget of {args.dataset}", [
        ("ε budget", budget.epsilon_max), ("δ", budget.delta_max), ("charged ε (filter)", budget.charged_epsilon),
        ("reserved ε (queued fits, filter)", budget.reserved_epsilon),
        ("committed ε (filter)", budget.committed_epsilon), ("remaining ε (filter)", budget.remaining_epsilon),
        ("filter orders α", ", ".join(f"{a:g}" for a in rule.get("orders", []))),
        ("δ for δ-only parts", rule.get("approximate_delta")),
        ("  of which for approximate-RDP slacks", rule.get("slack_delta")),
        ("Gaussian-DP certificate", _gdp_certificate(rule)),
        ("δ parts used", budget.committed_delta_used), ("ledger entries", budget.entries),
        ("order grid", budget.grid_name),
        *([("your allocation", _allocation_text(budget.allocation))] if budget.allocation else []),
    ])  # fmt: skip
    if budget.closed_reason:
        out.message(f"closed: {budget.closed_reason}")
    if budget.allocation and budget.allocation.closed_reason:
        out.message(f"your allocation is closed: {budget.allocation.closed_reason}")
    if budget.measure and not out.quiet:
        out.message(f"({budget.measure})")
    return EXIT_OK


def _gdp_certificate(rule: dict[str, Any]) -> str:
    """The filter's Gaussian-DP certificate as ``privfit budget`` shows it: its δ and the largest μ it allows, or
    "none" (a filter created before the certificate, or a server that predates it)."""
    delta = rule.get("gdp_delta") or 0.0
    if not delta:
        return "none"
    return f"δ = {_cell(float(delta))}, μ ≤ {_cell(float(rule.get('gdp_mu') or 0.0))}"


def _ledger(client: Client, args: argparse.Namespace, out: Output) -> int:
    """``privfit ledger DATASET`` (the entries), ``privfit ledger export DATASET`` (JSON lines with the hash chain)
    or ``privfit ledger verify FILE`` (the offline check of an export)."""
    words = args.target
    if len(words) == 2 and words[0] == "export":
        return _ledger_export(client, words[1], args.output, out)
    if len(words) == 2 and words[0] == "verify":
        return _ledger_verify(words[1], args.head, out)
    if len(words) != 1:
        raise UsageError("expected `privfit ledger DATASET`, `privfit ledger export DATASET` or "
                         "`privfit ledger verify FILE`")  # fmt: skip
    dataset = words[0]
    if args.all:
        entries = list(client.iter_ledger(dataset))
    else:
        entries = client.ledger(dataset, limit=args.limit, offset=args.offset).entries
    if out.as_json:
        out.json(entries)
    else:
        rows = [(e.id, e.created_at, e.kind, _ledger_subject(e), e.epsilon, e.committed_epsilon_after,
                 e.description) for e in entries]  # fmt: skip
        out.table(f"ledger of {dataset}", ("#", "time", "kind", "fit", "ε", "committed ε after (filter)", "what"),
                  rows)  # fmt: skip
    return EXIT_OK


def _ledger_export(client: Client, dataset: str, output: str | None, out: Output) -> int:
    """Stream the export to ``output`` (default ``ledger-<dataset id>.jsonl``; ``-`` for stdout)."""
    if output == "-":
        client.export_ledger(dataset, sys.stdout.buffer)
        sys.stdout.flush()
        return EXIT_OK
    target = Path(output or f"ledger-{client.resolve_dataset(dataset)}.jsonl")
    partial = target.with_name(target.name + ".partial")
    try:
        with partial.open("wb") as file:
            written = client.export_ledger(dataset, file)
        partial.replace(target)  # a file named as asked only once the whole export is in it
    finally:
        partial.unlink(missing_ok=True)
    out.message(f"wrote {target} ({written} bytes); check it with `privfit ledger verify {target}`")
    return EXIT_OK


def _ledger_verify(path: str, anchors: list[str] | None, out: Output) -> int:
    """Check an export's hash chain offline (:func:`privfit.ledger.chain.verify`); exit 10 when it fails."""
    from privfit.ledger.chain import ExportFormatError, parse_export, verify

    file = _readable(path)
    try:
        with file.open(encoding="utf-8") as lines:
            header, records = parse_export(lines)
    except (ExportFormatError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: not a ledger export: {error}") from error
    result = verify(header, records, anchors or ())
    bad = result.first_bad
    bad_id = records[bad - 1].get("id") if bad else None
    report = {"ok": result.ok, "dataset_id": header.get("dataset_id"), "entries": result.entries,
              "head": result.head, "first_bad": bad, "first_bad_id": bad_id, "problem": result.problem}  # fmt: skip
    if out.as_json:
        out.json(report)
    elif result.ok:
        print(result.head)
    if result.ok:
        out.message(f"ok: {result.entries} entries of dataset {header['dataset_id']} chain to head {result.head}"
                    + (f" (and through {len(anchors or [])} anchor(s))" if anchors else ""))  # fmt: skip
        return EXIT_OK
    where = f"entry {bad} (ledger id {bad_id})" if bad else "the export as a whole"
    out.message(f"tampered: {where}: {result.problem}; the {result.entries} entries before it chain correctly")
    return EXIT_LEDGER_TAMPERED


def _ledger_subject(entry: LedgerEntry) -> str:
    """What a ledger entry belongs to: a fit's id, an evaluation or the dataset's preprocessing."""
    if entry.job_id:
        return entry.job_id
    return f"evaluation {entry.evaluation_id}" if entry.evaluation_id else "preprocessing"


def first_clause(description: str) -> str:
    """A solver description up to its first ": ", "; " or " — " outside parentheses (the table's summary column):
    "Objective perturbation (Chaudhuri et al. 2011; …): …" keeps its parenthesis whole."""
    depth = 0
    for at, char in enumerate(description):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth <= 0 and any(description.startswith(separator, at) for separator in (": ", "; ", " — ")):
            return description[:at]
    return description


def _solvers(client: Client, args: argparse.Namespace, out: Output) -> int:
    """``privfit solvers``: every solver with its models, whether this server runs it and a summary; then, for those
    it does not run, the server's reason and the setting that enables each (``GET /v1/solvers``)."""
    solvers = client.solvers()
    if out.as_json:
        out.json(solvers)
    else:
        rows = [(s.name, ", ".join(s.models), "yes" if s.available else f"no: needs {s.enabled_by}",
                 first_clause(s.description)) for s in solvers]  # fmt: skip
        out.table("solvers", ("solver", "models", "on this server", "what it is"), rows)
        refused = [(s.name, s.unavailable_reason, s.enabled_by) for s in solvers if not s.available]
        if refused:  # the server refuses a fit naming one of these (422): say why, and what would enable it
            out.table("not available on this server", ("solver", "why", "enabled by"), refused)
    return EXIT_OK


def _whoami(client: Client, args: argparse.Namespace, out: Output) -> int:
    me = client.me()
    return _show(out, me, lambda: out.fields("API key", [("key id", me.key_id), ("role", me.role), ("name", me.name)]))


def _show(out: Output, item: Any, table: Callable[[], None]) -> int:
    """Print a created or fetched object: its id (``-q``), its JSON (``--json``) or its table."""
    if out.quiet:
        print(item.id)
    elif out.as_json:
        out.json(item)
    else:
        table()
    return EXIT_OK


def _readable(path: str) -> Path:
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such file")
    return file


# --- parser ---------------------------------------------------------------------------------------
def _add_connection_options(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--url``, ``--api-key``, ``--json``, ``-q``, ``--request-timeout``: on every client command, and on the
    ``privfit`` command itself (``privfit --url … datasets list``) under ``global_``-prefixed names, so that a
    subcommand's own defaults never overwrite a value given before it (the subcommand's wins when both are)."""
    parser.add_argument("--url", dest=f"{prefix}url", default=None, metavar="URL",
                        help=f"service URL (default: $PRIVFIT_URL or {DEFAULT_URL})")  # fmt: skip
    parser.add_argument("--api-key", dest=f"{prefix}api_key", default=None, metavar="KEY",
                        help="API key, pf_… (default: $PRIVFIT_API_KEY)")  # fmt: skip
    parser.add_argument("--json", dest=f"{prefix}json", action="store_true",
                        help="print the API's JSON instead of tables")  # fmt: skip
    parser.add_argument("-q", "--quiet", dest=f"{prefix}quiet", action="store_true",
                        help="print only the id of what was created")  # fmt: skip
    parser.add_argument("--request-timeout", dest=f"{prefix}request_timeout", type=float, default=None,
                        metavar="SECONDS", help="seconds per HTTP request (default 60)")  # fmt: skip


def add_global_options(parser: argparse.ArgumentParser) -> None:
    """The client options on the ``privfit`` command itself, before the subcommand (they apply to client
    commands; the server's commands read their settings from the environment)."""
    _add_connection_options(parser, prefix="global_")


def _dataset_argument(parser: argparse.ArgumentParser) -> None:
    """The positional DATASET: an id, or a name that exactly one of the key's datasets has."""
    parser.add_argument("dataset", metavar="DATASET",
                        help="the dataset's id, or its name if no other dataset of yours has it (privfit datasets "
                        "list)")  # fmt: skip


def _fit_argument(parser: argparse.ArgumentParser) -> None:
    """The positional FIT_ID."""
    parser.add_argument("fit", metavar="FIT_ID", help="the fit's id (privfit fits list)")


def add_client_commands(commands: argparse._SubParsersAction, keys: argparse._SubParsersAction | None = None) -> None:
    """Register the client commands on the ``privfit`` parser's subcommands (and ``keys list|revoke`` on the
    ``privfit keys`` subcommands, when given)."""
    common = argparse.ArgumentParser(add_help=False)
    _add_connection_options(common)

    def command(
        parent: argparse._SubParsersAction[argparse.ArgumentParser],
        name: str,
        handler: Callable[..., int],
        help_text: str,
    ) -> argparse.ArgumentParser:
        parser = parent.add_parser(name, parents=[common], help=help_text, description=help_text)
        parser.set_defaults(handler=_client_handler(handler), client_command=True)
        return parser

    datasets_help = "upload, list, show, delete and share datasets, and allocate their budgets to analysts"
    datasets = commands.add_parser("datasets", help=datasets_help, description=datasets_help)
    sub = datasets.add_subparsers(dest="datasets_command", required=True)
    upload = command(sub, "upload", _datasets_upload,
                     "upload a CSV or Parquet file with its public schema and budget (owners)")  # fmt: skip
    upload.add_argument("csv", metavar="FILE", help="the CSV file, or a Parquet file (name ending in .parquet)")
    upload.add_argument("--schema", required=True, metavar="FILE",
                        help="the schema JSON file (label, features, missing, budget)")  # fmt: skip
    upload.add_argument("--name", default=None, metavar="NAME",
                        help="a display name, usable instead of the id (default: the file name)")  # fmt: skip
    upload.add_argument(
        "--allow-duplicate",
        action="store_true",
        help="register content you already uploaded as a separate dataset with its own budget",
    )
    upload.add_argument("--privacy-domain", default=None, metavar="DATASET",
                        help="a dataset of yours about the same people (id or name): this one spends its budget "
                        "(one privacy filter and ledger for both; the schema must declare that budget)")  # fmt: skip
    command(sub, "list", _datasets_list, "the datasets this key may see")
    _dataset_argument(command(sub, "show", _datasets_show, "a dataset's public metadata"))
    _dataset_argument(command(sub, "delete", _datasets_delete, "purge a dataset's rows (owners; the ledger is kept)"))
    grant = command(sub, "grant", _datasets_grant, "let an analyst key fit a dataset (owners)")
    _dataset_argument(grant)
    grant.add_argument("key_id", metavar="KEY_ID", help="the analyst key's id (not its secret)")
    _dataset_argument(command(sub, "grants", _datasets_grants, "the analyst keys granted a dataset (owners)"))
    revoke_help = "revoke an analyst key's grant (owners; its queued fits on the dataset are cancelled)"
    revoke = command(sub, "revoke", _datasets_revoke, revoke_help)
    _dataset_argument(revoke)
    revoke.add_argument("key_id", metavar="KEY_ID", help="the analyst key's id")
    allocate_help = "give a granted analyst key a share (ε, δ) of a dataset's budget (owners; fixed once set)"
    allocate = command(sub, "allocate", _datasets_allocate, allocate_help)
    _dataset_argument(allocate)
    allocate.add_argument("key_id", metavar="KEY_ID", help="the analyst key's id (privfit datasets grants)")
    allocate.add_argument("--epsilon", type=float, required=True, metavar="EPSILON",
                          help="the allocation's ε (at most the dataset's budget ε)")  # fmt: skip
    allocate.add_argument("--delta", type=float, required=True, metavar="DELTA",
                          help="the allocation's δ (at most the dataset's budget δ)")  # fmt: skip
    allocations_help = "a dataset's allocations and what each analyst has left (owners: all; analysts: their own)"
    _dataset_argument(command(sub, "allocations", _datasets_allocations, allocations_help))
    unallocate_help = "remove an analyst key's allocation (owners): it then spends from the dataset's budget alone"
    unallocate = command(sub, "unallocate", _datasets_unallocate, unallocate_help)
    _dataset_argument(unallocate)
    unallocate.add_argument("key_id", metavar="KEY_ID", help="the analyst key's id")
    if keys is not None:
        command(keys, "list", _keys_list, "every API key, without secrets (admins)")
        command(keys, "revoke", _keys_revoke, "revoke an API key (admins): refused from its next request on"
                ).add_argument("key_id", metavar="KEY_ID", help="the key's id (privfit keys list)")  # fmt: skip

    for name, handler, help_text in (
        ("fit", _fit, "request a fit (the ledger admits or refuses it); --wait shows progress until it finishes"),
        ("estimate", _estimate, "what a fit would cost and what would remain; nothing is charged"),
    ):
        parser = command(commands, name, handler, help_text)
        _dataset_argument(parser)
        parser.add_argument("--model", default="logistic", metavar="MODEL",
                            help="logistic | linear | huber | svm | … (default logistic)")  # fmt: skip
        parser.add_argument("--solver", default="dp_gd", metavar="SOLVER",
                            help="a solver from `privfit solvers` (default dp_gd)")  # fmt: skip
        parser.add_argument("--epsilon", type=float, default=None, metavar="EPSILON",
                            help="target ε of this fit at the dataset's δ")  # fmt: skip
        parser.add_argument("--param", action="append", metavar="NAME=VALUE", help="a solver parameter (repeatable)")
        parser.add_argument("--params", default=None, metavar="JSON",
                            help="solver parameters as a JSON object, or @file.json")  # fmt: skip
        if name == "fit":
            parser.add_argument("--wait", action="store_true", help="wait for the fit, with a progress bar")
            parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                                help="with --wait: stop waiting after S seconds (the fit goes on)")  # fmt: skip
            parser.add_argument("--idempotency-key", default=None, metavar="KEY",
                                help="reuse to make a retried request safe")  # fmt: skip

    fits_help = "list, show, wait for, cancel and privately evaluate fits"
    fits = commands.add_parser("fits", help=fits_help, description=fits_help)
    sub = fits.add_subparsers(dest="fits_command", required=True)
    fits_list = command(sub, "list", _fits_list,
                        "the fits this key may see, oldest first: a dataset's, or every one (all pages)")  # fmt: skip
    fits_list.add_argument("dataset", metavar="DATASET", nargs="?", default=None,
                           help="only this dataset's fits: its id, or its name if no other dataset of yours has it "
                           "(default: every fit this key may see)")  # fmt: skip
    fits_list.add_argument("--status", default=None, choices=("queued", "running", "succeeded", "failed", "cancelled"),
                           help="only the fits in this status")  # fmt: skip
    fits_list.add_argument("--solver", default=None, metavar="SOLVER",
                           help="only the fits of this solver (privfit solvers)")  # fmt: skip
    fits_list.add_argument("--limit", type=int, default=None, metavar="N",
                           help="one page of N fits (at most 1000) instead of every page; the next page's --cursor "
                           "is printed on stderr")  # fmt: skip
    fits_list.add_argument("--cursor", default=None, metavar="CURSOR",
                           help="the page that follows the one which printed this cursor (same filters)")  # fmt: skip
    _fit_argument(command(sub, "show", _fits_show, "a fit's status, cost and result"))
    wait = command(sub, "wait", _fits_wait, "wait for a fit to finish, with a progress bar")
    _fit_argument(wait)
    wait.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                      help="give up waiting after this many seconds (the fit goes on)")  # fmt: skip
    cancel = command(sub, "cancel", _fits_cancel,
                     "cancel a queued or running fit, then show it as the cancel left it")  # fmt: skip
    _fit_argument(cancel)
    cancel.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to wait for a running fit to stop at its next step (default 10)")  # fmt: skip
    evaluate_help = "DP metrics of a succeeded fit on its dataset's private validation rows (charged to the ledger)"
    evaluate = command(sub, "evaluate", _fits_evaluate, evaluate_help)
    _fit_argument(evaluate)
    evaluate.add_argument("--epsilon", type=float, required=True, metavar="EPSILON",
                          help="the evaluation's ε (pure, Laplace noise)")  # fmt: skip
    evaluate.add_argument("--metrics", default=None, metavar="LIST", help="comma-separated, e.g. accuracy,roc_auc "
                          "(default: all that apply: accuracy, roc_auc, log_loss | rmse, mae)")  # fmt: skip
    evaluate.add_argument("--confidence", type=float, default=None, metavar="LEVEL",
                          help="interval level (default 0.95)")  # fmt: skip
    evaluate.add_argument("--idempotency-key", default=None, metavar="KEY",
                          help="reuse to make a retried request safe")  # fmt: skip
    _fit_argument(command(sub, "evaluations", _fits_evaluations, "a fit's private evaluations"))
    export_help = ("write a succeeded fit as a fitted scikit-learn Pipeline or an ONNX model (its dataset's encoding, "
                   "then the model)")  # fmt: skip
    export = command(sub, "export", _fits_export, export_help)
    _fit_argument(export)
    export.add_argument("--format", required=True, choices=EXPORT_FORMATS,
                        help="joblib: a scikit-learn Pipeline saved by joblib.dump (sklearn extra); onnx: the "
                        "ONNX model the server builds (run it with onnxruntime: onnx extra)")  # fmt: skip
    export.add_argument("--output", default=None, metavar="PATH",
                        help="where to write it (default fit-<FIT_ID>.joblib or .onnx; - for stdout)")  # fmt: skip

    predict = command(commands, "predict", _predict, "predict with a finished fit on your own rows")
    _fit_argument(predict)
    predict.add_argument("--rows", required=True, metavar="FILE",
                         help="a JSON (list of objects) or CSV file of rows; - for stdin")  # fmt: skip
    predict.add_argument("--unknown-category", choices=("error", "ignore"), default="error",
                         help="a categorical level the schema does not declare: refuse the rows (error, the default) "
                         "or encode it as an all-zero one-hot block (ignore)")  # fmt: skip
    _dataset_argument(command(commands, "budget", _budget, "a dataset's budget: spent, reserved, remaining ε"))
    ledger_help = (
        "a dataset's ledger entries, oldest first (ledger DATASET); its export with the hash chain "
        "(ledger export DATASET, owners); the offline check of an export (ledger verify FILE)"
    )
    ledger = command(commands, "ledger", _ledger, ledger_help)
    ledger.add_argument("target", nargs="+", metavar="DATASET | export DATASET | verify FILE",
                        help="a dataset's id or name (a dataset named export or verify: use its id)")  # fmt: skip
    ledger.add_argument("--limit", type=int, default=100, metavar="N", help="entries per page (default 100)")
    ledger.add_argument("--offset", type=int, default=0, metavar="N", help="entries to skip (default 0)")
    ledger.add_argument("--all", action="store_true", help="every entry (all pages)")
    ledger.add_argument("--output", "-o", default=None, metavar="FILE",
                        help="export: the file to write (default ledger-<id>.jsonl; - for stdout)")  # fmt: skip
    ledger.add_argument("--head", action="append", default=None, metavar="HASH",
                        help="verify: a head recorded earlier that must be on the chain (repeatable)")  # fmt: skip
    command(commands, "solvers", _solvers, "the solvers, the models each fits and whether this server runs it")
    command(commands, "whoami", _whoami, "the API key's id, role and name")


def _client_handler(handler: Callable[[Client, argparse.Namespace, Output], int]) -> Callable[..., int]:
    """Wrap a command: build the client, run it, turn every error into a message and its exit status."""

    def run(args: argparse.Namespace) -> int:
        def option(name: str) -> Any:
            """The subcommand's value of an option, else the one given before the subcommand."""
            value = getattr(args, name, None)
            return value if value not in (None, False) else getattr(args, f"global_{name}", value)

        out = Output(as_json=bool(option("json")), quiet=bool(option("quiet")))
        url = option("url") or os.environ.get("PRIVFIT_URL") or DEFAULT_URL
        api_key = option("api_key") or os.environ.get("PRIVFIT_API_KEY")
        timeout = option("request_timeout")
        try:
            from ._client import Client  # httpx: imported by the commands that talk to the server, not by --help

            with Client(url, api_key, timeout=60.0 if timeout is None else timeout) as client:
                return handler(client, args, out)
        except (errors.PrivfitError, UsageError, OSError) as error:
            if isinstance(error, errors.ApiError) and out.as_json:
                out.json(error.problem)
            out.message(f"error: {as_cli_text(error)}" + _hint(error, api_key))
            return exit_code_for(error)

    return run


#: The API's request fields that a client command sets with an option: a problem about one (its ``field``) is
#: worded with the option, not the form field a curl user sends.
_OPTION_OF_FIELD = {"allow_duplicate": "--allow-duplicate"}


def as_cli_text(error: BaseException) -> str:
    """An error's message as the command line says it: the server's "send allow_duplicate=true" (a form field)
    becomes "pass --allow-duplicate" (the option that sends it); another message about that field gets the option
    appended."""
    text = str(error)
    field = error.problem.get("field") if isinstance(error, errors.ApiError) else None
    option = _OPTION_OF_FIELD.get(str(field))
    if option is None:
        return text
    worded = text.replace(f"send {field}=true", f"pass {option}").replace("(privacy_domain=", "(--privacy-domain ")
    return worded if worded != text else f"{text} (the command's option: {option})"


def _hint(error: BaseException, api_key: str | None) -> str:
    if isinstance(error, errors.AuthenticationError) and not api_key:
        return "\n(no API key given: pass --api-key or set PRIVFIT_API_KEY)"
    if isinstance(error, errors.BudgetExceededError) and error.remaining_epsilon is not None:
        where = "of your allocation on this dataset" if error.scope == "allocation" else "on this dataset"
        hint = f"\n(remaining ε {where}: {error.remaining_epsilon:.6g}"
        largest = error.max_admissible_epsilon
        if largest is not None and largest > 0.0:
            hint += f"; the largest --epsilon this fit can have now: {largest:.4g}"
        elif largest is not None:
            hint += "; no --epsilon of this fit is admissible now"
        return hint + ")"
    return ""

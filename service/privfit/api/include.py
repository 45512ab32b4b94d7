"""Lean answers: what a fit, estimate, evaluation, budget or ledger answer leaves out unless the request asks for it
with ``?include=`` (issue 36).

A privacy cost's RDP curve, a budget's committed curve and its grid of orders are one number per order of the
grid (156 of them, about 3 KB each): nobody reads them in a walkthrough, and they drowned the members people do
read. They appear only with ``?include=rdp``, exactly as they were before; ``GET /v1/fits/{id}/privacy`` returns a
fit's whole curve with its orders. A succeeded fit's ``result.metadata`` starts from the resolved settings that
the same answer already shows as ``settings``; by default it lists only what it adds or changes
(``{**settings, **result.metadata}`` is the whole metadata, :func:`lean_result`), and ``?include=metadata``
returns it whole.

Only what answers show changes: the ledger, the filter and the stored rows keep every curve.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection
from typing import Annotated, Any, Literal

from fastapi import Query

RdpPart = Literal["rdp"]
"""What an estimate, evaluation, budget or ledger answer can include: its per-order RDP arrays."""

FitPart = Literal["rdp", "metadata"]
"""What a fit answer can include: its cost's RDP curve, and its result's whole metadata."""

_RDP_HELP = (
    "Parts left out of the default answer to keep it small: `rdp` adds the per-order RDP arrays (a cost's `rdp` "
    "curve; a budget's `orders` and `committed_rdp`; a ledger entry's `rdp`), one number per order of the grid, "
    "null for +∞. Repeat the parameter for several parts."
)


def _no_parts() -> list[str]:
    """The default of ``include``: no optional part. A plain function with its signature stored on it, not the
    builtin ``list``: for every request that omits a parameter with a default factory, pydantic asks for the
    factory's signature (whether it takes the validated data), and a builtin's is parsed from text each time
    (~0.2 ms of CPU per request on the estimate and admission paths; a stored one is returned at once)."""
    return []


_no_parts.__signature__ = inspect.signature(_no_parts)  # type: ignore[attr-defined]

RdpInclude = Annotated[list[RdpPart], Query(default_factory=_no_parts, description=_RDP_HELP)]
"""The ``include`` query parameter of the answers whose only optional part is the RDP arrays."""

FitInclude = Annotated[
    list[FitPart],
    Query(
        default_factory=_no_parts,
        description=_RDP_HELP + " For a fit, `metadata` returns its result's whole `metadata`: by default it lists "
        "only the members that differ from, or are not in, the fit's `settings` (the whole metadata is `settings` "
        "overlaid with it). Example: `?include=rdp&include=metadata`.",
    ),
]
"""The ``include`` query parameter of fit answers."""


def lean_cost(cost: dict[str, Any] | None, include: Collection[str]) -> dict[str, Any] | None:
    """A cost document as an answer shows it: without its ``rdp`` curve unless ``include`` has ``rdp``. Returns a
    new dict (the cost may be shared, e.g. by the plan cache) and leaves ``cost`` unchanged."""
    if cost is None or "rdp" in include or "rdp" not in cost:
        return cost
    return {key: value for key, value in cost.items() if key != "rdp"}


def lean_metadata(metadata: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """A release's metadata without the members that repeat ``settings`` (same name, same value), so that
    ``{**settings, **lean_metadata(metadata, settings)} == metadata`` — in content and in member order. A release
    whose metadata lacks one of the settings (it was not written from them) is returned whole: overlaying it on
    the settings would add that member."""
    if not set(settings) <= set(metadata):
        return metadata
    return {key: value for key, value in metadata.items() if key not in settings or settings[key] != value}


def lean_result(
    result: dict[str, Any] | None, settings: dict[str, Any] | None, include: Collection[str]
) -> dict[str, Any] | None:
    """A fit's result as an answer shows it: its ``metadata`` reduced by :func:`lean_metadata` unless ``include``
    has ``metadata``. Returns a new dict and leaves ``result`` unchanged."""
    if result is None or "metadata" in include or not isinstance(result.get("metadata"), dict) or not settings:
        return result
    return {**result, "metadata": lean_metadata(result["metadata"], settings)}


def lean_fit(body: dict[str, Any], include: Collection[str]) -> dict[str, Any]:
    """A fit document (``FitOut``) as an answer shows it: :func:`lean_cost` and :func:`lean_result` applied."""
    lean = {**body, "cost": lean_cost(body.get("cost"), include)}
    if "result" in body:
        lean["result"] = lean_result(body["result"], body.get("settings"), include)
    return lean


BUDGET_ARRAYS = ("orders", "committed_rdp")
"""The budget view's per-order arrays (the grid's orders and the committed curve), shown with ``include=rdp``."""


def lean_budget(body: dict[str, Any], include: Collection[str]) -> dict[str, Any]:
    """A budget document (``BudgetOut``) without :data:`BUDGET_ARRAYS` unless ``include`` has ``rdp``."""
    if "rdp" in include:
        return body
    return {key: value for key, value in body.items() if key not in BUDGET_ARRAYS}


def lean_entry(entry: dict[str, Any], include: Collection[str]) -> dict[str, Any]:
    """A ledger entry document without its ``rdp`` curve unless ``include`` has ``rdp``."""
    if "rdp" in include:
        return entry
    return {key: value for key, value in entry.items() if key != "rdp"}

"""Datasets: upload (validated and encoded against the declared public schema), list, show, delete, grants,
duplicates, and the ledger views (budget, entries). No endpoint returns row values. The entries are the owner's and
admins' to read in full; a granted analyst reads only its own and the preprocessing's, without the running counters
(:func:`ledger`).

A schema with ``validation_fraction`` splits the rows at upload (:mod:`privfit.datasets.split`): ``n`` counts the
training rows fits read, ``n_validation`` the private validation rows only evaluations read; both matrices are
stored, accounted for and purged together.

Lifecycle (:mod:`privfit.datasets.lifecycle`): an upload commits a pending record before its matrix is stored and
registers the dataset in the transaction that removes it, so a crash never leaves data nothing accounts for (the
orphan sweep removes what a crash left). A delete marks the dataset deleted, cancels its queued fits (refunded),
asks its running fits to stop, and purges the matrix unless another live dataset or a pending upload still uses it
(checked and purged under the key's lock). The ledger of a deleted dataset stays readable by its owner and admins.

Grants: the owner (or an admin) grants an analyst key, lists the grants and revokes them. Revoking a grant cancels
that analyst's queued fits on the dataset (reservations released: they never read a row) and asks its running ones
to stop (a fit that read rows keeps its charge and releases no result); fits that already finished stay readable to
the analyst — their results were released before the revocation.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Collection
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, File, Form, HTTPException, Query, Request, Response, UploadFile
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import ColumnElement, and_, delete, func, or_, select

from privfit.datasets import DatasetSchema, EncodedDataset, encode_parquet, is_parquet_upload
from privfit.datasets.columnar import encode_csv_upload
from privfit.datasets.encoding import DatasetTooLargeError
from privfit.datasets.lifecycle import (
    DuplicateDatasetError,
    abandon_upload,
    begin_upload,
    finish_upload,
    refuse_duplicate,
    release_key,
)
from privfit.datasets.parquet_store import ParquetDatasetStore
from privfit.datasets.partitioned_upload import PartitionedUpload, encode_into_partitions
from privfit.datasets.preprocessing import BatchCounts, PreprocessingRelease, preprocess
from privfit.datasets.schema import counting_clipped_cells
from privfit.datasets.split import ValidationSplitError, split_validation
from privfit.datasets.store import DatasetStore
from privfit.datasets.units import bound_contributions
from privfit.db import ApiKey, Budget, Database, Dataset, DatasetGrant, Job, LedgerEntry
from privfit.db.models import utcnow
from privfit.faults import crash_point
from privfit.jobs import cancel
from privfit.ledger import BudgetExceededError, budget_filter, charge_preprocessing, create_budget, spent_by, status
from privfit.privacy import OrderGrid, PrivacyFilter, get_grid, secure_generator
from privfit.settings import Settings
from privfit.solvers.design_cache import design_cache
from privfit.text import nfc, refused_character

from ..auth import Principal, current_principal, privileged, require_role, visible_dataset
from ..encoding import UtcDateTime, public_json, utc
from ..identifiers import NAME_MAX_LENGTH, DisplayName, ResourceId, id_path, is_resource_id, normalize_id
from ..include import RdpInclude, lean_budget, lean_entry
from ..limits import JsonLimitError, loads_limited
from ..pagination import Keyset, Paging, link_next, paged
from ..problems import Problem, dataset_not_found, grant_not_found, problem_responses
from ..upload_stream import StreamedUpload, StreamingUploadRoute
from .allocations import AllocationOut, allocations_of

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])
log = logging.getLogger("privfit.api")


class PrivacyUnitOut(BaseModel):
    """A user-level dataset's privacy unit (public): the column, the bound on rows per unit, and what the upload
    kept (the rows dropped: in the upload's answer to its owner only)."""

    column: str = Field(description="The column naming each row's unit (not a feature).")
    max_rows: int = Field(description="The public maximum of rows kept per unit (contribution bounding).")
    units: int = Field(description="The number of privacy units: the dataset's public size n.")
    rows_dropped: int | None = Field(
        None,
        description="In the upload's answer only (to its owner, who holds the rows): the rows dropped because their "
        "unit had more than max_rows (a secret random choice of which). Never stored, never shown to analysts.",
    )


class DatasetOut(BaseModel):
    id: str
    name: str
    n: int = Field(
        description="Rows that fits read (the training rows when the dataset has a validation split); for a "
        "user-level dataset (`privacy_unit`) the number of privacy units, its public size: its row count "
        "is not public."
    )
    n_validation: int = Field(0, description="Private validation rows held apart for evaluations (0: none).")
    validation_fraction: float | None = Field(None, description="The declared validation fraction, if any.")
    d: int
    feature_names: list[str]
    row_norm_bound: float
    label_bound: float
    schema_: dict[str, Any] = Field(alias="schema", serialization_alias="schema")
    created_at: UtcDateTime
    owner_key_id: str
    privacy_domain: str = Field(
        description="The id of the dataset whose budget this one spends: its own id, unless it was registered into "
        "that dataset's privacy domain (the same people: one filter and one ledger for every dataset of the domain)."
    )
    content_hash: str | None = Field(None, description="Shown to the owner and admins only.")
    preprocessing: dict[str, Any] | None = Field(
        None,
        description="Private preprocessing at upload (public, charged to the budget as its own ledger entry): the "
        "mechanism, the share of the budget and the ε it took, and per measured numeric column its public grid "
        "(scale, bounds, bins), its released noisy counts and the encoding derived from them (a feature's "
        "transform, a label's bounds; null: the declared encoding kept). Null when the schema opted out or had no "
        "column to measure. The dataset's `schema` is the declared schema with the derived encodings filled in.",
    )
    clipped_cells: dict[str, int] | None = Field(
        None,
        description="In the upload's answer only (to its owner, who holds the rows): per numeric column, the cells "
        "outside the declared bounds that were clipped to them. Computed from the private rows, never stored, "
        "never shown to analysts.",
    )
    privacy_unit: PrivacyUnitOut | None = Field(
        None,
        description="User-level privacy: every cost of this dataset is for neighbours differing in one unit with all "
        "its rows (null: one row is one person).",
    )

    model_config = {"populate_by_name": True}


class DuplicateGroup(BaseModel):
    """Live datasets sharing one encoded content, oldest first."""

    content_hash: str | None
    count: int
    datasets: list[DatasetOut]


class GrantRequest(BaseModel):
    api_key_id: ResourceId = Field(description="The id of an analyst key.")


class GrantCreated(BaseModel):
    dataset_id: str
    api_key_id: str


class GrantOut(BaseModel):
    dataset_id: str
    api_key_id: str
    api_key_name: str = Field(
        description="The analyst key's name (as its admin created it; may be empty), to tell grants apart by more "
        "than an id."
    )
    created_at: UtcDateTime
    key_revoked: bool = Field(description="The analyst key was revoked (the grant can no longer be used).")


# A float of the ledger's views that may be +∞ (no finite bound, not admissible) is written as null.
Unbounded = Annotated[float | None, Field(description="null stands for +∞ (no finite bound)")]

CERTIFICATE_HELP = (
    "Which of the filter's certificates gives the share: `order` (one of its pinned RDP orders), `pure` (the pure-ε "
    "certificate) or `gaussian` (the Gaussian-DP certificate, which only filters with gdp_delta > 0 have); null when "
    "none holds (the share is +∞)."
)
"""The description of every answer member that names the certificate of a share (budget, cost, estimate)."""


class FilterOut(BaseModel):
    """The dataset's privacy filter (all public)."""

    rule: str
    orders: list[float]
    order_deltas: list[float]
    order_budgets: list[Unbounded]
    approximate_delta: float
    slack_delta: float = Field(
        description="δ_S ≤ δ_A: the pot's part for approximate-RDP slacks, weighted by slack_weight; δ_A − δ_S is "
        "for the δ of (ε, δ) charges. Each part is checked on its own at every admission."
    )
    slack_weight: float
    gdp_delta: float = Field(
        description="δ_G: the δ share of the Gaussian-DP certificate, which holds while the committed fits are made of "
        "Gaussian releases whose μ² sum to at most gdp_mu². 0: no Gaussian-DP certificate (budgets and allocations "
        "created before it)."
    )
    gdp_mu: float = Field(
        description="μ_G: the largest Gaussian-DP μ the certificate allows at (epsilon_max, gdp_delta); 0 when the "
        "filter has no Gaussian-DP certificate."
    )


class BudgetOut(BaseModel):
    """Budget limits and privacy filter, charged / reserved / committed / remaining ε as the filter measures them
    (``measure`` says how), δ parts and, with ``?include=rdp``, the grid's orders and the committed RDP curve
    (null = +∞ at that order)."""

    dataset_id: str
    epsilon_max: float
    delta_max: float
    grid_name: str
    orders: list[float] | None = Field(
        None, description="Only with ?include=rdp: the orders α of the grid, one per entry of `committed_rdp`."
    )
    filter: FilterOut
    charged_epsilon: Unbounded
    reserved_epsilon: Unbounded
    committed_epsilon: Unbounded
    committed_share: Unbounded
    committed_certificate: str | None = Field(description=CERTIFICATE_HELP)
    committed_certifying_order: float | None
    committed_order_share: Unbounded
    committed_pure_share: Unbounded
    committed_gdp_share: Unbounded = Field(
        description="Σμ²/gdp_mu² of the committed fits: the Gaussian-DP certificate's share (null stands for +∞: "
        "some committed fit has no Gaussian-DP bound, or the filter has no such certificate)."
    )
    remaining_epsilon: Unbounded
    committed_rdp: list[float | None] | None = Field(
        None, description="Only with ?include=rdp: the committed ε(α) at each of `orders` (null = +∞ at that order)."
    )
    committed_extra_delta: float
    committed_approx_delta: float
    committed_pure_epsilon: Unbounded
    committed_gdp_mu_squared: Unbounded = Field(
        description="Σμ² of the committed fits' Gaussian-DP bounds (null stands for +∞: some committed fit has none)."
    )
    committed_delta_used: Unbounded
    entries: int
    closed_reason: str | None
    allocation: AllocationOut | None = Field(
        None,
        description="The caller's allocation of this budget, if the owner gave it one: what it may use and "
        "has left (an analyst with an allocation is admitted only within both; null: none).",
    )
    measure: str
    formula_version: str


class LedgerEntryOut(BaseModel):
    """One ledger entry. The dataset's owner and admins see every entry with every field (`view: all`); a granted
    analyst (`view: own`) sees only its own fits' and evaluations' entries and the preprocessing's, without `id`,
    `budget_version` and `committed_epsilon_after`: each of those counts or sums the entries up to this one, so
    their steps between two of the analyst's entries would reveal other keys' activity."""

    id: int | None = Field(None, description="The entry's id, a counter global to the server (owner and admins "
                           "only: absent from an analyst's view).")  # fmt: skip
    job_id: str | None = Field(description="The fit this entry belongs to (null for an evaluation's or a "
                               "preprocessing's entry).")  # fmt: skip
    evaluation_id: str | None = Field(description="The evaluation this entry belongs to (null otherwise).")
    preprocessing_dataset_id: str | None = Field(
        None, description="Set on the entries of the dataset's private preprocessing at upload (null otherwise)."
    )
    kind: str = Field(description="reservation | charge | release")
    epsilon: Unbounded
    optimal_order: Unbounded
    extra_delta: float
    approx_delta: float
    pure_epsilon: Unbounded
    gdp_mu_squared: Unbounded = Field(
        description="The entry's Gaussian-DP μ² (null stands for +∞: no Gaussian-DP bound — a release that is not "
        "Gaussian, or an entry written before the Gaussian-DP certificate existed)."
    )
    committed_epsilon_after: Unbounded = Field(
        None, description="The dataset's committed ε after this entry, by its filter (null stands for +∞). Owner and "
        "admins only: absent from an analyst's view, which has the current total in GET …/budget.",
    )  # fmt: skip
    grid: str
    formula_version: str
    budget_version: int | None = Field(None, description="The budget's entry counter after this entry (owner and "
                                       "admins only: absent from an analyst's view).")  # fmt: skip
    description: str
    created_at: UtcDateTime
    rdp: list[float | None] | None = Field(
        None, description="Only with ?include=rdp: the entry's ε(α) at each order of its grid (null = +∞)."
    )


class LedgerPage(BaseModel):
    dataset_id: str
    view: Literal["all", "own"] = Field(
        description="`all`: the dataset's owner or an admin, every entry with every field. `own`: a granted analyst, "
        "only the entries of its own fits and evaluations and the dataset's preprocessing, without `id`, "
        "`budget_version` and `committed_epsilon_after`; `total` and the pages count those entries only."
    )
    total: int = Field(description="The entries in this view (all of `limit`/`offset`'s pages).")
    limit: int
    offset: int
    entries: list[LedgerEntryOut]


def _default_name(filename: str | None) -> str:
    """The display name of an upload sent without one: its file name in NFC without the characters a name may not
    contain (:func:`privfit.text.refused_character`: controls, bidirectional controls, invisible ones), or
    "dataset"."""
    cleaned = "".join(c for c in nfc(filename or "") if refused_character(c) is None)
    return cleaned[:NAME_MAX_LENGTH] or "dataset"


def _privacy_unit(dataset: Dataset) -> PrivacyUnitOut | None:
    declared = dataset.schema_json.get("privacy_unit")
    if declared is None:
        return None
    return PrivacyUnitOut(column=declared["column"], max_rows=declared["max_rows"], units=dataset.n)


def _out(dataset: Dataset, principal: Principal) -> DatasetOut:
    return DatasetOut(
        id=dataset.id, name=dataset.name, n=dataset.n, n_validation=dataset.n_validation,
        validation_fraction=dataset.validation_fraction, d=dataset.d, feature_names=dataset.feature_names,
        row_norm_bound=dataset.row_norm_bound, label_bound=dataset.label_bound, schema_=dataset.schema_json,
        preprocessing=dataset.preprocessing,
        created_at=dataset.created_at, owner_key_id=dataset.owner_key_id, privacy_domain=dataset.domain_id,
        content_hash=dataset.content_hash if privileged(principal, dataset) else None,
        privacy_unit=_privacy_unit(dataset),
    )  # fmt: skip


def _parse_schema(raw: str) -> DatasetSchema:
    """The declared schema from its JSON text; every failure is a 422 naming the field (never a 500: deep
    nesting and overlong numbers are refused by :func:`loads_limited`). Runs in the threadpool."""
    try:
        return DatasetSchema.model_validate(loads_limited(raw))
    except json.JSONDecodeError as error:
        raise Problem(422, "Invalid schema", f"schema is not valid JSON: {error.msg} at position {error.pos}") from None
    except JsonLimitError as error:
        loc = ["schema", *error.loc]
        raise Problem(422, "Invalid schema", f"{'.'.join(loc)}: {error.message}",
                      errors=[{"loc": loc, "msg": error.message, "type": "json_limit"}]) from None  # fmt: skip
    except ValidationError as error:
        errors = [
            {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in error.errors(include_input=False, include_url=False)
        ]
        detail = "; ".join(f"{'.'.join(e['loc']) or 'schema'}: {e['msg']}" for e in errors)
        raise Problem(422, "Invalid schema", detail, errors=errors) from None


def _read_schema_part(part: UploadFile, limit: int) -> str:
    """The text of a schema sent as a file part, refused past ``limit`` bytes (``max_json_bytes``) without
    reading further. Runs in the threadpool (the part may be spooled to disk)."""
    part.file.seek(0)
    raw = part.file.read(limit + 1)
    if len(raw) > limit:
        raise Problem(413, "Schema too large", f"schema: the schema part exceeds max_json_bytes = {limit} bytes",
                      setting="max_json_bytes", limit=limit)  # fmt: skip
    return raw.decode("utf-8", "replace")


def _check_dimension(declared: DatasetSchema, settings: Settings) -> None:
    """Refuse a schema wider than ``max_features`` from the declaration alone, before any row is read."""
    limit = settings.max_features
    columns, d = len(declared.features), declared.dimension
    if columns > limit or d > limit:
        what = f"{d} encoded features (numeric + one-hot levels)" if d > limit else f"{columns} feature columns"
        raise Problem(413, "Dataset too wide", f"schema.features: the schema declares {what}, over max_features = "
                      f"{limit}", setting="max_features", limit=limit)  # fmt: skip


def upload_dataset(
    request: Request,
    file: UploadFile = File(  # noqa: B008
        ...,
        description="The CSV file, or a Parquet file: its part's Content-Type is application/vnd.apache.parquet "
        "(or application/x-parquet) or its file name ends in .parquet.",
    ),
    schema_field: str | UploadFile = Form(  # noqa: B008
        ...,
        alias="schema",
        description="The public schema as JSON (label, features, missing, budget, csv): a text field "
        "(`-F schema=<schema.json`) or a file part (`-F schema=@schema.json`). Required and not empty.",
        json_schema_extra={"minLength": 1},
    ),
    name: Annotated[DisplayName, Form(description="A display name (default: the file's name).")] = "",
    allow_duplicate: bool = Form(
        False,
        description="Register the content even if this owner already has a live dataset with the same encoded "
        "data (it gets a separate budget). Without it such an upload is refused with 409 naming the existing one.",
    ),
    privacy_domain: str = Form(
        "",
        description="The id of a live dataset of yours about the same people (a cleaned re-upload, a second table "
        "of the same population): this dataset then spends that dataset's budget — one privacy filter and one "
        "ledger for both, so every fit on either counts against one (ε, δ). The schema's budget must then be that "
        "budget's (ε, δ). Empty: a budget of its own, from the schema.",
    ),
    principal: Principal = Depends(require_role("owner")),  # noqa: B008
) -> DatasetOut:
    # A sync endpoint: FastAPI runs all of it in the threadpool (schema parsing, CSV encoding, the store and the
    # database insert), so none of it blocks the event loop. An owner's body was parsed as it arrived
    # (api/upload_stream.py: the route class below): the file part spooled to disk by a thread of its own, and a
    # CSV whose schema came first encoded by it on the way (taken here if it used this very schema). Otherwise the
    # spooled file is encoded here: a CSV read in blocks (encode_csv_upload), a Parquet file in batches of rows
    # (encode_parquet), never as a whole in memory, after the caps that need no decoding (a CSV's cells and lines
    # from one pass over its bytes; a Parquet file's footer and page headers, and δ < 1/n from the footer's row
    # count). (A comment, not a docstring: a docstring would become the operation's public OpenAPI description.)
    settings: Settings = request.app.state.settings
    if isinstance(schema_field, str):
        raw_schema = schema_field
        if len(raw_schema) > settings.max_json_bytes:
            raise Problem(413, "Schema too large", f"schema: the schema exceeds max_json_bytes = "
                          f"{settings.max_json_bytes} bytes", setting="max_json_bytes",
                          limit=settings.max_json_bytes)  # fmt: skip
    else:
        raw_schema = _read_schema_part(schema_field, settings.max_json_bytes)
    declared = _parse_schema(raw_schema)
    _check_dimension(declared, settings)
    domain = _joined_domain(request.app.state.db, privacy_domain, declared, principal) if privacy_domain else None
    grid = get_grid(settings.grid if domain is None else domain.grid_name)
    streamed = file.encoded(raw_schema) if isinstance(file, StreamedUpload) else None
    file.file.seek(0)
    caps = {"max_matrix_bytes": settings.max_matrix_bytes, "max_cell_bytes": settings.max_cell_bytes}
    parquet = is_parquet_upload(file.content_type, file.filename)
    batch_counts = BatchCounts(declared)  # the preprocessing's counts, summed beside a Parquet file's decoding
    try:
        with counting_clipped_cells() as clipped:
            if streamed is not None:  # encoded while the body arrived, from this schema, with these caps
                encoded = streamed.encoded
                clipped.update(streamed.clipped)
            elif parquet:
                encoded = encode_parquet(file.file, declared, max_page_bytes=settings.max_parquet_page_bytes,
                                         admit_rows=lambda n: _check_delta(declared, n), on_rows=batch_counts.add,
                                         **caps)  # fmt: skip
            else:
                encoded = encode_csv_upload(file.file, declared, **caps)
    except DatasetTooLargeError as error:
        if error.setting == "max_matrix_bytes" and _stores_by_partitions(request):
            return _upload_by_partitions(request, file, declared, parquet, domain, grid, principal, name,
                                         allow_duplicate)  # fmt: skip
        raise Problem(413, "Dataset too large", error.message, setting=error.setting, limit=error.limit) from None
    except MemoryError:  # the caps make this unlikely; when the machine is short anyway, it is a retryable state
        raise _short_of_memory() from None
    # the hash of all the rows as uploaded (before bounding, split or preprocessing draw anything at random)
    validation, content_hash = None, encoded.content_hash
    # user-level privacy: each unit keeps at most max_rows rows, a secret random choice (datasets/units.py)
    bounded = bound_contributions(encoded, secure_generator())
    encoded = bounded.encoded
    _check_delta(declared, encoded.public_n)
    privacy_filter = _upload_filter(declared, domain, grid)
    # the preprocessing's exact counts if summed while the rows were encoded (row-level: the rows are those encoded)
    counts = streamed.counts if streamed is not None else batch_counts.totals() if parquet else None
    try:  # charged in _register, shown only after
        preprocessing = preprocess(encoded, privacy_filter, secure_generator(), counts=counts)
    except MemoryError:  # its re-encoded copy of the matrix: as for the encoding above
        raise _short_of_memory() from None
    if preprocessing is not None:
        encoded = preprocessing.encoded
    if declared.validation_fraction is not None:
        try:  # a secret, uniformly random split of the rows (OS entropy), never stored or shown on its own
            encoded, validation = split_validation(encoded, declared.validation_fraction, secure_generator())
        except ValidationSplitError as error:
            raise Problem(422, "Invalid schema", str(error), field="schema.validation_fraction") from None
    try:
        dataset = _store_and_register(
            request.app.state.db, request.app.state.store, principal, name or _default_name(file.filename),
            encoded, validation, content_hash, grid, allow_duplicate, preprocessing,
            None if domain is None else domain.dataset_id,
        )  # fmt: skip
    except BudgetExceededError as refused:  # only a shared budget can be short: a new one is empty
        raise _domain_cannot_pay(refused) from None
    answer = _out(dataset, principal)
    if answer.privacy_unit is not None:
        answer.privacy_unit.rows_dropped = bounded.rows_dropped
    return answer.model_copy(update={"clipped_cells": clipped})


# Registered with its route class (its body parsed as it arrives, api/upload_stream.py); the OpenAPI operation is
# the one the decorator gave it.
router.add_api_route(
    "", upload_dataset, methods=["POST"], status_code=201, response_model=DatasetOut, response_model_by_alias=True,
    summary="Upload a CSV or Parquet file with its declared public schema and budget (owners)",
    responses=problem_responses(
        400, 401, 403, 409, 413, 422, 429, 503,
        s409="This owner already has a live dataset with the same content (`existing_dataset_id`) in "
        "another privacy domain; send privacy_domain=<its id> to register it into that dataset's domain "
        "(one budget), or allow_duplicate=true to register it anyway, with its own budget. Or: the privacy "
        "domain's budget cannot pay the upload's private preprocessing (`field`: privacy_domain).",
    ),
    route_class_override=StreamingUploadRoute,
)  # fmt: skip


def _upload_filter(declared: DatasetSchema, domain: Budget | None, grid: OrderGrid) -> PrivacyFilter:
    """The privacy filter an upload's private preprocessing is measured on: the joined domain's, or a fresh one of
    the declared budget."""
    if domain is not None:
        return budget_filter(domain)
    budget = declared.budget
    return PrivacyFilter.for_budget(budget.epsilon, budget.delta, grid, budget.approximate_delta, budget.slack_delta)


def _stores_by_partitions(request: Request) -> bool:
    """Whether this server stores an upload over max_matrix_bytes by partitions (:mod:`privfit.datasets.
    partitioned_upload`): the parquet store, and a Dask cluster for the fits that read it by partitions."""
    settings: Settings = request.app.state.settings
    return isinstance(request.app.state.store, ParquetDatasetStore) and settings.dask_scheduler is not None


def _upload_by_partitions(
    request: Request, file: UploadFile, declared: DatasetSchema, parquet: bool, domain: Budget | None,
    grid: OrderGrid, principal: Principal, name: str, allow_duplicate: bool,
) -> DatasetOut:  # fmt: skip
    """The upload of a dataset over max_matrix_bytes, encoded into the parquet store's partitions in bounded memory
    (:func:`~privfit.datasets.partitioned_upload.encode_into_partitions`), then registered as any upload. A privacy
    unit or a validation split needs the whole matrix: 413 naming the schema field."""
    settings: Settings = request.app.state.settings
    needs_matrix = (("privacy_unit", "a privacy unit (each unit's rows are bounded over the whole matrix)"),
                    ("validation_fraction", "a validation split (a secret split of the whole matrix)"))  # fmt: skip
    for field, what in needs_matrix:
        if getattr(declared, field) is not None:
            raise Problem(413, "Dataset too large", f"schema.{field}: the encoded matrix exceeds max_matrix_bytes = "
                          f"{settings.max_matrix_bytes} bytes, so it is stored by partitions, and a dataset with "
                          f"{what} is not; leave {field} out, split the dataset or ask the operator to raise "
                          "max_matrix_bytes", setting="max_matrix_bytes", limit=settings.max_matrix_bytes,
                          field=f"schema.{field}")  # fmt: skip
    store = request.app.state.store
    assert isinstance(store, ParquetDatasetStore)
    file.file.seek(0)
    try:
        with counting_clipped_cells() as clipped:
            upload = encode_into_partitions(
                file.file, declared, store, _upload_filter(declared, domain, grid), secure_generator(),
                parquet=parquet, max_stored_bytes=settings.max_stored_bytes, max_cell_bytes=settings.max_cell_bytes,
                max_page_bytes=settings.max_parquet_page_bytes, admit_rows=lambda n: _check_delta(declared, n),
            )  # fmt: skip
    except DatasetTooLargeError as error:
        raise Problem(413, "Dataset too large", error.message, setting=error.setting, limit=error.limit) from None
    except MemoryError:
        raise _short_of_memory() from None
    try:
        dataset = _store_and_register(
            request.app.state.db, store, principal, name or _default_name(file.filename), upload, None,
            upload.content_hash, grid, allow_duplicate, upload.preprocessing,
            None if domain is None else domain.dataset_id,
        )  # fmt: skip
    except BudgetExceededError as refused:
        raise _domain_cannot_pay(refused) from None
    finally:
        upload.abort()  # the staging left by a refusal (nothing once stored)
    return _out(dataset, principal).model_copy(update={"clipped_cells": clipped})


def _domain_cannot_pay(refused: BudgetExceededError) -> Problem:
    return Problem(
        409, "Privacy budget exceeded",
        f"the privacy domain's budget cannot pay this upload's private preprocessing ({refused}); nothing was "
        'registered or charged. Upload it with "preprocessing": "none" in the schema, or without privacy_domain',
        field="privacy_domain", **refused.problem_fields(),
    )  # fmt: skip


def _joined_domain(db: Database, privacy_domain: str, declared: DatasetSchema, principal: Principal) -> Budget:
    """The budget of the privacy domain an upload joins: that of ``privacy_domain``, a live dataset the caller owns
    (or, for an admin, any), whose (ε, δ) the schema must repeat — the owner states the promise the new data falls
    under. 404 as for any dataset the caller may not manage; 422 naming the field otherwise."""
    if not is_resource_id(privacy_domain):
        raise Problem(422, "Invalid privacy domain", "privacy_domain must be the id of one of your datasets",
                      field="privacy_domain")  # fmt: skip
    dataset = visible_dataset(db, privacy_domain, principal, manage=True)
    with db.read() as session:
        budget = session.get_one(Budget, dataset.domain_id)
    declared_budget = declared.budget
    if (declared_budget.epsilon, declared_budget.delta) != (budget.epsilon_max, budget.delta_max):
        raise Problem(422, "Invalid schema", f"schema.budget: a dataset registered into dataset {dataset.id}'s "
                      f"privacy domain spends its budget ε = {budget.epsilon_max:g}, δ = {budget.delta_max:g}; "
                      "declare that budget", field="schema.budget")  # fmt: skip
    return budget


def _check_delta(declared: DatasetSchema, n: int) -> None:
    """Refuse δ ≥ 1/n for an upload of n rows (:meth:`privfit.datasets.schema.Budget.delta_too_large_for`): a 422
    naming ``schema.budget.delta``. A Parquet upload applies it to its footer's row count, before decoding a page."""
    too_large = declared.budget.delta_too_large_for(n)
    if too_large is not None:
        raise Problem(422, "Invalid schema", f"schema.budget.{too_large}", field="schema.budget.delta")


def _short_of_memory() -> HTTPException:
    return HTTPException(503, "the server has not enough memory for this upload now; retry later",
                         headers={"Retry-After": "30"})  # fmt: skip


def _store_and_register(
    db: Database,
    store: DatasetStore,
    principal: Principal,
    name: str,
    encoded: EncodedDataset | PartitionedUpload,
    validation: EncodedDataset | None,
    content_hash: str,
    grid: OrderGrid,
    allow_duplicate: bool,
    preprocessing: PreprocessingRelease | None,
    domain: str | None = None,
) -> Dataset:
    """The back half of an upload, crash-consistent (module docstring; runs in the threadpool):

    1. a pending upload of the matrix's key (and of the validation matrix's, for a split upload) is committed
       (under the keys' locks; a live dataset of the same owner with the same content is refused with 409 unless
       ``allow_duplicate``, or unless it is in the privacy ``domain`` the upload joins: then they share a budget);
    2. the matrix (and the validation matrix) is stored;
    3. the dataset and its budget (and the charge of its private preprocessing) are inserted in the transaction
       that removes the pending upload.

    ``encoded`` is by the dataset's schema (the declared one with any derived encodings), in memory or staged in
    partitions (:class:`~privfit.datasets.partitioned_upload.PartitionedUpload`, moved into place at 2);
    ``content_hash`` is the hash of all its rows as declared, which identifies the content when the stored keys are
    random (a split's rows, a preprocessing's noise, or partitions).

    A failure after 1 drops the pending upload and purges the data unless something else references it.
    """
    if isinstance(encoded, PartitionedUpload):  # stored by partitions: matched by the content hash
        storage_key, random_keys = encoded.storage_key, True
    else:
        storage_key = store.key_of(encoded)
        random_keys = validation is not None or preprocessing is not None or encoded.units is not None
    validation_key = None if validation is None else store.key_of(validation)
    match_hash = content_hash if random_keys else None  # random keys: match the content instead
    dataset_id = str(uuid.uuid4())
    try:
        begin_upload(db, dataset_id, storage_key, owner_key_id=principal.key_id, allow_duplicate=allow_duplicate,
                     validation_key=validation_key, content_hash=match_hash, domain=domain)  # fmt: skip
        try:
            crash_point("upload:pending")  # test-only fault injection (privfit.faults)
            if isinstance(encoded, PartitionedUpload):
                encoded.finish()  # the staged partitions moved into place, the manifest written
            else:
                store.put(encoded, storage_key)  # storage_key == store.key_of(encoded)
            if validation is not None:
                crash_point("upload:training-stored")
                store.put(validation, validation_key)
            crash_point("upload:stored")
            return _register(db, dataset_id, principal, name, encoded, validation, content_hash, match_hash,
                             storage_key, validation_key, store.identity, grid, allow_duplicate,
                             preprocessing, domain)  # fmt: skip
        except BaseException:
            try:
                abandon_upload(db, store, dataset_id, storage_key, validation_key)  # no orphan data
            except Exception as cleanup:  # e.g. the database is down: the orphan sweep removes it later
                log.warning("abandoned upload left for the orphan sweep", extra={"error_type": type(cleanup).__name__})
            raise
    except DuplicateDatasetError as duplicate:
        raise Problem(
            409, "Duplicate dataset",
            f"you already own dataset {duplicate.existing_id} with the same content; a second upload would get a "
            "separate, fresh budget. Use the existing dataset, or register this one into its privacy domain "
            f"(privacy_domain={duplicate.existing_id}: one budget for both), or send allow_duplicate=true to register "
            "it anyway.",
            existing_dataset_id=duplicate.existing_id, privacy_domain=duplicate.existing_id, field="allow_duplicate",
        ) from None  # fmt: skip


def _register(
    db: Database,
    dataset_id: str,
    principal: Principal,
    name: str,
    encoded: EncodedDataset | PartitionedUpload,
    validation: EncodedDataset | None,
    content_hash: str,
    match_hash: str | None,
    storage_key: str,
    validation_key: str | None,
    store_id: str,
    grid: OrderGrid,
    allow_duplicate: bool,
    preprocessing: PreprocessingRelease | None,
    domain: str | None,
) -> Dataset:
    """Insert the dataset's public metadata and its budget (none when it joins the privacy ``domain``: it spends
    that budget), and remove its pending upload, in one transaction.

    503 (retry) if the pending upload is gone — the orphan sweep judged it abandoned, so its data may be purged;
    :class:`DuplicateDatasetError` if an identical upload of the same owner registered meanwhile."""
    schema = encoded.schema
    with db.write() as session:
        if not finish_upload(session, dataset_id, storage_key, validation_key, match_hash):
            raise HTTPException(
                503,
                "the upload took longer than PRIVFIT_UPLOAD_GRACE_SECONDS and its stored data was swept; upload again",
                headers={"Retry-After": "1"},
            )  # problem+json (problems.py)
        if not allow_duplicate:  # under the locks (finish_upload)
            refuse_duplicate(session, principal.key_id, storage_key, match_hash, domain=domain)
        dataset = Dataset(
            id=dataset_id, owner_key_id=principal.key_id, name=name,
            schema_json=json.loads(schema.canonical_json()), feature_names=list(encoded.feature_names),
            n=encoded.public_n, d=encoded.d, row_norm_bound=encoded.row_norm_bound, label_bound=encoded.label_bound,
            content_hash=content_hash, storage_key=storage_key, store_id=store_id,
            validation_fraction=schema.validation_fraction, n_validation=0 if validation is None else validation.n,
            validation_storage_key=validation_key, budget_dataset_id=domain,
        )  # fmt: skip
        session.add(dataset)
        session.flush()
        if domain is None:
            create_budget(session, dataset_id, schema.budget.epsilon, schema.budget.delta, grid,
                          schema.budget.approximate_delta, schema.budget.slack_delta)  # fmt: skip
        if preprocessing is not None:
            session.flush()
            entry = charge_preprocessing(session, dataset_id, preprocessing.cost, "private preprocessing at upload")
            dataset.preprocessing = preprocessing.public(entry.epsilon, entry.committed_epsilon_after)
    return dataset


def _purge_if_unreferenced(request: Request, storage_key: str | None) -> None:
    """Purge a stored matrix unless a live dataset or a pending upload still uses it (checked and purged under the
    key's lock, :func:`privfit.datasets.lifecycle.release_key`)."""
    if storage_key:
        release_key(request.app.state.db, request.app.state.store, storage_key)


class SchemaCheck(BaseModel):
    """What a declared schema encodes to — public facts, computed from the declaration alone."""

    valid: bool = Field(description="Always true: an invalid schema is a 422 (or 413) naming the field.")
    d: int = Field(description="Encoded feature columns (numeric + one-hot levels).")
    feature_names: list[str]
    row_norm_bound: float = Field(description="The public bound on every encoded row's norm.")
    label_bound: float


@router.post("/schema-check", response_model=SchemaCheck,
             summary="Check a schema without uploading (owners): what it encodes to, or a 422 naming the field",
             responses=problem_responses(401, 403, 413, 422, 503))  # fmt: skip
async def check_schema(
    request: Request,
    principal: Principal = Depends(require_role("owner")),  # noqa: B008
) -> SchemaCheck:
    # The body is the schema's JSON document itself (the text the upload's `schema` field carries); parsed like
    # the upload's (depth and number limits, in the threadpool), with the same checks that need no rows.
    # (A comment, not a docstring: a docstring would become the operation's public OpenAPI description.)
    raw = (await request.body()).decode("utf-8", errors="replace")
    settings: Settings = request.app.state.settings

    def check() -> SchemaCheck:
        declared = _parse_schema(raw)
        _check_dimension(declared, settings)
        return SchemaCheck(valid=True, d=declared.dimension, feature_names=declared.feature_names,
                           row_norm_bound=declared.row_norm_bound, label_bound=declared.label_bound)  # fmt: skip

    return await run_in_threadpool(check)


@router.get("/duplicates", response_model=list[DuplicateGroup], response_model_by_alias=True,
            summary="Groups of live datasets with the same content (owners: their own; admins: all), one page at a "
            "time",
            responses={**paged(), **problem_responses(401, 403, 422, 503)})  # fmt: skip
def list_duplicates(
    request: Request,
    response: Response,
    paging: Paging,
    principal: Principal = Depends(require_role("owner", "admin")),  # noqa: B008
) -> list[DuplicateGroup]:
    """Live datasets sharing one encoded content (each with its own budget), oldest first in each group. Content
    hashes are private to owners and admins, so analysts cannot call this; an owner sees only their datasets. The
    groups come in the order of their oldest member, paged by `limit` (groups per page) and `cursor`."""
    keyset: Keyset[list[DatasetOut]] = Keyset(paging, ("duplicates",))
    shared = select(Dataset.storage_key).where(Dataset.deleted_at.is_(None), Dataset.storage_key.is_not(None))
    if principal.role != "admin":
        shared = shared.where(Dataset.owner_key_id == principal.key_id)
    shared = shared.group_by(Dataset.storage_key).having(func.count() > 1)
    query = select(Dataset).where(Dataset.storage_key.in_(shared), Dataset.deleted_at.is_(None))
    if principal.role != "admin":
        query = query.where(Dataset.owner_key_id == principal.key_id)
    groups: dict[str, list[DatasetOut]] = {}
    with request.app.state.db.read() as session:
        for dataset in session.execute(query.order_by(Dataset.created_at, Dataset.id)).scalars():
            groups.setdefault(str(dataset.storage_key), []).append(_out(dataset, principal))
    # grouped here, from the live datasets sharing a content (few: each is a deliberate duplicate upload)
    ordered = sorted(groups.values(), key=lambda members: (utc(members[0].created_at), members[0].id))
    page, cursor = keyset.page([m for m in ordered if keyset.follows((m[0].created_at, m[0].id))],
                               lambda members: (members[0].created_at, members[0].id))  # fmt: skip
    link_next(request, response, cursor)
    return [DuplicateGroup(content_hash=members[0].content_hash, count=len(members), datasets=members)
            for members in page]  # fmt: skip


@router.get("", response_model=list[DatasetOut], response_model_by_alias=True,
            summary="Live datasets visible to the caller, oldest first, one page at a time",
            responses={**paged(), **problem_responses(401, 422, 503)})  # fmt: skip
def list_datasets(request: Request, response: Response, paging: Paging,
                  principal: Principal = Depends(current_principal)) -> list[DatasetOut]:  # noqa: B008  # fmt: skip
    """An owner's datasets, those granted to an analyst, every one to admins; deleted datasets are left out. Paged
    by `limit` and `cursor`: the next page is in the `Link` header (rel="next"), absent on the last page."""
    keyset: Keyset[Dataset] = Keyset(paging, ("datasets",))
    query = select(Dataset).where(Dataset.deleted_at.is_(None))
    if principal.role != "admin":
        granted = select(DatasetGrant.dataset_id).where(DatasetGrant.api_key_id == principal.key_id)
        query = query.where(or_(Dataset.owner_key_id == principal.key_id, Dataset.id.in_(granted)))
    with request.app.state.db.read() as session:
        rows = session.execute(keyset.select(query, Dataset.created_at, Dataset.id)).scalars().all()
        datasets, cursor = keyset.page(rows, lambda dataset: (dataset.created_at, dataset.id))
        listed = [_out(dataset, principal) for dataset in datasets]
    link_next(request, response, cursor)
    return listed


DatasetId = Annotated[str, id_path("dataset")]


@router.get("/{dataset_id:id}", response_model=DatasetOut, response_model_by_alias=True, summary="Public metadata",
            responses=problem_responses(401, 404, 503))  # fmt: skip
def get_dataset(
    dataset_id: DatasetId,
    request: Request,
    principal: Principal = Depends(current_principal),  # noqa: B008
) -> DatasetOut:
    return _out(visible_dataset(request.app.state.db, dataset_id, principal), principal)


@router.delete("/{dataset_id:id}", status_code=204, response_class=Response,
               summary="Purge the data, cancel its fits (the ledger is kept)",
               responses=problem_responses(401, 403, 404, 503))  # fmt: skip
def delete_dataset(
    dataset_id: DatasetId,
    request: Request,
    principal: Principal = Depends(current_principal),  # noqa: B008
) -> Response:
    """Mark the dataset deleted, cancel its queued fits (their reservations are released: they never read a row),
    ask its running fits to stop, and purge its data unless a live dataset or a pending upload shares it. Its
    ledger, budget and fits stay readable by its owner and admins; new fits and predictions are refused (410)."""
    db = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, manage=True)
    with db.write() as session:
        row = session.get(Dataset, dataset.id, with_for_update=True)
        if row is None or row.deleted_at is not None:  # deleted meanwhile by a concurrent request
            raise dataset_not_found(dataset_id)
        row.deleted_at = utcnow()
        key, row.storage_key = row.storage_key, None
        validation_key, row.validation_storage_key = row.validation_storage_key, None
    with db.read() as session:
        active = list(session.scalars(
            select(Job.id).where(Job.dataset_id == dataset.id, Job.status.in_(("queued", "running")))
        ))  # fmt: skip
    for job_id in active:  # a job claimed meanwhile finds the dataset deleted and fails before reading, refunded
        cancel(db, job_id)
    design_cache().forget({(dataset.id, key)})  # this process's shared design of the rows (workers: before a job)
    _purge_if_unreferenced(request, key)
    _purge_if_unreferenced(request, validation_key)
    return Response(status_code=204)


@router.post("/{dataset_id:id}/grants", status_code=201, response_model=GrantCreated,
             summary="Let an analyst key fit this dataset (owner)",
             responses=problem_responses(400, 401, 403, 404, 413, 422, 503))  # fmt: skip
def grant(dataset_id: DatasetId, body: GrantRequest, request: Request,
          principal: Principal = Depends(current_principal)) -> GrantCreated:  # noqa: B008  # fmt: skip
    db = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, manage=True)
    with db.write() as session:
        key = session.get(ApiKey, body.api_key_id)
        if key is None or key.role != "analyst" or key.revoked_at is not None:
            raise Problem(422, "Invalid grant", "api_key_id must be the id of an analyst key that is not revoked",
                          field="api_key_id")  # fmt: skip
        exists = session.execute(
            select(DatasetGrant.id).where(DatasetGrant.dataset_id == dataset.id, DatasetGrant.api_key_id == key.id)
        ).first()
        if exists is None:
            session.add(DatasetGrant(dataset_id=dataset.id, api_key_id=key.id))
    return GrantCreated(dataset_id=dataset.id, api_key_id=body.api_key_id)


@router.get("/{dataset_id:id}/grants", response_model=list[GrantOut],
            summary="The analyst keys granted this dataset, oldest first, one page at a time (owner)",
            responses={**paged(), **problem_responses(401, 403, 404, 422, 503)})  # fmt: skip
def list_grants(dataset_id: DatasetId, request: Request, response: Response, paging: Paging,
                principal: Principal = Depends(current_principal)) -> list[GrantOut]:  # noqa: B008  # fmt: skip
    keyset: Keyset[Any] = Keyset(paging, ("grants", dataset_id), integer_ids=True)
    db = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, manage=True)
    with db.read() as session:
        fetched = session.execute(keyset.select(
            select(DatasetGrant, ApiKey.revoked_at, ApiKey.name).join(ApiKey, ApiKey.id == DatasetGrant.api_key_id)
            .where(DatasetGrant.dataset_id == dataset.id), DatasetGrant.created_at, DatasetGrant.id,
        )).all()  # fmt: skip
    rows, cursor = keyset.page(fetched, lambda row: (row[0].created_at, row[0].id))
    link_next(request, response, cursor)
    return [
        GrantOut(
            dataset_id=row.dataset_id,
            api_key_id=row.api_key_id,
            api_key_name=name or "",
            created_at=row.created_at,
            key_revoked=revoked_at is not None,
        )
        for row, revoked_at, name in rows
    ]


@router.delete("/{dataset_id:id}/grants/{api_key_id:id}", status_code=204, response_class=Response,
               summary="Revoke an analyst's grant (owner): its queued fits on the dataset are cancelled",
               responses=problem_responses(401, 403, 404, 503))  # fmt: skip
def revoke_grant(
    dataset_id: DatasetId,
    request: Request,
    api_key_id: str = id_path("analyst key"),
    principal: Principal = Depends(current_principal),  # noqa: B008
) -> Response:
    """Revoke the grant: the analyst can no longer see, estimate or fit the dataset, from its next request on.
    Its queued fits on the dataset are cancelled (reservations released) and its running ones asked to stop (a
    fit that read rows keeps its charge); its finished fits stay readable to it."""
    db = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, manage=True)
    if not is_resource_id(api_key_id):
        raise grant_not_found(dataset_id, api_key_id)
    grantee = normalize_id(api_key_id)
    with db.write() as session:  # the row lock orders this against fits being admitted under the grant (auth.py)
        removed = session.execute(
            delete(DatasetGrant)
            .where(DatasetGrant.dataset_id == dataset.id, DatasetGrant.api_key_id == grantee)
            .returning(DatasetGrant.id)
        ).first()
    if removed is None:
        raise grant_not_found(dataset_id, api_key_id)
    with db.read() as session:
        active = list(session.scalars(select(Job.id).where(
            Job.dataset_id == dataset.id, Job.api_key_id == grantee, Job.status.in_(("queued", "running"))
        )))  # fmt: skip
    for job_id in active:
        cancel(db, job_id)
    log.info("grant revoked", extra={"dataset_id": dataset.id, "api_key_id": grantee, "cancelled_fits": len(active)})
    return Response(status_code=204)


@router.get(
    "/{dataset_id:id}/budget",
    response_model=BudgetOut,
    response_model_exclude_unset=True,
    summary="Budget limits and privacy filter, charged / reserved / committed / remaining ε as the filter measures "
    "them, δ parts and, with ?include=rdp, the committed RDP curve",
    responses=problem_responses(401, 404, 422, 503),
)
def budget(
    dataset_id: DatasetId,
    request: Request,
    include: RdpInclude,
    principal: Principal = Depends(current_principal),  # noqa: B008
) -> Any:
    db = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, include_deleted=True)
    with db.read() as session:
        view = status(session, dataset.id)
    own = allocations_of(db, dataset.id, principal.key_id)
    return lean_budget(public_json({"dataset_id": dataset.id, **asdict(view), "allocation": own[0] if own else None}),
                       include)  # fmt: skip


#: What a granted analyst's ledger view leaves out of each entry: a counter global to the server (``id``), the
#: budget's entry counter (``budget_version``) and the dataset's running total (``committed_epsilon_after``). Each
#: counts or sums every entry up to this one, so its steps between two of the analyst's entries would show what other
#: keys did in between; the current totals stay in ``GET …/budget``.
RUNNING_FIELDS = frozenset({"id", "budget_version", "committed_epsilon_after"})


def _own_entries(key_id: str) -> ColumnElement[bool]:
    """The ledger entries of a budget that are a granted analyst's own: those of its fits and its evaluations, and
    the preprocessing's (the owner's public set-up at each upload, nobody's later activity). An entry of any other
    subject — another key's, or of a kind added later — stays out unless added here."""
    return or_(spent_by(key_id), LedgerEntry.preprocessing_dataset_id.is_not(None))


def _entry_json(entry: LedgerEntry, hidden: Collection[str]) -> dict[str, Any]:
    """A ledger entry's document (with its curve: :func:`lean_entry` drops it unless asked for), without ``hidden``."""
    document = {
        "id": entry.id,
        "job_id": entry.job_id,
        "evaluation_id": entry.evaluation_id,
        "preprocessing_dataset_id": entry.preprocessing_dataset_id,
        "kind": entry.kind,
        "epsilon": entry.epsilon,
        "optimal_order": entry.optimal_order,
        "extra_delta": entry.extra_delta,
        "approx_delta": entry.approx_delta,
        "pure_epsilon": entry.pure_epsilon,
        "gdp_mu_squared": entry.gdp_mu_squared,
        "committed_epsilon_after": entry.committed_epsilon_after,
        "grid": entry.grid_name,
        "formula_version": entry.formula_version,
        "budget_version": entry.budget_version,
        "description": entry.description,
        "created_at": entry.created_at,
        "rdp": entry.rdp,
    }
    return {name: value for name, value in document.items() if name not in hidden}


@router.get("/{dataset_id:id}/ledger", response_model=LedgerPage, response_model_exclude_unset=True,
            summary="Ledger entries, oldest first (paginated): all of them to the owner and admins, a granted "
            "analyst's own and the preprocessing's to the analyst",
            responses={**paged("One page of entries; `total` counts them all."),
                       **problem_responses(401, 404, 422, 503)})  # fmt: skip
def ledger(
    dataset_id: DatasetId,
    request: Request,
    response: Response,
    include: RdpInclude,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=2**31 - 1),
    principal: Principal = Depends(current_principal),  # noqa: B008
) -> Any:
    """The dataset's owner and admins read every entry (`view: all`). A granted analyst reads its own view
    (`view: own`): the entries of its own fits and evaluations and the preprocessing's, counted by `total` and paged
    by `limit`/`offset` alone, each without `id`, `budget_version` and `committed_epsilon_after` — nothing of other
    keys' activity beyond the totals `GET …/budget` shows (docs/privacy.md, "Who sees what in a ledger")."""
    db = request.app.state.db
    dataset = visible_dataset(db, dataset_id, principal, include_deleted=True)
    dataset_id = dataset.id
    sees_all = privileged(principal, dataset)
    shown = LedgerEntry.dataset_id == dataset.domain_id  # the budget it spends: its privacy domain's
    if not sees_all:
        shown = and_(shown, _own_entries(principal.key_id))
    hidden = frozenset() if sees_all else RUNNING_FIELDS
    with db.read() as session:
        total = session.scalar(select(func.count()).select_from(LedgerEntry).where(shown))
        rows = session.execute(
            select(LedgerEntry).where(shown).order_by(LedgerEntry.id).limit(limit).offset(offset)
        ).scalars()
        entries = [lean_entry(_entry_json(row, hidden), include) for row in rows]
    if entries and offset + len(entries) < (total or 0):
        link_next(request, response, None, offset=offset + len(entries))
    page = {"dataset_id": dataset_id, "view": "all" if sees_all else "own", "total": total, "limit": limit,
            "offset": offset, "entries": entries}  # fmt: skip
    return public_json(page)

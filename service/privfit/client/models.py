"""Typed views of the v1 API's JSON answers.

Each is a frozen dataclass built by :meth:`ApiObject.from_json`: the documented members become attributes
(timestamps as :class:`datetime`, ``null`` RDP entries and ``null`` unbounded ε values as ``math.inf``), and the
whole answer stays in ``raw`` so that members a newer server adds are never lost.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any, ClassVar, Generic, Self, TypeVar

FINISHED_STATUSES = frozenset({"succeeded", "failed", "cancelled"})


def _timestamp(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _curve(values: Any) -> list[float] | None:
    """An RDP curve: JSON ``null`` stands for +∞ (an order at which the mechanism has no finite bound)."""
    if values is None:
        return None
    return [math.inf if v is None else float(v) for v in values]


@dataclass(frozen=True)
class ApiObject:
    """Base of the typed answers: ``from_json`` fills the declared fields, ``raw`` keeps the full answer."""

    raw: dict[str, Any] = field(repr=False, compare=False)

    _timestamps: ClassVar[tuple[str, ...]] = ()
    _curves: ClassVar[tuple[str, ...]] = ()
    #: members where JSON ``null`` means +∞ (no bound: an ε or a share the filter cannot certify)
    _unbounded: ClassVar[tuple[str, ...]] = ()
    _nested: ClassVar[dict[str, type[ApiObject]]] = {}
    _nested_lists: ClassVar[dict[str, type[ApiObject]]] = {}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        values: dict[str, Any] = {"raw": data}
        for spec in fields(cls):
            if spec.name == "raw" or spec.name not in data:
                continue
            value = data[spec.name]
            if spec.name in cls._timestamps:
                value = _timestamp(value)
            elif spec.name in cls._curves:
                value = _curve(value)
            elif spec.name in cls._unbounded:
                value = math.inf if value is None else value
            elif spec.name in cls._nested and value is not None:
                value = cls._nested[spec.name].from_json(value)
            elif spec.name in cls._nested_lists and value is not None:
                value = [cls._nested_lists[spec.name].from_json(item) for item in value]
            values[spec.name] = value
        return cls(**values)


@dataclass(frozen=True)
class Me(ApiObject):
    """``GET /v1/me``: the caller's key."""

    key_id: str = ""
    role: str = ""
    name: str = ""


@dataclass(frozen=True)
class CreatedKey(ApiObject):
    """``POST /v1/keys``: a new key; ``key`` is shown only this once."""

    key_id: str = ""
    role: str = ""
    name: str = ""
    key: str = ""


@dataclass(frozen=True)
class ApiKeyInfo(ApiObject):
    """``GET /v1/keys`` (admins): a key without its secret; ``revoked_at`` is set once it was revoked."""

    _timestamps: ClassVar[tuple[str, ...]] = ("created_at", "revoked_at")

    key_id: str = ""
    prefix: str = ""
    role: str = ""
    name: str = ""
    created_at: datetime | None = None
    revoked_at: datetime | None = None

    @property
    def id(self) -> str:
        return self.key_id

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


@dataclass(frozen=True)
class Grant(ApiObject):
    """``GET /v1/datasets/{id}/grants`` (owners, admins): an analyst key's grant on a dataset."""

    _timestamps: ClassVar[tuple[str, ...]] = ("created_at",)

    dataset_id: str = ""
    api_key_id: str = ""
    api_key_name: str = ""
    created_at: datetime | None = None
    key_revoked: bool = False


@dataclass(frozen=True)
class Dataset(ApiObject):
    """A dataset's public metadata (never row values)."""

    _timestamps: ClassVar[tuple[str, ...]] = ("created_at",)

    id: str = ""
    name: str = ""
    n: int = 0
    n_validation: int = 0
    validation_fraction: float | None = None
    d: int = 0
    feature_names: list[str] = field(default_factory=list)
    row_norm_bound: float = 0.0
    label_bound: float = 0.0
    schema: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    owner_key_id: str = ""
    #: the id of the dataset whose budget this one spends: its own, unless it was registered into that dataset's
    #: privacy domain (one budget for the same people)
    privacy_domain: str = ""
    content_hash: str | None = None
    #: in an upload's answer only (its owner): per numeric column, the cells clipped to the declared bounds
    clipped_cells: dict[str, int] | None = None
    #: private preprocessing at upload: its share and ε, and per measured column the released counts and the
    #: encoding derived from them (None: opted out or nothing to measure)
    preprocessing: dict[str, Any] | None = None
    #: user-level privacy: ``{"column", "max_rows", "units"}`` (and ``rows_dropped`` in an upload's answer); None
    #: when one row is one person. ``n`` is then the number of units.
    privacy_unit: dict[str, Any] | None = None


@dataclass(frozen=True)
class Allocation(ApiObject):
    """An analyst key's allocation: the share (``epsilon_max``, ``delta_max``) of a dataset's budget its owner gave
    it (``PUT|GET /v1/datasets/{id}/allocations``), with the charged / reserved / committed ε of that analyst's own
    fits on the dataset as the allocation's privacy filter measures them, and ``remaining_epsilon``, what it has left.
    ``closed_reason`` is set when the allocation admits nothing more (it was set over more than it admits)."""

    _timestamps: ClassVar[tuple[str, ...]] = ("created_at",)
    _unbounded: ClassVar[tuple[str, ...]] = (
        "charged_epsilon", "reserved_epsilon", "committed_epsilon", "committed_share",
    )  # fmt: skip

    dataset_id: str = ""
    api_key_id: str = ""
    api_key_name: str = ""
    epsilon_max: float = 0.0
    delta_max: float = 0.0
    charged_epsilon: float = 0.0
    reserved_epsilon: float = 0.0
    committed_epsilon: float = 0.0
    committed_share: float = 0.0
    remaining_epsilon: float = 0.0
    closed_reason: str | None = None
    created_at: datetime | None = None


@dataclass(frozen=True)
class Budget(ApiObject):
    """``GET /v1/datasets/{id}/budget``: limits and privacy filter, charged / reserved / committed / remaining ε as
    the filter measures them (``measure`` says how) and δ parts; ``orders`` and ``committed_rdp`` (the grid and the
    committed curve) only when requested (``Client.budget(..., rdp=True)``), else None. ``allocation`` is the
    caller's own :class:`Allocation` of this budget (None: it has none, and spends from the dataset's budget alone).
    ``committed_certificate`` is ``"order"``, ``"pure"`` or ``"gaussian"``: the filter's certificate that measures
    the committed fits; the Gaussian-DP certificate's share and Σμ² are +∞ when it does not apply (some committed fit
    is not Gaussian, the filter has none — ``filter["gdp_delta"]`` is 0 —, or the server predates it)."""

    _nested: ClassVar[dict[str, type[ApiObject]]] = {"allocation": Allocation}
    _curves: ClassVar[tuple[str, ...]] = ("committed_rdp",)
    _unbounded: ClassVar[tuple[str, ...]] = (
        "charged_epsilon", "reserved_epsilon", "committed_epsilon", "committed_share", "committed_order_share",
        "committed_pure_share", "committed_gdp_share", "committed_pure_epsilon", "committed_gdp_mu_squared",
    )  # fmt: skip

    dataset_id: str = ""
    epsilon_max: float = 0.0
    delta_max: float = 0.0
    grid_name: str = ""
    orders: list[float] | None = None
    filter: dict[str, Any] = field(default_factory=dict)
    charged_epsilon: float = 0.0
    reserved_epsilon: float = 0.0
    committed_epsilon: float = 0.0
    committed_share: float = 0.0
    committed_certificate: str | None = None
    committed_certifying_order: float | None = None
    committed_order_share: float = 0.0
    committed_pure_share: float = 0.0
    committed_gdp_share: float = math.inf
    remaining_epsilon: float = 0.0
    committed_rdp: list[float] | None = None
    committed_extra_delta: float = 0.0
    committed_approx_delta: float = 0.0
    committed_pure_epsilon: float = 0.0
    committed_gdp_mu_squared: float = math.inf
    committed_delta_used: float = 0.0
    entries: int = 0
    closed_reason: str | None = None
    measure: str = ""
    allocation: Allocation | None = None


@dataclass(frozen=True)
class LedgerEntry(ApiObject):
    """One ledger row: a reservation, the charge that settles it, or a release (cancelled while queued, or the
    refund of a fit that never read a row). ``committed_epsilon_after`` is the filter's measure.

    ``id``, ``committed_epsilon_after`` and ``budget_version`` are None in a granted analyst's view (the page's
    ``view`` is ``"own"``): the server leaves out what counts or sums the other keys' entries."""

    _timestamps: ClassVar[tuple[str, ...]] = ("created_at",)
    _curves: ClassVar[tuple[str, ...]] = ("rdp",)
    _unbounded: ClassVar[tuple[str, ...]] = ("epsilon", "pure_epsilon", "gdp_mu_squared", "committed_epsilon_after")

    id: int | None = None
    job_id: str | None = None
    evaluation_id: str | None = None
    preprocessing_dataset_id: str | None = None
    kind: str = ""
    epsilon: float = 0.0
    optimal_order: float | None = None
    extra_delta: float = 0.0
    approx_delta: float = 0.0
    pure_epsilon: float = math.inf
    gdp_mu_squared: float = math.inf
    committed_epsilon_after: float | None = None
    budget_version: int | None = None
    description: str = ""
    created_at: datetime | None = None
    rdp: list[float] | None = None


@dataclass(frozen=True)
class LedgerPage(ApiObject):
    """``GET /v1/datasets/{id}/ledger``: one page of entries, oldest first. ``view`` is ``"all"`` (the dataset's
    owner or an admin: every entry) or ``"own"`` (a granted analyst: its own fits' and evaluations' entries and the
    preprocessing's, without the running fields); ``total`` counts the entries of that view."""

    _nested_lists: ClassVar[dict[str, type[ApiObject]]] = {"entries": LedgerEntry}

    dataset_id: str = ""
    view: str = ""
    total: int = 0
    limit: int = 0
    offset: int = 0
    entries: list[LedgerEntry] = field(default_factory=list)


@dataclass(frozen=True)
class Cost(ApiObject):
    """A fit's exact privacy cost: its own ε at the dataset's δ (this fit alone), the order, δ parts, pure bound and
    Gaussian-DP μ² (+∞: none), ``filter_epsilon``: the part of the dataset's ε budget it uses by the filter's measure
    (``filter_certificate``: ``"order"``, ``"pure"`` or ``"gaussian"``), and its RDP curve ``rdp`` only when
    requested (``rdp=True``; else None)."""

    _curves: ClassVar[tuple[str, ...]] = ("rdp",)
    _unbounded: ClassVar[tuple[str, ...]] = ("epsilon", "pure_epsilon", "gdp_mu_squared", "filter_epsilon",
                                             "filter_share")  # fmt: skip

    epsilon: float = 0.0
    delta: float = 0.0
    optimal_order: float | None = None
    filter_epsilon: float = 0.0
    filter_share: float = 0.0
    filter_certificate: str | None = None
    at_grid_edge: bool = False
    grid: str = ""
    extra_delta: float = 0.0
    approx_delta: float = 0.0
    pure_epsilon: float = math.inf
    gdp_mu_squared: float = math.inf
    rdp: list[float] | None = None
    formula_version: str = ""


@dataclass(frozen=True)
class FitPrivacy(Cost):
    """``GET /v1/fits/{id}/privacy``: a fit's whole cost, its RDP curve ``rdp`` included (+∞ where the mechanism
    has no finite bound), with ``orders``, the grid's orders α, one per entry of ``rdp``."""

    fit_id: str = ""
    orders: list[float] | None = None


@dataclass(frozen=True)
class Outlook(ApiObject):
    """How noise-dominated a fit is expected to be, from its public settings only (docs/solvers.md, "What to expect:
    the noise outlook"): the expected norm of the noise in the released parameters against their public radius,
    ``ratio`` = noise_norm / radius, ``level`` low | moderate | high and, when high, a ``warning`` that the fit is
    likely no better than a constant model."""

    noise_norm: float = 0.0
    radius: float = 0.0
    ratio: float = 0.0
    level: str = ""
    warning: str | None = None

    def describe(self) -> str:
        """The level and the ratio in a few words, e.g. ``high (noise/radius = 1.7)``."""
        return f"{self.level} (noise/radius = {self.ratio:.3g})"


@dataclass(frozen=True)
class AllocationEstimate(ApiObject):
    """The ``allocation`` of an estimate: what the fit (or evaluation) would do to the caller's :class:`Allocation`
    — its filter's measure of the caller's own committed fits before and after it, what would remain of it, and
    whether that filter admits it."""

    _unbounded: ClassVar[tuple[str, ...]] = (
        "committed_epsilon_before", "committed_epsilon_after", "remaining_epsilon_after",
    )  # fmt: skip

    epsilon_max: float = 0.0
    delta_max: float = 0.0
    committed_epsilon_before: float = 0.0
    committed_epsilon_after: float = 0.0
    remaining_epsilon_after: float = 0.0
    admissible: bool = False


@dataclass(frozen=True)
class Estimate(ApiObject):
    """``POST /v1/fits/estimate``: what a proposed fit would cost and what would remain (the filter's measure);
    nothing is charged. ``refusal_reason``: ``epsilon``, ``delta`` (δ pot) or ``closed`` when the dataset's filter
    refuses it, ``allocation`` when only the caller's allocation does. ``max_admissible_epsilon``: the largest target
    ε the filters would admit now for the same solver, model and parameters (rounded down to 4 significant digits; 0
    when none; None from a server that does not state it). ``allocation``: what the fit would do to the caller's
    allocation (None: it has none)."""

    _nested: ClassVar[dict[str, type[ApiObject]]] = {"cost": Cost, "outlook": Outlook, "allocation": AllocationEstimate}
    _unbounded: ClassVar[tuple[str, ...]] = ("epsilon", "committed_epsilon_before", "committed_epsilon_after")

    dataset_id: str = ""
    cost: Cost | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    epsilon: float = 0.0
    optimal_order: float | None = None
    committed_epsilon_before: float = 0.0
    committed_epsilon_after: float = 0.0
    remaining_epsilon_after: float = 0.0
    admissible: bool = False
    refusal_reason: str | None = None
    delta_used_after: float = 0.0
    certificate_after: str | None = None
    measure: str = ""
    epsilon_max: float = 0.0
    outlook: Outlook | None = None
    max_admissible_epsilon: float | None = None
    allocation: AllocationEstimate | None = None


@dataclass(frozen=True)
class FitResult(ApiObject):
    """A succeeded fit's release: the parameters and data-independent metadata."""

    solver: str = ""
    model: str = ""
    coefficients: list[float] | list[list[float]] = field(default_factory=list)
    intercept: float | list[float] | None = None
    feature_names: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    predictor: bool = True
    classes: list[str] | None = None
    #: ``solver: "auto"`` only: the candidate whose model this is (``{"solver": ..., "resolved": {...}}``), part
    #: of the release; None for every other solver.
    selected: dict[str, Any] | None = None
    #: The schema of the fit's dataset (``Dataset.schema``), attached by :meth:`Client.fit_result
    #: <privfit.client._client.Client.fit_result>`; not part of the API's answer. :meth:`to_sklearn` encodes with it
    #: when given no schema.
    _dataset_schema: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def multiclass(self) -> bool:
        """A multinomial fit of a categorical label: ``coefficients`` is a k × d matrix (one row per class in
        ``classes``) and ``intercept`` a list of k numbers."""
        return self.classes is not None

    def coefficient_table(self) -> dict[str, float]:
        """Coefficients by feature name (positional names when the fit has none); for a multiclass fit, use
        :meth:`coefficient_matrix`."""
        if self.multiclass:
            raise ValueError("a multiclass fit has one coefficient per class and feature: use coefficient_matrix()")
        names = self.feature_names or [f"x{i}" for i in range(len(self.coefficients))]
        return dict(zip(names, self.coefficients, strict=True))  # type: ignore[arg-type]

    def coefficient_matrix(self) -> dict[str, dict[str, float]]:
        """Coefficients of a multiclass fit by feature name, then class name (``(intercept)`` last when fitted):
        ``{"alcohol": {"3": -0.4, …, "9": 1.2}, …}`` — a table with the classes as columns."""
        if not self.multiclass or self.classes is None:
            raise ValueError("coefficient_matrix() is for multiclass fits: use coefficient_table()")
        rows = [list(map(float, row)) for row in self.coefficients]  # type: ignore[arg-type]
        d = len(rows[0]) if rows else 0
        names = self.feature_names or [f"x{i}" for i in range(d)]
        table = {name: {c: rows[j][i] for j, c in enumerate(self.classes)} for i, name in enumerate(names)}
        if isinstance(self.intercept, list):
            table["(intercept)"] = {c: float(b) for c, b in zip(self.classes, self.intercept, strict=True)}
        return table

    def to_sklearn(self, schema: Any = None, *, unknown_category: str = "error") -> Any:
        """The release as a fitted scikit-learn ``Pipeline`` (the dataset's encoding as a ``ColumnTransformer``, then
        the model with these coefficients) whose ``predict`` / ``predict_proba`` / ``decision_function`` on a pandas
        DataFrame of raw columns give ``/predict``'s predictions / probabilities / scores
        (:func:`privfit.client.sklearn_export.to_sklearn`; needs the ``sklearn`` extra).

        ``schema``: the dataset's schema as ``GET /v1/datasets/{id}`` answers it (``client.dataset(fit.dataset_id)
        .schema``, with the transforms derived by private preprocessing), or that ``Dataset``; by default the one
        :meth:`Client.fit_result <privfit.client._client.Client.fit_result>` attached. ``unknown_category="ignore"``
        encodes an undeclared categorical level as an all-zero block instead of raising."""
        from .sklearn_export import to_sklearn

        document = self._dataset_schema if schema is None else schema
        if document is None:
            raise ValueError(
                "to_sklearn() needs the schema of the fit's dataset: pass client.dataset(fit.dataset_id).schema, "
                "or get the result with client.fit_result(fit_id), which attaches it"
            )
        return to_sklearn(self, document, unknown_category=unknown_category)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Fit(ApiObject):
    """A fit job: its status, data-independent progress, cost and, once succeeded, its result."""

    _timestamps: ClassVar[tuple[str, ...]] = ("created_at", "started_at", "finished_at")
    _nested: ClassVar[dict[str, type[ApiObject]]] = {"cost": Cost, "result": FitResult, "outlook": Outlook}

    id: str = ""
    dataset_id: str = ""
    solver: str = ""
    model: str = ""
    status: str = ""
    progress: float = 0.0
    cancel_requested: bool = False
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    cost: Cost | None = None
    result: FitResult | None = None
    error: dict[str, Any] | None = None
    outlook: Outlook | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """The fit, with its result's ``metadata`` whole: an API answer lists in it only what the release adds to
        ``settings`` (unless asked for ``include=metadata``), and the whole metadata is ``settings`` overlaid with
        it. ``raw`` keeps the answer as sent."""
        fit = super().from_json(data)
        if fit.result is None or not fit.settings:
            return fit
        return replace(fit, result=replace(fit.result, metadata={**fit.settings, **fit.result.metadata}))

    @property
    def finished(self) -> bool:
        """Succeeded, failed or cancelled: the status will not change again."""
        return self.status in FINISHED_STATUSES


@dataclass(frozen=True)
class MetricResult(ApiObject):
    """One privately released metric: the noisy ``value``, its ``interval`` at level ``confidence`` (it accounts for
    the noise; the validation rows are fixed), and its mechanism: ``noise`` of ``scale`` on a sum of replace-one
    ``sensitivity``, costing ``epsilon`` (the share ``weight`` of the evaluation's ε)."""

    metric: str = ""
    value: float = 0.0
    interval: list[float] = field(default_factory=list)
    confidence: float = 0.0
    noise: str = ""
    scale: float = 0.0
    sensitivity: float = 0.0
    epsilon: float = 0.0
    weight: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class EvaluationEstimate(ApiObject):
    """``POST /v1/fits/{id}/evaluate/estimate``: what an evaluation would cost — each metric's share of ε and its
    Laplace noise (``metrics``: dicts with metric, epsilon, weight, noise, scale, sensitivity) — and whether the
    dataset's filter (and the caller's allocation, ``allocation``, if it has one) admits it; nothing is charged and no
    row is read."""

    _nested: ClassVar[dict[str, type[ApiObject]]] = {"cost": Cost, "allocation": AllocationEstimate}
    _unbounded: ClassVar[tuple[str, ...]] = ("epsilon", "committed_epsilon_before", "committed_epsilon_after")

    fit_id: str = ""
    dataset_id: str = ""
    n_validation: int = 0
    metrics: list[dict[str, Any]] = field(default_factory=list)
    cost: Cost | None = None
    epsilon: float = 0.0
    committed_epsilon_before: float = 0.0
    committed_epsilon_after: float = 0.0
    remaining_epsilon_after: float = 0.0
    admissible: bool = False
    refusal_reason: str | None = None
    epsilon_max: float = 0.0
    allocation: AllocationEstimate | None = None


@dataclass(frozen=True)
class Evaluation(ApiObject):
    """``POST /v1/fits/{id}/evaluate``: a private evaluation of a fit on its dataset's validation rows, charged to
    the dataset's ledger; ``results`` once succeeded."""

    _timestamps: ClassVar[tuple[str, ...]] = ("created_at", "finished_at")
    _nested: ClassVar[dict[str, type[ApiObject]]] = {"cost": Cost}
    _nested_lists: ClassVar[dict[str, type[ApiObject]]] = {"results": MetricResult}

    id: str = ""
    fit_id: str = ""
    dataset_id: str = ""
    status: str = ""
    epsilon: float = 0.0
    confidence: float = 0.0
    metrics: list[str] = field(default_factory=list)
    n_validation: int = 0
    cost: Cost | None = None
    results: list[MetricResult] = field(default_factory=list)
    error: dict[str, Any] | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None

    def metric(self, name: str) -> MetricResult:
        """The released metric ``name`` (KeyError if it was not requested)."""
        for result in self.results:
            if result.metric == name:
                return result
        raise KeyError(name)


@dataclass(frozen=True)
class Prediction(ApiObject):
    """``POST /v1/fits/{id}/predict``: scores ⟨θ, x⟩ + b and decoded predictions, one per row; for a logistic fit
    also the class names ([negative, positive] for a binary label) and, per row, the class probabilities (for a
    multiclass fit the k logits are the scores)."""

    fit_id: str = ""
    n: int = 0
    scores: list[float] | list[list[float]] = field(default_factory=list)
    predictions: list[Any] = field(default_factory=list)
    classes: list[str] | None = None
    probabilities: list[list[float]] | None = None


@dataclass(frozen=True)
class SolverInfo(ApiObject):
    """``GET /v1/solvers``: a solver, the models it fits, its parameters' JSON schema and whether this server runs
    it (if not: why, and the setting that enables it, e.g. ``PRIVFIT_NOISE_SAMPLER=float``). A server older than
    these fields leaves ``available`` True."""

    name: str = ""
    description: str = ""
    models: list[str] = field(default_factory=list)
    formula_version: str = ""
    params_schema: dict[str, Any] = field(default_factory=dict)
    available: bool = True
    unavailable_reason: str | None = None
    enabled_by: str | None = None


Item = TypeVar("Item")


@dataclass(frozen=True)
class Page(Generic[Item]):
    """One page of a list endpoint (``Client.fits_page``, ``Client.datasets_page``): its ``items``, oldest first,
    and where the next page is — ``next``, the URL of the answer's ``Link: <…>; rel="next"`` header, and ``cursor``,
    the opaque cursor in it (pass it as ``cursor=`` for the next page) — both None on the last page. Iterating a page
    iterates its items."""

    items: list[Item] = field(default_factory=list)
    next: str | None = None
    cursor: str | None = None

    def __iter__(self) -> Iterator[Item]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

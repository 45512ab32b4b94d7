"""privfit's Python client: ``Client(url, api_key)`` with a typed method for every v1 endpoint, and
``AsyncClient(url, api_key)`` with the same methods for asyncio (both drive the plans of :mod:`privfit.client._plans`).

Errors are typed exceptions carrying the server's problem+json (:mod:`privfit.client.errors`); answers are typed
dataclasses (:mod:`privfit.client.models`). The ``privfit`` command's client commands
(:mod:`privfit.client.cli`) are built on it.

``Client``, ``AsyncClient`` and the errors of dataset names (:class:`~privfit.client._plans.UnknownDatasetNameError`,
:class:`~privfit.client._plans.AmbiguousDatasetNameError`) live in modules that import httpx: they are
imported on first use (:func:`__getattr__`), so that ``import privfit.client.cli`` for ``privfit --help`` loads only
the standard library (the other errors and the models are plain classes and dataclasses).
"""

from typing import TYPE_CHECKING, Any

from .errors import (
    ApiError,
    AuthenticationError,
    BadRequestError,
    BudgetExceededError,
    ConflictError,
    FitFailedError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PrivfitError,
    RateLimitedError,
    ServerError,
    TransportError,
    WaitTimeoutError,
)
from .models import (
    Allocation,
    AllocationEstimate,
    ApiKeyInfo,
    Budget,
    Cost,
    Dataset,
    Estimate,
    Evaluation,
    EvaluationEstimate,
    Fit,
    FitPrivacy,
    FitResult,
    Grant,
    LedgerEntry,
    LedgerPage,
    Me,
    MetricResult,
    Outlook,
    Page,
    Prediction,
    SolverInfo,
)

if TYPE_CHECKING:
    from ._async import AsyncClient
    from ._client import Client
    from ._plans import AmbiguousDatasetNameError, UnknownDatasetNameError

#: The lazily imported members, by the module that defines them.
_LAZY = {"AmbiguousDatasetNameError": "_plans", "AsyncClient": "_async", "Client": "_client",
         "UnknownDatasetNameError": "_plans"}  # fmt: skip


def __getattr__(name: str) -> Any:
    """The clients and the errors of dataset names on first access (PEP 562): their modules import httpx, which a
    bare ``privfit --help`` never needs."""
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Allocation",
    "AllocationEstimate",
    "AmbiguousDatasetNameError",
    "ApiError",
    "ApiKeyInfo",
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "Budget",
    "BudgetExceededError",
    "Client",
    "ConflictError",
    "Cost",
    "Dataset",
    "Estimate",
    "Evaluation",
    "EvaluationEstimate",
    "Fit",
    "FitFailedError",
    "FitPrivacy",
    "FitResult",
    "Grant",
    "InvalidRequestError",
    "LedgerEntry",
    "LedgerPage",
    "Me",
    "MetricResult",
    "NotFoundError",
    "Outlook",
    "Page",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "Prediction",
    "PrivfitError",
    "RateLimitedError",
    "ServerError",
    "SolverInfo",
    "TransportError",
    "UnknownDatasetNameError",
    "WaitTimeoutError",
]

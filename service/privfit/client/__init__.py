"""privfit's Python client: ``Client(url, api_key)`` with a typed method for every v1 endpoint.

Errors are typed exceptions carrying the server's problem+json (:mod:`privfit.client.errors`); answers are typed
dataclasses (:mod:`privfit.client.models`). The ``privfit`` command's client commands
(:mod:`privfit.client.cli`) are built on it.
"""

from ._client import Client
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
    ApiKeyInfo,
    Budget,
    Cost,
    Dataset,
    Estimate,
    Evaluation,
    Fit,
    FitResult,
    Grant,
    LedgerEntry,
    LedgerPage,
    Me,
    MetricResult,
    Outlook,
    Prediction,
    SolverInfo,
)

__all__ = [
    "ApiError",
    "ApiKeyInfo",
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
    "Fit",
    "FitFailedError",
    "FitResult",
    "Grant",
    "InvalidRequestError",
    "LedgerEntry",
    "LedgerPage",
    "Me",
    "MetricResult",
    "NotFoundError",
    "Outlook",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "Prediction",
    "PrivfitError",
    "RateLimitedError",
    "ServerError",
    "SolverInfo",
    "TransportError",
    "WaitTimeoutError",
]

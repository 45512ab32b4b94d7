"""The client's exceptions: every RFC 9457 problem+json answer becomes a typed :class:`ApiError` subclass.

The server's ``title`` and ``detail`` are kept verbatim (``str(error)`` is ``"409 Privacy budget exceeded: …"``),
and every other member of the problem document (``remaining_epsilon``, ``parameter``, ``column``, ``line``,
``errors``, …) is available in :attr:`ApiError.problem`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Fit


class PrivfitError(Exception):
    """Base class of everything the client raises."""


class TransportError(PrivfitError):
    """The server could not be reached (connection refused, DNS, timeout) after the allowed retries."""


class ApiError(PrivfitError):
    """The server answered with an error status; ``problem`` is its problem+json document."""

    status: int = 0

    def __init__(self, status: int, problem: dict[str, Any], *, method: str = "", url: str = "") -> None:
        self.status = status
        self.problem = problem
        self.title = str(problem.get("title") or "Error")
        self.detail = str(problem.get("detail") or "")
        self.method, self.url = method, url
        super().__init__(f"{status} {self.title}: {self.detail}" if self.detail else f"{status} {self.title}")


class BadRequestError(ApiError):
    """400: the request could not be read."""


class AuthenticationError(ApiError):
    """401: the API key is missing, malformed, unknown or revoked."""


class PermissionDeniedError(ApiError):
    """403: the key's role may not do this (e.g. an analyst uploading, or deleting someone else's dataset)."""


class NotFoundError(ApiError):
    """404: no such dataset or fit, or one this key may not see."""


class ConflictError(ApiError):
    """409: the request conflicts with the server's state (fit not finished, Idempotency-Key reused, …)."""


class BudgetExceededError(ConflictError):
    """409 "Privacy budget exceeded": the ledger refused the fit; nothing was charged. :attr:`scope` says whose
    privacy filter refused it: the dataset's, or the caller's allocation's (the numbers are then the allocation's)."""

    @property
    def scope(self) -> str:
        """``"dataset"`` when the dataset's privacy filter refused, ``"allocation"`` when the caller's allocation's
        filter did (its share of the dataset's budget: ``remaining_epsilon`` and the other numbers of the problem are
        then the allocation's). A server that does not state it has no allocations: ``"dataset"``."""
        return str(self.problem.get("scope") or "dataset")

    @property
    def remaining_epsilon(self) -> float | None:
        value = self.problem.get("remaining_epsilon")
        return None if value is None else float(value)

    @property
    def requested_epsilon(self) -> float | None:
        value = self.problem.get("requested_epsilon")
        return None if value is None else float(value)

    @property
    def max_admissible_epsilon(self) -> float | None:
        """The largest target ε the dataset's filter (and the caller's allocation's, if it has one) would admit now
        for the same solver, model and parameters (0 when none; None when the refusal does not state it, e.g. an
        evaluation's or an older server's)."""
        value = self.problem.get("max_admissible_epsilon")
        return None if value is None else float(value)


class PayloadTooLargeError(ApiError):
    """413: the upload is larger than the server accepts."""


class InvalidRequestError(ApiError):
    """422: a field, a solver parameter, the schema or the CSV is invalid; the problem names which."""

    @property
    def parameter(self) -> str | None:
        return self.problem.get("parameter")

    @property
    def errors(self) -> list[dict[str, Any]]:
        return list(self.problem.get("errors") or [])


class RateLimitedError(ApiError):
    """429: too many requests."""


class ServerError(ApiError):
    """5xx: the server failed; the request was not completed."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    410: ConflictError,  # the dataset was deleted: refused by the server's state, like a 409
    413: PayloadTooLargeError,
    422: InvalidRequestError,
    429: RateLimitedError,
}


def error_for(status: int, problem: dict[str, Any], *, method: str = "", url: str = "") -> ApiError:
    """The typed exception for an error response."""
    if status == 409 and problem.get("title") == "Privacy budget exceeded":
        cls: type[ApiError] = BudgetExceededError
    elif status >= 500:
        cls = ServerError
    else:
        cls = _BY_STATUS.get(status, ApiError)
    return cls(status, problem, method=method, url=url)


class FitFailedError(PrivfitError):
    """A waited-for fit ended ``failed`` or ``cancelled``; ``fit`` is its final state (its charge is kept if it read
    rows, refunded if it ended before reading any)."""

    def __init__(self, fit: Fit) -> None:
        self.fit = fit
        reason = (fit.error or {}).get("detail") if fit.status == "failed" else "the fit was cancelled"
        super().__init__(f"fit {fit.id} {fit.status}: {reason}")


class WaitTimeoutError(PrivfitError, TimeoutError):
    """``wait`` gave up before the fit finished; ``fit`` is its last seen state (it goes on running)."""

    def __init__(self, fit: Fit, timeout: float) -> None:
        self.fit = fit
        super().__init__(f"fit {fit.id} still {fit.status} ({fit.progress:.0%}) after {timeout:g} s")

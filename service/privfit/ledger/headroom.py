r"""The largest target ε the dataset's privacy filter would admit now for a fit (issue 36, item 4).

A refusal (409) or an estimate that says only "not admissible" leaves the analyst to bisect with estimates. This
module does that bisection once, exactly as the ledger would decide it: for a fixed solver, model and parameters,
only the fit's target ε varies, each candidate ε is planned (calibrated and costed) by the caller's ``cost_at`` and
put to **the ledger's own admission test** — the committed cost of the budget row plus the candidate's cost,
measured by the dataset's filter, admitted iff the budget is not closed and the share is ≤ 1
(:func:`privfit.ledger.ledger._admit`, with the filter's rounding against the user) — so the value reported is one
the ledger admits, not an approximation of it.

**What "now" means.** The committed cost is the budget row's: every reservation not released, charged or still
queued (pending fits count), as the next admission would see it. A fit admitted meanwhile lowers the true value;
the number is a statement about the ledger's state when it was read.

**Privacy.** The value is a function of public inputs only: the solver's public settings, the dataset's public
metadata, the budget's filter and δ allowance, and the committed cost — the sum of the public costs of the admitted
fits, which the budget view already shows. No row and no value computed from rows enters it, like every other
number of an estimate (DESIGN §1.3–1.4).

**Monotone in ε?** A solver calibrates the least noise whose cost converts to at most the target ε; a larger target
gives (weakly) less noise, and the RDP curve of the Gaussian, sampled Gaussian and Laplace mechanisms, their pure-ε
bounds and the ε of an (ε, δ) charge all grow as the noise shrinks. Every certificate's share and both parts of the
δ pot are sums of those per-fit numbers with the committed ones, so the share of committed + fit grows with ε and
the admission test is monotone: admitted at ε ⇒ admitted at every smaller ε. That argument needs the solver's other
resolved settings not to depend on ε. Some do: ``auto`` picks its solver by ε, ``resque_localized`` sizes its step
count by ε (and refuses large ε with a 422 when it would exceed the operator's limit), and a plan can fail at some
ε and not at others. The search therefore never relies on monotonicity for what it reports: it keeps the largest ε
it has *tested* admitted below the smallest it has tested refused, and the value it returns (after rounding down)
is tested again; it is admitted whatever the solver does. Monotonicity only makes it the largest.

**The search.** On [``lowest``, ``highest``] (the API's smallest target ε, 10⁻⁶, and the dataset's ε_max, capped
at the API's largest target): if ``highest`` is admitted it is the answer. Otherwise the search works in log ε on
y(ε) = log(share(committed + fit) − share(committed)), whose root log(1 − share(committed)) is the boundary: a fit's
own share follows a power of ε for the Gaussian and Laplace mechanisms (exponent about 1–2), so y is nearly linear
in log ε. An admitted lower end is found by extrapolating y below its root (slope 1, or the slope of the last two
refused candidates), then Brent's method (inverse quadratic or secant interpolation, bisection whenever the
interpolation leaves the bracket, stalls, or y is not finite — a plan refused with a 422, a δ part over its pot)
shrinks the bracket [admitted, refused]; a candidate within half the tolerance of an end is moved half the tolerance
inside it, so an accurate estimate closes the bracket from both sides. It stops when the bracket is within
:data:`RELATIVE_TOLERANCE` or after :data:`MAX_PLANS` plans (verification included); typical fits take 5–8 plans,
``dp_sgd`` near the top of the budget (its share rises steeply there) up to 16. The result is rounded DOWN to
:data:`SIGNIFICANT_DIGITS` significant digits and tested once more (if that rounding were refused — only a
non-monotone solver could do that — the unrounded admitted ε is returned). With the tolerance 10⁻⁴ and 4 digits, a
target 1 % (even 0.2 %) above the reported value is beyond the refused end of the bracket, hence refused when
admission is monotone (the tests check it on SQLite and PostgreSQL).

**The search's cost.** Issue 35 bounds one plan's CPU time; the search plans at most :data:`MAX_PLANS` candidates and
starts no new one once its plans have used :data:`MAX_SEARCH_CPU_SECONDS` of the thread's CPU time (a few solvers'
plans take a few tenths of a second at their largest parameters). Cut short while refining, it returns the largest
ε it has tested admitted — admitted, possibly below the largest; cut short before any candidate was admitted, it
tests ``lowest`` once and answers it if admitted, else 0. The CPU time of a plan is public (a function of public
inputs and the machine), so where the search stops reveals nothing of the rows.

**With an allocation** (:mod:`privfit.ledger.allocations`) the fit must pass two filters, the dataset's and the
caller's allocation's, each on its own committed cost. The test is both; y is the log of the larger of the two
normalised gains (share after − share before) / (1 − share before), whose boundary is 0, and which is the form above
for one filter. Each gain is monotone in ε, so their maximum is, and the search is unchanged.

**Nothing admissible.** When the budget is closed, when the committed fits alone already exceed the filter (adding a
cost never lowers a share: every component is non-negative), or when even ``lowest`` is refused, the answer is 0.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

from privfit.db.models import FilterColumns
from privfit.errors import ParameterError
from privfit.privacy import PrivacyCost, PrivacyFilter

from .ledger import Gates, _committed, budget_filter

SIGNIFICANT_DIGITS = 4
"""The reported ε is rounded down to this many significant digits (a loss of at most 0.1 %)."""

RELATIVE_TOLERANCE = 1e-4
"""The search stops when the refused end of its bracket is within this relative distance of the admitted end."""

MAX_PLANS = 20
"""At most this many candidate ε are planned per search (the cost of one estimate is at most this many plans more)."""

MAX_SEARCH_CPU_SECONDS = 1.0
"""A search plans no new candidate once its plans have used this much CPU time (of the thread running it): issue 35
bounds one plan's CPU, and this bounds the search's (module docstring, "The search's cost")."""

_EXTRAPOLATION_MARGIN = math.log(1.05)
"""Below the bracket, aim for a share of the remaining budget 5 % under the root, to land on the admitted side."""


@dataclass(frozen=True)
class Headroom:
    """The answer of :func:`largest_admissible_epsilon`.

    Attributes:
        epsilon: the largest target ε found admitted, rounded down to :data:`SIGNIFICANT_DIGITS` significant digits;
            0.0 when no target ε in the searched range is admitted now.
        reason: why ``epsilon`` is 0 (``"closed"``: the budget admits nothing; ``"exhausted"``: the committed fits
            already use the whole filter; ``"none"``: even the smallest target ε is refused), else None.
        at_upper_end: the upper end of the search (ε_max, or the API's largest target) is itself admitted.
        plans: how many candidate ε were planned (the search's cost).
    """

    epsilon: float
    reason: str | None
    at_upper_end: bool
    plans: int


def round_down(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``value`` (> 0, finite) rounded toward zero to ``digits`` significant decimal digits; never above ``value``
    (the decimal is floored exactly, and the float nearest to a decimal at most ``value`` is at most ``value``)."""
    exact = Decimal(value)
    quantum = Decimal(1).scaleb(exact.adjusted() - digits + 1)
    return min(float(exact.quantize(quantum, rounding=ROUND_FLOOR)), value)


@dataclass
class _Point:
    """One planned candidate: ε, log ε, whether it is admitted, and y = log of its normalised gain when finite:
    max over the filters of (share after − share before) / (1 − share before), so that y = 0 is the boundary (a
    single filter: log(share after − share before) − log(1 − share before), the form the module docstring uses)."""

    epsilon: float
    t: float
    admitted: bool
    y: float | None


@dataclass(frozen=True)
class _Gate:
    """One filter the fit must pass, its committed cost and that cost's share (< 1)."""

    privacy_filter: PrivacyFilter
    committed: PrivacyCost
    before: float

    @classmethod
    def of(cls, row: FilterColumns) -> _Gate:
        privacy_filter = budget_filter(row)
        committed = _committed(row)
        return cls(privacy_filter, committed, privacy_filter.measure(committed).share)


class _Probe:
    """Plans candidates through ``cost_at`` and puts them to the admission test of every gate, once per ε
    (memoised)."""

    def __init__(self, gates: list[_Gate], cost_at: Callable[[float], PrivacyCost], cpu_seconds: float) -> None:
        self.gates, self.cost_at = gates, cost_at
        self.seen: dict[float, _Point] = {}
        self.cpu_left = cpu_seconds

    def may_plan(self, plans: int) -> bool:
        """Whether a new candidate may be planned: fewer than ``plans`` planned and CPU time left."""
        return len(self.seen) < plans and self.cpu_left > 0.0

    def order(self, point: _Point) -> int:
        """When ``point`` was planned (0 for the first)."""
        return list(self.seen.values()).index(point)

    def __call__(self, epsilon: float) -> _Point:
        point = self.seen.get(epsilon)
        if point is None:
            point = self.seen[epsilon] = self._test(epsilon)
        return point

    def _test(self, epsilon: float) -> _Point:
        t = math.log(epsilon)
        started = time.thread_time()
        try:
            cost = self.cost_at(epsilon)
        except ParameterError:  # a request at this ε would be a 422: not admitted, and no share to interpolate
            return _Point(epsilon, t, False, None)
        finally:
            self.cpu_left -= time.thread_time() - started
        admitted, gain = True, 0.0
        for gate in self.gates:
            share = gate.privacy_filter.measure(gate.committed + cost).share  # the ledger's test, on the same sum
            admitted = admitted and share <= 1.0
            gain = max(gain, (share - gate.before) / (1.0 - gate.before) if math.isfinite(share) else math.inf)
        return _Point(epsilon, t, admitted, math.log(gain) if math.isfinite(gain) and gain > 0.0 else None)


def largest_admissible_epsilon(
    gates: Gates,
    cost_at: Callable[[float], PrivacyCost],
    *,
    lowest: float,
    highest: float,
    max_plans: int = MAX_PLANS,
    cpu_seconds: float = MAX_SEARCH_CPU_SECONDS,
) -> Headroom:
    """The largest target ε in [``lowest``, ``highest``] that the filters of ``gates`` — the dataset's budget and the
    caller's allocation, if it has one — both admit now for the fit whose cost at target ε is ``cost_at(ε)``
    (module docstring: the search, its cost and why the value is admitted).

    ``cost_at`` must be a function of public inputs only (the caller plans the same solver, model and parameters at
    each ε) and may raise :class:`~privfit.errors.ParameterError` for an ε it cannot plan (taken as refused).
    The rows of ``gates`` are read, never written: the committed costs are their cached compositions, as
    :func:`~privfit.ledger.reserve` reads them under the lock.
    """
    rows = gates.rows()
    if any(row.filter_note for row in rows):
        return Headroom(0.0, "closed", False, 0)
    measured = [_Gate.of(row) for row in rows]
    if not all(gate.before < 1.0 for gate in measured):  # every share of committed + fit is at least the committed one
        return Headroom(0.0, "exhausted", False, 0)
    highest = max(highest, lowest)
    probe = _Probe(measured, cost_at, cpu_seconds)
    root = 0.0  # the boundary of the normalised gain (:class:`_Point`)
    top = probe(highest)
    if top.admitted:
        return _finish(probe, top, at_upper_end=True)
    low = _bracket_low(probe, top, root, lowest, max_plans - 1)
    if low is None:
        return Headroom(0.0, "none", False, len(probe.seen))
    admitted = _refine(probe, low, top, root, max_plans - 1)
    return _finish(probe, admitted, at_upper_end=False)


def _bracket_low(probe: _Probe, high: _Point, root: float, lowest: float, budget: int) -> _Point | None:
    """An admitted point below the refused ``high``: extrapolate y down to just under its root (slope from the two
    lowest refused points, else 1: a fit's share grows at least linearly in ε, so slope 1 undershoots), or bisect
    in log ε towards ``lowest`` when y is not finite; None when ``lowest`` itself is refused. Out of plans or CPU
    time before an admitted point, it tests ``lowest`` once."""
    t_lowest = math.log(lowest)
    previous: _Point | None = None
    while probe.may_plan(budget):
        if high.t <= t_lowest:
            return None
        if high.y is not None and math.isfinite(root):
            slope = 1.0
            if previous is not None and previous.y is not None and previous.y > high.y and previous.t > high.t:
                slope = min(max((previous.y - high.y) / (previous.t - high.t), 0.25), 4.0)
            t = high.t - (high.y - root + _EXTRAPOLATION_MARGIN) / slope
        else:
            t = (t_lowest + high.t) / 2.0
        t = min(max(t, t_lowest), high.t - math.log(2.0))  # at least halve ε; never below the lowest target
        point = probe(lowest if t <= t_lowest else math.exp(t))
        if point.admitted:
            return point
        previous, high = high, point
    last = probe(lowest)
    return last if last.admitted else None


def _refine(probe: _Probe, low: _Point, high: _Point, root: float, budget: int) -> _Point:
    """Shrink the bracket [``low`` admitted, ``high`` refused] in log ε until it is within the tolerance or the plan
    budget is spent (module docstring), by Brent's method on f = y − root (admitted ⇔ f ≤ 0; f = ∓∞ where y is not
    finite): inverse quadratic or secant interpolation when it falls well inside the bracket and keeps shrinking
    it, else a bisection; a candidate within half the tolerance of an end is moved half the tolerance inside it, so
    that an accurate estimate closes the bracket from both sides. Returns the admitted end."""
    tolerance = math.log1p(RELATIVE_TOLERANCE)

    def f(point: _Point) -> float:  # its sign agrees with the test even where floating point rounding would not
        if point.y is None:
            return -math.inf if point.admitted else math.inf
        return min(point.y - root, 0.0) if point.admitted else max(point.y - root, 1e-300)

    a, b = (high, low) if abs(f(high)) >= abs(f(low)) else (low, high)  # b: the better estimate
    c, d, bisected = a, a.t, True
    while high.t - low.t > tolerance and probe.may_plan(budget) and f(b) != 0.0:  # f(b) = 0: b is the boundary
        fa, fb, fc = f(a), f(b), f(c)
        s = math.nan
        if all(math.isfinite(v) for v in (fa, fb, fc)) and fa != fb:
            if fa != fc and fb != fc:  # inverse quadratic interpolation
                s = (a.t * fb * fc / ((fa - fb) * (fa - fc)) + b.t * fa * fc / ((fb - fa) * (fb - fc))
                     + c.t * fa * fb / ((fc - fa) * (fc - fb)))  # fmt: skip
            else:  # secant
                s = b.t - fb * (b.t - a.t) / (fb - fa)
        lo, hi = sorted(((3.0 * a.t + b.t) / 4.0, b.t))
        previous_step = abs(b.t - c.t) if bisected else abs(c.t - d)
        if not (lo < s < hi) or abs(s - b.t) >= previous_step / 2.0 or previous_step < tolerance:
            s, bisected = (low.t + high.t) / 2.0, True
        else:
            bisected = False
        s = min(max(s, low.t + tolerance / 2.0), high.t - tolerance / 2.0)
        point = probe(math.exp(s))
        d, c = c.t, b
        if point.admitted:
            low = point
        else:
            high = point
        a, b = (high, low) if abs(f(high)) >= abs(f(low)) else (low, high)  # the ends, b the better estimate
    return low


def _finish(probe: _Probe, admitted: _Point, *, at_upper_end: bool) -> Headroom:
    """Round the admitted ε down and test the rounded value (only a non-monotone solver could make it refused; the
    unrounded, tested ε is returned then)."""
    rounded = round_down(admitted.epsilon)
    if rounded != admitted.epsilon and not probe(rounded).admitted:
        rounded = admitted.epsilon
    return Headroom(rounded, None, at_upper_end, len(probe.seen))

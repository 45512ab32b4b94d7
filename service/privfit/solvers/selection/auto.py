r"""``auto``: private selection among a public set of candidate solvers (issue 22 §1).

**Algorithm.** Public inputs: the model, the candidate configurations c = 1..m (:func:`candidate_set`: each a
solver at its defaults), the validation fraction f, the target (ε, δ). The split sizes n_val = ⌊f·n⌋ and
n_tr = n − n_val are public because n is (DESIGN §1.1).

1. Draw a uniformly random permutation π of the n rows from the fit's generator (OS-seeded; π is never
   released). Rows π(1..n_tr) are the training split D_tr, the others the validation split D_val.
2. For c = 1..m: θ_c = candidate c fitted on D_tr by its own mechanism (noise calibrated to the share t·ε of the
   target at δ, for n = n_tr).
3. For c = 1..m: s_c = S(θ_c; D_val) + N(0, (z_s·Δ_s)²), where S is a sum of bounded per-row terms:
   classifiers: the number of correctly classified validation rows (Δ_s = 1);
   regression models: minus the sum of clipped squared residuals min(r², c²) with c = B_y/2, half the label's
   declared half-range (Δ_s = c² = B_y²/4). The worst case 4B_y² of an unclipped residual would need 16 times
   the noise; residuals beyond c are rare for any candidate worth selecting, and capping them still ranks a
   candidate with many of them last.
4. Release c* = argmax_c s_c (the first on ties) and θ_{c*}. Nothing else leaves the fit: not the scores, not
   the losers' parameters.

**Privacy** (replace-one neighbours D ~ D' differing in row i). Condition on π, which does not depend on the
data. Row i is then in exactly one split.
(a) Row i ∈ D_tr: D_val is the same in both worlds, so the whole output is a post-processing of the m candidate
releases (θ_1..θ_m), an adaptive composition of the candidates' mechanisms on D_tr vs D'_tr: RDP Σ_c ε_c(α)
(Mironov 2017, Prop. 1).
(b) Row i ∈ D_val: θ_1..θ_m have the same law in both worlds, and given them each s_c is a Gaussian mechanism
of sensitivity Δ_s (one bounded term of the sum changes): RDP m·α/(2 z_s²) (Mironov 2017, Prop. 7 and 1).
So conditionally on π the output is (α, max(Σ_c ε_c(α), m α/(2z_s²)))-RDP. The released law is the mixture over
π of the conditional laws, in both worlds with the same weights, and e^{(α−1)D_α(P‖Q)} = ∫ p^α q^{1−α} is jointly
convex for α > 1 (van Erven & Harremoës 2014, Thm 13): the mixture's Rényi divergence is at most the largest
conditional one. Hence

    ε_auto(α) = max( Σ_c ε_c(α),  m·α / (2 z_s²) )                                                      (1)

for every α, computed from public settings only before any row is read (:meth:`AutoSelection._cost`); the
argmax and the release of θ_{c*} are post-processing. This is parallel composition over a secret random split:
the scores cost nothing on top of the fits as long as their curve stays below the fits'.

The same argument gives a Gaussian-DP bound when every candidate has one (``gdp_mu_squared``,
:mod:`privfit.privacy.gaussian_dp`): conditionally on π the output is √(Σ_c μ_c²)-GDP in case (a) and √(m/z_s²)-GDP
in case (b) (adaptive GDP composition; Dong, Roth & Su 2022, Cor. 3.3), and a mixture of μ-GDP pairs with common
weights is μ-GDP (the hockey-stick divergence is jointly convex, and μ-GDP is δ(ε) ≤ δ_μ(ε) for every ε). So the
selection carries Σ μ² = max(Σ_c μ_c², m/z_s²), plus the lattice charge κ of its m score coordinates (the
candidates' are in their μ_c²).

**Calibration.** One share t ∈ (0, 1] for all: each candidate is calibrated to t·ε at δ (its own rule, for
n_tr), and z_s so that m-fold Gaussian composition converts to t·ε. t is the largest value on a bisection (12
halvings of [t_lo, 1]) for which (1) converts to ≤ ε at δ; every accepted t is checked, so the result never
exceeds the target whatever the shape of the curves.

**Why not random stopping (Liu & Talwar 2019; Papernot & Steinke, ICLR 2022).** Their private selection runs a
random number K of candidates and is cheaper than composition for large candidate sets because K stays hidden.
But a fit's duration is observable (DESIGN §4) and grows with K; the bound for the output together with K is no
better than composing K runs. Hiding K means always running the truncation N of its law: for a tail
P(K > N) ≤ 1e−9 that is N = 15 for Poisson(2) (which outputs nothing with probability e^{−2} = 13.5 %), 30 for
the geometric law of mean 2 and 52 for the logarithmic law of mean 2 — 7 to 26 times the expected work. With the
public candidate sets below (m = 2) plain composition costs a noise factor √2 = 1.41 at a fixed ε, against
1.24–1.53 for those laws at mean 2 (dp_accounting's ``RepeatAndSelectDpEvent``), and tries every candidate for
sure. ``docs/solvers.md`` ("auto") has the numbers.

**When to select** (``mode``, public). Selection pays only where its overhead is cheap: each candidate runs at a
share t ≈ 0.65 of ε on 80 % of the rows, so where the noise matters it loses more than choosing the better candidate
gains. Measured with ``benchmarks/auto_selection.py`` (3 seeds, every candidate at its defaults, always selecting;
docs/benchmarks.md, "Private selection"): on Telco churn at ε = 0.5 / 1 / 2 it reached 78.90 / 79.77 / 80.55 %
against ``dp_gd``'s 79.75 / 81.15 / 81.64, on Adult 83.29 / 83.58 / 84.25 % against the better single solver's 83.71
/ 84.22 / 84.67; on the power plant it matched ``dp_gd`` (RMSE 4.85 against 4.86 at ε = 1). ``mode='auto'`` (the
default) therefore selects only when every candidate's noise outlook at its share is 'low' (the public prediction
that the noise moves θ by less than a tenth of its scale, :class:`~privfit.solvers.base.NoiseOutlook`), and
otherwise fits the solver of the public recommendation rule at the whole ε (:func:`recommended_solver`; no split, no
scores, its own cost). ``mode='selection'`` and ``mode='recommended'`` force either. The resolved ``mode`` is public
(it is part of the settings and of the cost).

**Candidates** (:func:`candidate_set`): the two solvers that the recommendation rule
(:mod:`privfit.solvers.recommendation`) chooses between for classifiers — ``dp_gd`` and
``objective_perturbation`` — and, for the squared loss, which objective perturbation does not take, ``dp_gd`` and
``output_perturbation``; for a categorical label, the solvers that fit the multinomial model, ``dp_gd`` and
``dp_sgd``, scored by the number of validation rows whose most probable class is the true one (Δ_s = 1). Each at
its own defaults (which follow the public noise level of its share t·ε).

**The noise sampler** (issue 25; :mod:`privfit.privacy.noise`). The resolution records the sampler in force
(``sampler``); the candidates are planned under it (each records its own) and the fit draws with it. Each score
is one Gaussian release of one coordinate, L2 sensitivity Δ_s, σ = z_s·Δ_s, public bound n_val·Δ_s on |S|
(:func:`~privfit.privacy.noise.gaussian_release`): with ``float`` numpy's draws as before the layer, with ``exact``
the discrete Gaussian on a lattice, for which the noise module proves the Gaussian curve m·α/(2z_s²) of (1).
``objective_perturbation`` needs continuous noise and is refused under ``exact``: there the classifiers'
candidates are ``dp_gd`` and ``output_perturbation`` (as for the squared loss), and the recommendation rule
falls back to ``dp_gd`` (:func:`~privfit.solvers.recommendation.recommend`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ...privacy import OrderGrid, PrivacyCost, gaussian_sigma
from ...privacy.gaussian_dp import COORDINATE_CHARGE, gaussian_mu_squared
from ...privacy.mechanisms import gaussian_rdp
from ...privacy.noise import SamplerName, current_sampler, gaussian_release
from ..base import (
    CLASSIFICATION_MODELS,
    FitResult,
    FitRun,
    FloatArray,
    MetadataResolved,
    ModelName,
    NoiseOutlook,
    PrivacyRequest,
    PublicMetadata,
    Release,
    ResolvedParams,
    Solver,
    SolverParameterError,
    SolverParams,
    check_resolved_metadata,
    sampler_refusal,
)
from ..baselines.dp_gd import DPGradientDescent
from ..baselines.dp_sgd import DPSGD
from ..baselines.objective_perturbation import ObjectivePerturbation
from ..baselines.output_perturbation import OutputPerturbation
from ..recommendation import recommend

__all__ = [
    "AutoParams",
    "AutoResolved",
    "AutoSelection",
    "Candidate",
    "candidate_set",
    "candidates_description",
    "recommended_solver",
    "selection_curve",
    "validation_size",
]

#: The solvers a candidate may name, by registry name (instances are stateless; the registry holds equal ones).
CANDIDATE_SOLVERS: dict[str, Solver[Any, Any]] = {
    solver.name: solver for solver in (DPGradientDescent(), DPSGD(), ObjectivePerturbation(), OutputPerturbation())
}

#: The candidates for a categorical label: the solvers of the multinomial model (auto aside).
MULTICLASS_CANDIDATES = ("dp_gd", "dp_sgd")

#: Bisection halvings of the share t (module docstring, "Calibration"): t is found to within 2^−12 of the
#: largest feasible share, which changes each candidate's ε by less than 0.03 %.
SHARE_BISECTIONS = 12

#: Default fraction of the rows held out to score the candidates (public; module docstring).
DEFAULT_VALIDATION_FRACTION = 0.2

#: Progress units per candidate fit (the scoring pass counts one more unit): progress is the public fraction of
#: candidates done, never a function of the rows.
PROGRESS_UNITS = 1000


def recommended_solver(
    model: str, n: int, epsilon: float, multiclass: bool = False, sampler: SamplerName = "float"
) -> str:
    """The solver ``mode='recommended'`` fits: :func:`~privfit.solvers.recommendation.recommend`'s (for the noise
    ``sampler``) for binary logistic and linear models; ``dp_gd`` (whose defaults follow the public noise level) for
    a categorical label and for the models the recommendation rule does not cover."""
    if model in ("logistic", "linear") and not multiclass:
        return recommend(model, n, epsilon, sampler=sampler).solver
    return "dp_gd"


def candidate_set(model: str, multiclass: bool = False, sampler: SamplerName = "float") -> tuple[str, ...]:
    """The public candidate solvers for ``model`` (module docstring, "Candidates"), each run at its defaults;
    ``multiclass``: a categorical label, which among the candidates only ``dp_gd`` and ``dp_sgd`` fit
    (:data:`~privfit.solvers.base.MULTICLASS_SOLVERS`); ``sampler`` 'exact': no ``objective_perturbation``, which
    needs continuous noise (module docstring, "The noise sampler"; the rule is
    :func:`~privfit.solvers.base.sampler_refusal`, the one the catalogue's availability follows)."""
    if multiclass:
        return MULTICLASS_CANDIDATES
    if model == "linear" or sampler_refusal(CANDIDATE_SOLVERS["objective_perturbation"], sampler) is not None:
        return ("dp_gd", "output_perturbation")
    return ("dp_gd", "objective_perturbation")


def _joined(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def candidates_description(models: tuple[str, ...], sampler: SamplerName) -> str:
    """The candidates :func:`candidate_set` gives under ``sampler``, in words, grouped by candidate pair: e.g. "dp_gd
    and objective_perturbation for logistic, huber and svm; dp_gd and output_perturbation for linear; dp_gd and
    dp_sgd for a categorical label" (``GET /v1/solvers`` serves the description built from it, so it names only
    solvers this server runs)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for model in models:
        groups.setdefault(candidate_set(model, False, sampler), []).append(model)
    parts = [f"{_joined(list(names))} for {_joined(members)}" for names, members in groups.items()]
    parts.append(f"{_joined(list(MULTICLASS_CANDIDATES))} for a categorical label")
    return "; ".join(parts)


def released_theta(result: FitResult) -> FloatArray:
    """θ as :func:`~privfit.solvers.base.glm_fit_result` reads it back: the coefficients then the intercept, or for
    a multinomial fit vec(Θ) row-major, each class's coefficients followed by its intercept."""
    if result.classes is None:
        intercept = [] if result.intercept is None else [result.intercept]
        return np.asarray([*result.coefficients, *intercept], dtype=np.float64)
    rows = np.asarray(result.coefficients, dtype=np.float64)
    if result.intercept is not None:
        rows = np.hstack([rows, np.asarray(result.intercept, dtype=np.float64)[:, None]])
    return np.asarray(rows.ravel(), dtype=np.float64)


def validation_size(n: int, fraction: float) -> int:
    """n_val = ⌊f·n⌋ held-out rows (public); refused when either split would be empty."""
    n_val = math.floor(fraction * n)
    if n_val < 1 or n - n_val < 1:
        raise SolverParameterError(
            "validation_fraction",
            f"splits n = {n} rows into {n - n_val} training and {n_val} validation rows; both must be ≥ 1",
        )
    return n_val


def score_sensitivity(model: str, label_bound: float) -> float:
    """Δ_s of the score sum (module docstring, step 3): 1 for classifiers, c² = (B_y/2)² for regression models."""
    return 1.0 if model in CLASSIFICATION_MODELS else residual_cap(label_bound) ** 2


def residual_cap(label_bound: float) -> float:
    """c = B_y/2: a regression score counts min(r², c²) per validation row (module docstring, step 3)."""
    return label_bound / 2.0


def selection_curve(candidate_costs: list[PrivacyCost], score_multiplier: float, grid: OrderGrid) -> PrivacyCost:
    """Equation (1): the pointwise maximum of the candidates' composed curve and the m scores' Gaussian curve, and
    the GDP Σ μ² of the module docstring (+∞ when some candidate has none).

    The candidates must have RDP curves only (no δ parts and no pure-ε bound is claimed for the selection)."""
    if any(cost.extra_delta or cost.approx_delta for cost in candidate_costs):
        raise SolverParameterError("solver", "auto's candidates must be RDP mechanisms without δ parts")
    fits = np.sum([cost.rdp for cost in candidate_costs], axis=0)
    scores = len(candidate_costs) * gaussian_rdp(grid.orders, sigma=score_multiplier)
    fits_mu_squared = math.fsum(cost.gdp_mu_squared for cost in candidate_costs)
    count = len(candidate_costs)
    scores_mu_squared = gaussian_mu_squared(sigma=score_multiplier, sensitivity=1.0, count=count, coordinates=1)
    mu_squared = max(fits_mu_squared, scores_mu_squared) + count * COORDINATE_CHARGE
    return PrivacyCost(np.maximum(fits, scores), grid, gdp_mu_squared=mu_squared)


class AutoParams(SolverParams):
    """Parameters of ``auto`` (all optional except the model)."""

    model: ModelName = Field(
        "logistic",
        description="The GLM to fit: 'logistic' and 'svm' (classifiers, scored by accuracy), 'linear' and 'huber' "
        "(regression, scored by the squared error).",
    )
    fit_intercept: bool = Field(True, description="Fit an intercept (every candidate does the same).")
    validation_fraction: float = Field(
        DEFAULT_VALIDATION_FRACTION,
        ge=0.05,
        le=0.5,
        description="Public fraction f of the rows held out (by a secret random split) to score the candidates: "
        "n_val = floor(f·n). The candidates are fitted on the other n − n_val rows.",
    )
    mode: Literal["auto", "selection", "recommended"] = Field(
        "auto",
        description="'selection': always run the private selection; 'recommended': fit the solver of the public "
        "recommendation rule at the whole ε (no split, no scores); 'auto': selection only when every candidate's "
        "noise outlook at its share of ε is 'low' (the selection's overhead then costs little), else the "
        "recommended solver.",
    )


class Candidate(BaseModel):
    """One candidate's fully resolved settings (for the training split's n)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    solver: str
    resolved: dict[str, Any]


class AutoResolved(MetadataResolved):
    """Resolved ``auto`` settings: the split sizes, every candidate's resolved settings and the score noise."""

    solver: Literal["auto"] = "auto"
    formula_version: Literal["auto/split-composition/v1"] = "auto/split-composition/v1"
    model: ModelName
    fit_intercept: bool
    classes: list[str] | None = Field(
        None, description="Class names of a categorical label (multinomial candidates); null otherwise."
    )
    mode: Literal["selection", "recommended"] = Field(
        description="'selection': the candidates below are fitted on the training split and scored privately; "
        "'recommended': the one candidate is the public rule's solver, fitted on all rows at the whole ε."
    )
    validation_fraction: float
    n_train: int = Field(ge=1, description="Rows the candidates are fitted on (public: n − n_validation).")
    n_validation: int = Field(ge=0, description="Held-out rows the candidates are scored on: floor(f·n) (0 when "
                              "mode is 'recommended').")  # fmt: skip
    share: float = Field(gt=0.0, le=1.0, description="Each candidate's share t of the target ε (at δ).")
    candidates: list[Candidate]
    score_sensitivity: float | None = Field(ge=0.0, description="Δ_s of a score sum (selection only).")
    score_noise_multiplier: float | None = Field(
        gt=0.0, description="z_s: a score's Gaussian noise is z_s·Δ_s (selection only)."
    )
    sampler: SamplerName = Field(
        "float",
        description="The noise sampler this fit was resolved for (privfit.privacy.noise): it chose the candidates "
        "and draws the scores. Settings stored before the sampler existed drew with 'float'.",
    )


class AutoSelection(Solver[AutoParams, AutoResolved]):
    """Private selection among public candidates on a secret train/validation split (module docstring)."""

    #: the description with ``{candidates}`` left to fill: the served one names the candidates (:meth:`describe`)
    description_template: ClassVar[str] = (
        "Private model selection: fits each public candidate ({candidates}) on a secret random training split, "
        "scores them with Gaussian noise on the held-out rows (accuracy, or squared error) and releases the best "
        "model and which candidate won. The cost is the composition of the candidates' fits, which the scores share "
        "by parallel composition; the target ε covers the whole procedure."
    )
    description = description_template.format(
        candidates="two solvers per model, those the server runs: GET /v1/solvers names them"
    )
    appends_intercept = False
    multiclass = True

    def describe(self) -> dict[str, Any]:
        """As :meth:`Solver.describe`, with the description naming the candidates of the sampler in force (under
        ``exact`` no ``objective_perturbation``, which this server refuses), so the catalogue never offers a solver
        the selection does not use here."""
        candidates = f"on this server: {candidates_description(self.models, current_sampler())}"
        return {**super().describe(), "description": self.description_template.format(candidates=candidates)}

    def _training_metadata(self, meta: PublicMetadata, n_train: int) -> PublicMetadata:
        return dataclasses.replace(meta, n=n_train, max_rows_per_unit=None)

    def _plan_share(
        self, p: AutoParams, meta_train: PublicMetadata, share: float, privacy: PrivacyRequest
    ) -> tuple[list[Candidate], list[PrivacyCost], float]:
        target = privacy.required_target()
        epsilon = share * target.epsilon
        planned = [
            self._plan_candidate(name, p, meta_train, epsilon, privacy)
            for name in candidate_set(p.model, meta_train.classes is not None, current_sampler())
        ]
        z = gaussian_sigma(epsilon, target.delta, count=len(planned), grid=privacy.grid).noise
        return [candidate for candidate, _ in planned], [cost for _, cost in planned], z

    def _plan_candidate(
        self, name: str, p: AutoParams, meta: PublicMetadata, epsilon: float, privacy: PrivacyRequest
    ) -> tuple[Candidate, PrivacyCost]:
        """Candidate ``name`` at its defaults for the model of ``p``, calibrated to ``epsilon`` at the target δ."""
        plan = CANDIDATE_SOLVERS[name].plan(
            {"model": p.model, "fit_intercept": p.fit_intercept},
            meta,
            target_epsilon=epsilon,
            delta=privacy.required_target().delta,
            grid=privacy.grid,
        )
        return Candidate(solver=name, resolved=plan.resolved.model_dump(mode="json")), plan.cost

    def _settings(self, p: AutoParams, meta: PublicMetadata, privacy: PrivacyRequest, **fields: Any) -> AutoResolved:
        """The resolved settings: the public metadata and ``p``'s model, with the mode's own ``fields``."""
        return AutoResolved(
            **privacy.resolved_fields(meta),
            model=p.model,
            fit_intercept=p.fit_intercept,
            classes=None if meta.classes is None else list(meta.classes),
            validation_fraction=p.validation_fraction,
            sampler=current_sampler(),
            **fields,
        )

    def _resolve(self, p: AutoParams, meta: PublicMetadata, privacy: PrivacyRequest) -> AutoResolved:
        if p.mode != "recommended":
            try:
                selection = self._resolve_selection(p, meta, privacy)
            except SolverParameterError as error:  # e.g. a share t·ε below a candidate's minimum ε, or n too small
                if p.mode == "selection":
                    raise SolverParameterError(
                        error.parameter, f"the selection's candidates cannot be planned ({error}); mode 'recommended' "
                        "fits one solver at the whole ε"
                    ) from None  # fmt: skip
                return self._resolve_recommended(p, meta, privacy)  # a selection that cannot be planned cannot pay
            if p.mode == "selection" or self._selection_pays(selection):
                return selection
        return self._resolve_recommended(p, meta, privacy)

    def _selection_pays(self, r: AutoResolved) -> bool:
        """The public rule of ``mode='auto'``: every candidate's noise outlook at its share is 'low'."""
        meta_train = self._stored_training_metadata(r)
        outlooks = [CANDIDATE_SOLVERS[c.solver].outlook(c.resolved, meta_train) for c in r.candidates]
        return all(outlook is not None and outlook.level == "low" for outlook in outlooks)

    def _resolve_recommended(self, p: AutoParams, meta: PublicMetadata, privacy: PrivacyRequest) -> AutoResolved:
        epsilon = privacy.required_target().epsilon
        name = recommended_solver(p.model, meta.n, epsilon, meta.classes is not None, current_sampler())
        candidate, _ = self._plan_candidate(name, p, meta, epsilon, privacy)
        return self._settings(
            p, meta, privacy, mode="recommended", n_train=meta.n, n_validation=0, share=1.0, candidates=[candidate],
            score_sensitivity=None, score_noise_multiplier=None,
        )  # fmt: skip

    def _resolve_selection(self, p: AutoParams, meta: PublicMetadata, privacy: PrivacyRequest) -> AutoResolved:
        target = privacy.required_target()
        n_val = validation_size(meta.n, p.validation_fraction)
        meta_train = self._training_metadata(meta, meta.n - n_val)

        def feasible(share: float) -> tuple[list[Candidate], float] | None:
            candidates, costs, z = self._plan_share(p, meta_train, share, privacy)
            total = selection_curve(costs, z, privacy.grid)
            return (candidates, z) if total.epsilon(target.delta).epsilon <= target.epsilon else None

        low = 1.0 / len(candidate_set(p.model, meta.classes is not None, current_sampler()))
        best = feasible(low)
        while best is None:  # pragma: no cover - m curves each at ε/m compose to ≤ ε for every mechanism here
            low /= 2.0
            best = feasible(low)
        top = feasible(1.0)
        if top is not None:  # pragma: no cover - m ≥ 2 curves at ε each compose to more than ε
            low, best = 1.0, top
        else:
            high = 1.0
            for _ in range(SHARE_BISECTIONS):
                middle = (low + high) / 2.0
                found = feasible(middle)
                if found is None:
                    high = middle
                else:
                    low, best = middle, found
        candidates, z = best
        return self._settings(
            p, meta, privacy, mode="selection", n_train=meta.n - n_val, n_validation=n_val, share=low,
            candidates=candidates, score_sensitivity=score_sensitivity(p.model, meta.label_bound),
            score_noise_multiplier=z,
        )  # fmt: skip

    def _verify_resolved(self, r: AutoResolved) -> None:
        """Stored settings are recomputed, not trusted: the split, the candidate set, the score noise's presence
        and Δ_s, and each candidate's own settings (its solver's checks, for the rows it is fitted on)."""
        multiclass = r.classes is not None
        if r.mode == "selection":
            split_ok = r.n_validation == validation_size(r.n, r.validation_fraction)
            names = candidate_set(r.model, multiclass, r.sampler)
            scores_ok = r.score_noise_multiplier is not None and r.score_sensitivity == score_sensitivity(
                r.model, r.label_bound
            )
        else:
            split_ok = r.n_validation == 0 and r.share == 1.0
            names = (recommended_solver(r.model, r.n, r.target_epsilon or 0.0, multiclass, r.sampler),)
            scores_ok = r.score_noise_multiplier is None and r.score_sensitivity is None
        if not split_ok or r.n_train != r.n - r.n_validation:
            raise SolverParameterError("resolved", "the split sizes do not follow from n and validation_fraction")
        if tuple(c.solver for c in r.candidates) != names:
            raise SolverParameterError("resolved", f"the candidates are not the public set for {r.model!r}")
        if not scores_ok:
            raise SolverParameterError("resolved", "the score settings do not follow from the mode, model and B_y")
        meta_train = self._stored_training_metadata(r)
        for candidate in r.candidates:
            settings = check_resolved_metadata(CANDIDATE_SOLVERS[candidate.solver], candidate.resolved, meta_train)
            if getattr(settings, "model", None) != r.model or settings.fit_intercept != r.fit_intercept:
                raise SolverParameterError("resolved", f"candidate {candidate.solver!r} fits another model")

    def _stored_training_metadata(self, r: AutoResolved) -> PublicMetadata:
        classes = None if r.classes is None else tuple(r.classes)
        return PublicMetadata(r.n_train, r.d, r.row_norm_bound, r.label_bound, classes=classes)

    def _cost(self, r: AutoResolved, meta: PublicMetadata, grid: OrderGrid) -> PrivacyCost:
        """Equation (1) of the module docstring from the stored settings; the candidate's own cost when the mode
        is 'recommended'."""
        meta_train = self._stored_training_metadata(r)
        costs = [CANDIDATE_SOLVERS[c.solver].cost(c.resolved, meta_train, grid) for c in r.candidates]
        if r.score_noise_multiplier is None:
            return costs[0]
        return selection_curve(costs, r.score_noise_multiplier, grid)

    def outlook(self, resolved: ResolvedParams | Mapping[str, Any], meta: PublicMetadata) -> NoiseOutlook | None:
        """The noisiest candidate's outlook (public: each is computed from its own stored settings)."""
        r = check_resolved_metadata(self, resolved, meta)
        meta_train = self._stored_training_metadata(r)
        outlooks = [CANDIDATE_SOLVERS[c.solver].outlook(c.resolved, meta_train) for c in r.candidates]
        known = [outlook for outlook in outlooks if outlook is not None]
        return max(known, key=lambda outlook: outlook.ratio) if known else None

    def _progress_steps(self, r: AutoResolved) -> int:
        return PROGRESS_UNITS * (len(r.candidates) + (r.mode == "selection"))

    def _fit(self, run: FitRun, r: AutoResolved) -> Release:
        """Steps 1–4 of the module docstring; :meth:`Solver.fit` runs it with the resolved sampler and names it in
        the metadata."""
        if r.mode == "selection":
            permutation = run.rng.permutation(run.meta.n)
            train, validation = permutation[: r.n_train], permutation[r.n_train :]
            X_train, y_train = run.X[train], run.y[train]
        else:
            X_train, y_train = run.X, run.y
        meta_train = self._training_metadata(run.meta, r.n_train)
        thetas = [
            self._fit_candidate(run, index, candidate, X_train, y_train, meta_train)
            for index, candidate in enumerate(r.candidates)
        ]
        winner = 0
        if r.mode == "selection":
            run.reporter.check_stop(len(r.candidates) * PROGRESS_UNITS)
            winner = int(np.argmax(self._noisy_scores(r, thetas, run.X[validation], run.y[validation], run.rng)))
        return Release(thetas[winner], selected=r.candidates[winner].model_dump(mode="json"))

    def _fit_candidate(
        self,
        run: FitRun,
        index: int,
        candidate: Candidate,
        X: FloatArray,
        y: FloatArray,
        meta: PublicMetadata,
    ) -> FloatArray:
        """Step 2 for one candidate: its own fit, with progress and cancellation mapped into this fit's."""
        offset = index * PROGRESS_UNITS

        def progress(fraction: float) -> None:
            run.reporter.report(offset + int(fraction * PROGRESS_UNITS))

        def should_stop() -> bool:
            run.reporter.check_stop(offset)
            return False

        result = CANDIDATE_SOLVERS[candidate.solver].fit(X, y, meta, candidate.resolved, run.rng, progress, should_stop)
        return released_theta(result)

    def _noisy_scores(
        self, r: AutoResolved, thetas: list[FloatArray], X: FloatArray, y: FloatArray, rng: np.random.Generator
    ) -> FloatArray:
        """Step 3: s_c = S(θ_c; D_val) + N(0, (z_s·Δ_s)²), one draw per candidate whatever the rows."""
        if r.score_noise_multiplier is None or r.score_sensitivity is None:
            raise SolverParameterError("resolved", "only a selection scores its candidates")
        sigma, sensitivity = r.score_noise_multiplier * r.score_sensitivity, r.score_sensitivity

        def noisy(exact: Any) -> FloatArray:
            """m Gaussian releases of one coordinate each (module docstring): |S| ≤ n_val·Δ_s is public."""
            column = np.asarray(exact, dtype=np.float64)[:, None]
            scores = gaussian_release(rng, column, sigma=sigma, l2_sensitivity=sensitivity,
                                      bound=r.n_validation * sensitivity)  # fmt: skip
            return np.asarray(scores[:, 0], dtype=np.float64)

        design = np.hstack([X, np.ones((X.shape[0], 1))]) if r.fit_intercept else X
        if r.classes is not None:  # vec(Θ) row-major: the most probable class against the class index
            predicted = [np.argmax(design @ theta.reshape(len(r.classes), -1).T, axis=1) for theta in thetas]
            return noisy(np.sum(np.stack(predicted) == y, axis=1, dtype=np.float64))
        margins = np.stack([design @ theta for theta in thetas])
        if r.model in CLASSIFICATION_MODELS:
            exact = np.sum(np.where(margins >= 0.0, 1.0, -1.0) == y, axis=1, dtype=np.float64)
        else:
            exact = -np.sum(np.minimum((margins - y) ** 2, residual_cap(r.label_bound) ** 2), axis=1)
        return noisy(exact)

"""The solver privfit recommends for a classifier or a linear regression: a public rule of the model, n and ε.

This is the rule of the "Which solver when" table in ``docs/solvers.md``; ``benchmarks/utility.py`` scores exactly
this rule (its "recommended solver" section), so the table and the measurement cannot drift apart. It reads only
public quantities (the model, the number of rows n and the target ε), never a row.

**The rule** (issue 21; measured 2026-11-26 with ``benchmarks/utility.py``, 3 seeds, every solver at its defaults,
on UCI Adult, Telco churn and HR attrition for ``logistic`` and on the power plant and wine datasets for ``linear``):

* ``logistic``: ``objective_perturbation`` when n·ε ≥ 10,000, else ``dp_gd``. Objective perturbation must
  regularise with λ ≥ c/(nε) (its Jacobian term; :mod:`privfit.solvers.baselines.objective_perturbation`), a bias
  that vanishes as n·ε grows: where n·ε ≥ 10,000 it was the most accurate at ε = 1 (Adult 84.22 % against
  dp_gd's 83.69 %, HR AUC 0.804 against 0.785), below it lost to dp_gd (Telco at ε = 1, n·ε = 5,634: 80.01 against
  81.15 %; at ε = 0.1 on all three datasets, 68.7–81.0 against 76.0–81.8 %). ``dp_gd``, whose steps follow the
  public noise level, beat the majority class and diffprivlib at ε = 0.1 and 0.5 on the three datasets (HR at
  ε = 0.1 by 0.1 point).
* ``linear``: ``dp_gd`` (its squared-loss defaults clip residuals at a quarter of the label's half-range and run
  1000 steps with the suffix average): RMSE at ε = 1 within 10 % of non-private ridge on both regression datasets
  (power plant 4.86 MW against 4.53, wine white 0.761 against 0.742), and ahead of the training mean at every
  ε ≥ 0.1; ``dp_sgd``, which clips the same way, is within 0.1 MW and 0.03 of it everywhere (slightly ahead on the
  power plant, behind on wine).

**The exact noise sampler** (issue 25; :mod:`privfit.privacy.noise`). ``objective_perturbation`` needs noise with a
continuous density and is refused by a server that draws exact lattice noise; there the rule recommends ``dp_gd``
for ``logistic`` at every n·ε (the measured runner-up where n·ε ≥ 10,000: Adult 83.69 % against 84.22 %).

**Issue 34** (2026-11-28, ``benchmarks/preprocessing.py``): on a default server (exact noise, private
preprocessing at upload, ``dp_gd``'s re-derived schedule) the rule's ``dp_gd`` is within 1 point and 0.02 AUC of
non-private logistic regression at a total ε = 1 on Adult, Telco, HR and a synthetic skewed dataset with non-expert
schemas, and above diffprivlib on average at every ε ∈ {0.5, 1, 2, 5}; ``linear`` within 1.02 × ridge's RMSE.

Other models have a single natural choice, given in the table: ``resque_dpsgd`` for the non-smooth absolute and
quantile losses, ``dp_lazy_oco`` for its mean and linear-loss models.
"""

from __future__ import annotations

from dataclasses import dataclass

from privfit.privacy.noise import current_sampler

__all__ = ["OBJECTIVE_PERTURBATION_MIN_N_EPSILON", "Recommendation", "recommend"]

#: n·ε from which objective perturbation's regulariser floor c/(nε) stops costing accuracy (module docstring).
OBJECTIVE_PERTURBATION_MIN_N_EPSILON = 10_000.0


@dataclass(frozen=True)
class Recommendation:
    """The recommended solver and why, in one sentence."""

    solver: str
    reason: str


def recommend(model: str, n: int, epsilon: float, *, sampler: str | None = None) -> Recommendation:
    """The recommended solver for ``model`` on n rows at target ε (module docstring) for the noise ``sampler``
    (default: the one in force, :func:`~privfit.privacy.noise.current_sampler`).

    Raises ``ValueError`` for a model the rule does not cover (see the table in ``docs/solvers.md``), for n < 1
    and for a non-positive ε."""
    if n < 1 or not epsilon > 0:
        raise ValueError(f"need n ≥ 1 and ε > 0, got n = {n}, ε = {epsilon}")
    if model == "linear":
        return Recommendation("dp_gd", "linear regression: DP gradient descent, steps from the public noise level")
    if model != "logistic":
        raise ValueError(f"no measured recommendation for model {model!r}; see docs/solvers.md")
    if n * epsilon >= OBJECTIVE_PERTURBATION_MIN_N_EPSILON and (sampler or current_sampler()) == "exact":
        return Recommendation(
            "dp_gd",
            f"n·ε = {n * epsilon:.4g} ≥ {OBJECTIVE_PERTURBATION_MIN_N_EPSILON:.0f}, but objective perturbation needs "
            "continuous noise and this server draws exact lattice noise: DP gradient descent with steps from the "
            "public noise level",
        )
    if n * epsilon >= OBJECTIVE_PERTURBATION_MIN_N_EPSILON:
        return Recommendation(
            "objective_perturbation",
            f"n·ε = {n * epsilon:.4g} ≥ {OBJECTIVE_PERTURBATION_MIN_N_EPSILON:.0f}: objective perturbation's "
            "regulariser floor no longer costs accuracy",
        )
    return Recommendation(
        "dp_gd",
        f"n·ε = {n * epsilon:.4g} < {OBJECTIVE_PERTURBATION_MIN_N_EPSILON:.0f}: DP gradient descent with steps "
        "from the public noise level",
    )

r"""``dp_gd``: differentially private full-batch (projected) gradient descent on a convex GLM loss.

Algorithm (Bassily, Smith & Thakurta, FOCS 2014, Alg. 1 "noisy gradient descent"; Song, Chaudhuri & Sarwate,
GlobalSIP 2013; with per-example clipping as in Abadi et al., CCS 2016). Data ``x_i ∈ R^d`` (with a trailing
1 when fitting an intercept), labels ``y_i``, loss ``ℓ(θ; x, y) = φ(⟨θ, x⟩, y)`` from
:mod:`privfit.solvers.losses`, public radius R, L2 strength λ, clipping norm C, noise σ, step size η, T steps.
With θ_1 = 0 and, for t = 1..T,

    g_t     = Σ_i clip_C(∇ℓ(θ_t; x_i, y_i)) + N(0, σ² I_d),     clip_C(v) = v · min(1, C/‖v‖₂),        (1)
    θ_{t+1} = Π_R(θ_t − η (g_t / n + λ θ_t)),                     Π_R(v) = v · min(1, R/‖v‖₂).            (2)

The release is θ_{T+1} (``output="last"``, the default) or the average of the last ⌈T/2⌉ iterates
(``output="suffix_average"``, Shamir & Zhang, ICML 2013). Both are post-processing of (g_1, …, g_T).

**Privacy** (replace-one neighbours, DESIGN §1.1). Fix θ_t. If D and D' differ in row i only, the two clipped
sums in (1) differ in one term each of norm ≤ C, so

    ‖Σ_j clip_C(∇ℓ(θ_t; z_j)) − Σ_j clip_C(∇ℓ(θ_t; z'_j))‖₂ = ‖clip_C(∇ℓ(θ_t; z_i)) − clip_C(∇ℓ(θ_t; z'_i))‖₂ ≤ 2C,

whatever the data (clipping enforces it even for rows outside the declared bounds): step t is a Gaussian
mechanism of L2 sensitivity Δ = 2C and noise σ, which is (α, αΔ²/(2σ²))-RDP for every α > 1 (Mironov 2017,
Prop. 7). θ_t is a function of g_1..g_{t−1} only (the regulariser, the projection and n are public), so the T
steps are an ADAPTIVE composition, whose RDP curves add (Mironov 2017, Prop. 1):

    ε_RDP(α) = T · α (2C)² / (2σ²) = T α / (2 z²),      z = σ / (2C)  (the "noise multiplier").        (3)

The same T steps are (√T/z)-GDP, adaptively too (Dong, Roth & Su 2022, Cor. 3.3): their exact (ε, δ) curve is that
of one Gaussian with μ = √T/z. :meth:`DPGradientDescent.cost` returns exactly ``PrivacyCost.gaussian(grid,
sigma=σ, sensitivity=2C, count=T, coordinates=k·d')``: the curve (3) and Σ μ² = T/z² (a function of the public
settings only, computed before any row is read; :mod:`privfit.privacy.gaussian_dp`); the ledger converts it to
(ε, δ) and its filter admits it by its RDP orders or its Gaussian-DP certificate. Calibration to a target ε at δ is
:func:`privfit.privacy.gdp_gaussian_sigma` with ``sensitivity=2C, count=T``: σ = 2C√T/μ(ε, δ) on the exact curve,
the σ a PLD accountant certifies (it was :func:`privfit.privacy.gaussian_sigma`, the RDP conversion of (3), before
issue 40; the public noise level ρ below still uses that reference, so the schedules are unchanged). Under
add/remove the sensitivity would be C; privfit's relation is replace-one, hence 2C (the audit test detects a
C-calibrated σ).

**Clipping norm.** The default C is the loss's public Lipschitz constant G on the ball, derived from the
declared bounds (``GLMLoss.lipschitz``: G = B̃ for logistic/svm, δ·B̃ for Huber, (R·B̃ + B_y)·B̃ for the
squared loss, with B̃ = sqrt(B_x² + 1) under an intercept). Since θ_t stays in the ball, ‖∇ℓ‖ ≤ G and clipping
is then a no-op on rows that respect the bounds: the algorithm is exactly noisy projected GD on the true
gradient. A user C < G clips (trading bias for less noise); a user C > G is lowered to G (same output, less
noise). The regulariser gradient λθ_t is added after the noise: it is data-independent and costs nothing.

**Step size and defaults** (fixed, public; nothing is tuned on private data at fit time). The objective
F(θ) = (1/n) Σ ℓ_i(θ) + (λ/2)‖θ‖² is β-smooth with β = c·B̃² + λ (``smoothness``), and η = 1/β is the classic
step of projected GD: without noise F(θ_{T+1}) − F* ≤ β‖θ*‖²/(2T) (Beck & Teboulle 2009; Bubeck 2015, Thm 3.7).
β comes from the worst-case row norm, so on real data (features scaled from wide declared bounds) the problem
is ill-conditioned and 200 plain steps stop far from the optimum: on Adult, Telco churn and HR attrition the
noiseless 200-step objective gaps are 3.7e−2, 1.0e−2 and 2.4e−2 and the test accuracy 1–2 points below the
optimum of the same objective. Two free remedies (both are post-processing of the released g_1..g_{t−1}, so the
cost (3) is unchanged): more steps, and **Nesterov's momentum** in FISTA's form (Beck & Teboulle 2009) —

    v_t = Π_R(θ_t + (t − 1)/(t + 2) · (θ_t − θ_{t−1})),   g_t as in (1) at v_t,
    θ_{t+1} = Π_R(v_t − η (g_t/n + λ v_t)),                                                              (2′)

whose noiseless rate is O(βR²/T²) (gaps ≤ 1e−4 at T = 200–1000 on the three datasets) but which accumulates
the gradient noise over its momentum (Devolder, Glineur & Nesterov 2014), while plain GD forgets it. Which one
wins, and how many steps pay, depends on how large the noise is against the gradients, a PUBLIC quantity: the
noise level of a reference run of T₀ = 200 steps,

    ρ = σ(T₀) · sqrt(d) / (n · B̃),                                                                        (4)

the expected norm of the noise on the mean gradient against the scale B̃ of a gradient (|φ'| ≤ 1 for the
classification losses, a unit residual for the squared loss). The rule (``default_schedule``):

    ρ ≥ 0.15: plain, T = max(16, ⌈30/ρ⌉) (early stopping);
    0.0125 ≤ ρ < 0.15: plain, T = clamp(⌈25/ρ⌉, 200, 1000);
    0.005 ≤ ρ < 0.0125: Nesterov, T = 200;   ρ < 0.005: Nesterov, T = 300.

*Re-derived for issue 34* (2026-11-28): with private preprocessing at upload (:mod:`privfit.datasets.
preprocessing`) the numeric columns fill [−1, 1], the problem is far better conditioned, and plain steps beat
Nesterov's where they did not before. Measured on Adult, Telco churn, HR attrition and the synthetic skewed dataset
(``benchmarks/synthetic.py``), each with its non-expert schema and preprocessing (5 %), its expert schema with
preprocessing and its expert schema without, ε ∈ {0.5, 1, 2, 5}, δ = 1e−6, 3 seeds, test accuracy (points) of the
rule above against the former one (plain 200 for 0.03 ≤ ρ < 0.15, Nesterov 200 for 0.005 ≤ ρ < 0.03): non-expert
+ preprocessing, ε = 1: Adult 84.78 against 84.60, HR 77.57 / 76.20, synthetic 91.38 / 90.97, Telco unchanged
(ρ = 0.16: early stopping); ε = 2: Adult 84.75 / 84.20, HR 78.03 / 77.37, Telco 81.81 / 81.55. Expert with
preprocessing (the default path), ε = 1: HR 79.42 / 77.78, Adult 84.82 / 84.58, synthetic 91.25 / 90.56; ε = 2: HR
78.58 / 76.84, Adult 84.80 / 84.13; ε = 5: Telco 81.59 / 81.81 (the one cell that lost). Expert without
preprocessing, ε = 1: synthetic 91.25 / 90.25, Adult 83.78 / 83.69, HR 77.76 / 77.99 (AUC 0.793 / 0.780); ε = 2:
HR 77.60 / 76.70, Telco 81.71 / 81.48, Adult 84.14 / 84.34. Below ρ ≈ 0.0125 (ε = 5 on Adult, HR and the synthetic
data) Nesterov's 200 steps stayed best (Adult 84.62–84.70 against 84.17–84.57 for plain T = 1000, HR 78.12–78.48
against 77.24–77.37). The constant 25 sat between the best T of each dataset at each ρ (15 and 40 measured too:
15 favoured Telco at ρ ≥ 0.15, 40 HR at ρ ≈ 0.1). The step size was measured again on the same cells (non-expert
and expert schemas with preprocessing, ε ∈ {0.5, 1, 2, 5}, the rule's T and momentum): η ∈ {½, 1, 2, 4}/β; 1/β had
the best AUC, or one within 0.003 of it, in every cell but Telco at ε = 1 (non-expert: 0.849 against 0.853 at ½/β),
while 2/β and 4/β lost up to 1.6 / 2.9 accuracy points on Telco (81.50 % against 79.91 / 78.59 at ε = 1): η = 1/β
stays.

It was first read off one measurement of every (method, T) ∈ {plain, Nesterov} × {100, 200, 300, 500, 1000} on the
three binary datasets (logistic, R = 10) and the two regression ones (linear, R = 1) at ε ∈ {0.1, 0.5, 1, 2, 5,
50}, δ = 1e−6, 2–4 noise seeds (2026-11-25; test accuracy points against the optimum of the same objective):
plain T = 200 is best whenever ρ ≳ 0.1 (every dataset at ε = 0.1; more steps add noise: Adult at ε = 0.1 loses
4.6 points at T = 1000, Nesterov 7–10); for 0.03 ≤ ρ < 0.1 plain T = 1000 gained a little (Adult ε = 0.5 / 1:
+0.5 / +0.6 points over T = 200, HR +0.2 / +0.4; Telco at ρ = 0.08: −0.3) but is not the default: its noise
random walk η·σ·sqrt(T·d)/n, the honest bound of the noise outlook (:meth:`DPGradientDescent._noise_norm`),
is 5× that of T = 200 and would warn of a noise-dominated fit that in fact was not; below ρ ≈ 0.03 Nesterov
wins (Adult ε = 5: 84.70 % against 84.28 % for plain T = 1000; HR 79.1 against 77.8), and at
ε = 50 it reaches the optimum (Δ −0.11 / −0.25 / −0.05 points on Adult / Telco / HR with the rule's T, against
−1.8 / −0.6 / −0.5 for the former fixed plain 200 steps), where T = 500–1000 lose again to the noise (Adult
−0.16 / −0.31, Telco −0.51 / −1.05). On the squared loss ρ is 3–4.5× larger than on the logistic at the same
ε (its Lipschitz constant (R·B̃ + 1)·B̃, hence σ, is larger), which keeps the rule on plain GD up to ε = 5 there,
where Nesterov was worse (wine RMSE 1.57 against 1.15 × the optimum's at ε = 5). Passing ``steps`` or
``momentum`` overrides either half of the rule. The last iterate is released by default (averaging slows the
dominant optimisation term); ``output="suffix_average"`` averages the last ⌈T/2⌉ iterates. Radius defaults: see
:data:`privfit.solvers.base.DEFAULT_RADIUS`. λ defaults to 0 (the ball already regularises; λ > 0 makes the
objective strongly convex and the solution unique).

*Early stopping when the noise is high* (the first band, 2026-11-26). Where ρ is large the noise, not the
optimisation, dominates: σ(T) grows like sqrt(T) at a fixed ε, and the first steps from θ = 0 move along the
class-mean difference and the label mean, which a few noisy steps estimate better than many (stopping early is
the regulariser). Measured on Adult, Telco and HR (logistic, 4–8 seeds) at ε = 0.1: the best T was ≈ 100 on
Adult (ρ = 0.46; 82.1 % against 81.8 % at T = 200), 50–100 on HR (ρ = 0.47; 76.9–77.1 % against 74.9 %, the
majority class being 76.2 %), 12–20 on Telco (ρ = 1.43; 74.5–74.9 % against 68.3 %, majority 73.5 %); at ε = 0.5
T = 100 was as good as 200 on Telco (ρ = 0.30: 79.7 % against 79.0 %). T ≈ 30/ρ sits between those optima on
every dataset (a constant of 40 favoured Adult, 23 Telco); with it, 6 seeds: Adult 82.1 / 83.1 % at ε = 0.1 /
0.2, Telco 75.4 / 76.7 %, HR 76.3 / 77.7 %. On the regression datasets (linear, where ρ is 3–5× larger at the
same ε) it is as good or better than T = 200: wine RMSE 0.95 against 1.13 at ε = 1, power plant equal.

**Linear regression** (the squared loss; 2026-11-26, power plant and wine white, 3 seeds, RMSE of ``/predict``
against non-private ridge's 4.53 MW and 0.742). Two defaults differ from the classification losses.
*Clipping.* The Lipschitz constant of ½(⟨θ, x⟩ − y)² on the ball is G = (R·B̃ + B_y)·B̃, the gradient at the
worst residual R·B̃ + B_y of any θ in the ball; residuals of a useful model are far smaller (0.09 and 0.15 in
encoded label units on the two datasets). The default clips at C = B̃/4 (``RESIDUAL_CLIP`` = ¼ of the label's
half-range B_y = 1; :func:`default_clip_norm`): a residual beyond ¼ counts as ¼ (the Huber loss of that
threshold), and the noise is (R·B̃ + 1)·4 ≈ 13–18× smaller than at C = G. Clipping at ½ and 1 was in between
(ε = 1, power plant: 5.8 / 5.5 MW against 5.1 at ¼ and 7.2 at G).
*Schedule* (``SQUARED_LOSS_SCHEDULE``): T = 1000 plain steps with the suffix average, at every ρ. With the
smaller C, ρ falls into the Nesterov bands of the classification rule, where momentum accumulated the noise
(ε = 1: 5.08 MW and 0.909 with Nesterov T = 200, 5.42 and 0.789 plain T = 200, 4.86 and 0.761 with T = 1000
and the suffix average); at ε = 0.1 the early-stopping band lost on wine (0.968 at T = 116 against 0.852, the
training mean scoring 0.883) and won on the power plant (6.26 MW at T = 200 against 7.50). Result at ε = 0.1 /
0.5 / 1 / 2 / 5: power plant 7.50 / 5.11 / 4.86 / 4.78 / 4.75 MW (was 10.17 / 8.33 / 7.19 / 5.86 / 5.46), wine
0.852 / 0.787 / 0.761 / 0.754 / 0.751 (was 1.443 / 1.218 / 0.959 / 0.967 / 0.835). Re-measured for issue 34 with
private preprocessing (non-expert and expert schemas, ε ∈ {0.5, 1, 2, 5}, 3 seeds) against 300 and 2000 averaged
steps, 1000 last-iterate steps and Nesterov's 200: the default was the best or within 2.2 % of it in every cell
(the farthest: the non-expert power plant at ε = 0.5, 4.81 MW against 4.71 for 300 steps); 2000 steps were within
±1 % of it, Nesterov 1–44 % worse. Kept.

**Multiclass** (a categorical label with k ≥ 3 classes; issue 22 §3). ``model: "logistic"`` on such a label fits
the multinomial logistic model (:class:`~privfit.solvers.losses.MultinomialLogisticLoss`): θ = vec(Θ), Θ ∈ R^{k×d'}
(d' = d + 1 with the intercept), ℓ = −log softmax(Θx)_y, per-example gradient (p − e_y)xᵀ of Frobenius norm
‖p − e_y‖·‖x‖ ≤ √2·B̃ = G, smoothness β = B̃²/2. Step (1) clips each per-example gradient MATRIX in Frobenius norm to
C (:func:`~privfit.solvers.geometry.clipped_outer_sum`) and adds N(0, σ²I_{k·d'}); (2) projects onto the Frobenius
ball of radius R. The privacy proof above holds word for word in R^{k·d'}: the clipped sums of neighbours differ in
one summand of norm ≤ C per side, so each step is a Gaussian mechanism of sensitivity 2C and the cost is (3),

    ε_RDP(α) = T · α (2C)² / (2σ²),

unchanged in form (only C and the dimension differ; tested against dp_accounting). The noisy sum is then projected
onto V = {Σ_j θ_j = 0} (:meth:`~privfit.solvers.losses.MultinomialLogisticLoss.identifiable`): post-processing,
since every clipped gradient lies in V and softmax ignores a shift common to all classes; it drops the noise that
moves no prediction and keeps the released class rows identifiable (they sum to zero). The noise level (4) uses the
dimension k·d' of the noise drawn; the outlook (:meth:`DPGradientDescent._noise_norm`) the (k − 1)·d' dimensions
left after the projection (:func:`noise_dimension`). Its thresholds were calibrated on binary fits; on the
multinomial model with its longer runs the flat-direction random walk it measures overstates the noise (curvature
contracts it): wine at ε = 0.5–2 is "moderate" (ratio ≈ 0.76) while the fits beat the majority class by 4–6 points,
and a 3-class synthetic fit that classifies well at ε = 0.5 is "high". Re-calibrating it for k ≥ 3 is open.

*Defaults* (``MULTICLASS_CLIP``, ``MULTICLASS_STEP_FACTOR``, :func:`multiclass_schedule`; public: functions of ρ,
hence of n, d, k, ε, δ and the bounds): C = G/4 (a residual ‖p − e_y‖ beyond √2/4 counts as √2/4, the analogue of
the squared loss's residual clip) at every ρ; where ρ ≥ 0.03, T = clamp(⌈100/ρ⌉, 500, 2000) plain steps at
η = 2/β (β is a worst-case bound; real rows are far shorter than B̃, and the projection keeps the iterates bounded
whatever the step); below ρ = 0.03 (the binary rule's band edge), Nesterov momentum, T = 200, η = 1/β; always the
last iterate. Chosen 2026-11-26 on wine white, the only multiclass development dataset (quality as 7 classes,
n = 3,918 training rows, d = 11; δ = 1e−6; 3 noise seeds on each of three seeded stratified 80/20 splits; accuracy
points below non-private scikit-learn ``LogisticRegression(C=1)``, which scores 50.1 / 55.1 / 52.6 % on the three
splits; the majority class is 44.9 %), so the constants are in-sample for that dataset:

* ε = 1 (ρ = 0.106): T = 1000 plain at 2/β −0.1 / 4.8 / 3.2 (mean 2.6); at 1/β, 3/β, 4/β, 6/β: worse (mean 2.7–3.5);
  T = 500 / 700 / 1500 / 2000 / 3000: mean 2.6–3.9; Nesterov (η = 1/β) T = 40 / 60 / 100 / 150 / 300: 7.4 / 4.7 / 2.6
  / 3.8 / 6.2; C = G (no clipping) and C = G/2 lost 2–3 points more to the noise, C = G/8 clipped too much; R = 5 lost
  2 points, R = 20 / 40 changed < 0.5; λ = 10⁻³ / 3·10⁻³ / 10⁻²: 2.9 / 3.6 / 6.4.
* ε = 0.5 (ρ = 0.20): T = 500 3.3 against 3.7 at T = 1000 (Nesterov T = 50 / 100: 5.1 / 4.0).
* ε = 2 (ρ = 0.056): T = 2000 1.5 against 2.1 at 1000 and 2.3 at 3000 (Nesterov T = 100 / 200: 2.3 / 2.4).
* ε = 5 (ρ = 0.024): Nesterov T = 200 0.5 (T = 150 / 300: 0.6 / 1.7) against 1.9 for 1000 plain steps.

Without noise these defaults reach 51.8 % on the second split (scikit-learn 55.1): the rest of the gap there is the
optimisation of an ill-conditioned problem (features scaled from wide public bounds) in a public number of clipped
steps, which more steps close only at the price of more noise per step.

Memory and time: per-example gradients are never formed — a GLM gradient is a multiple of its row, so the
clipped sum is two matrix-vector products with the row norms computed once
(:func:`~privfit.solvers.geometry.clipped_scaled_row_sum`). Under the public rule
:func:`~privfit.solvers.float32_design.float32_suffices` a step runs on a float32 copy of the design matrix in one
compiled pass that reads each row once (:mod:`privfit.solvers.float32_design`: margins, slopes, clipping weights and
a blocked sum whose sensitivity is ≤ 2C with every rounding included, by 64-row blocks, on the machine's cores;
for a categorical label float32 logits and the Frobenius-clipped blocked sum of the same bound), and
that copy is built once per dataset and process and shared by its fits (:mod:`privfit.solvers.design_cache`; such a
fit does not prepare the float64 design matrix at all). Issue 40 (``benchmarks/dp_gd_scaling.py``): 50 steps at
n = 10⁶, d = 50 and n = 10⁵, d = 500 take 0.4–0.5 × the time of a float32 numpy loop of the same steps (2.2–2.3 ×
before); on Adult 200 steps take 0.4 × a float64 numpy loop (``benchmarks/dp_gd_speed.py``). A fit needs O(n·d) for
the design matrix (n·d·4 bytes for the float32 copy, kept by the cache) and O(n) beyond it; cost per step O(n·d).

**Data-independent observables** (DESIGN §4; issue 18). This solver **runs a public number of iterations**: T
steps, each computing the n margins, slopes and clipping factors with fixed work
(:func:`~privfit.solvers.geometry.clipped_scaled_row_sum`; the float32 pass, "Work" in
:mod:`privfit.solvers.float32_design`) and drawing one N(0, σ²I) vector; the stop is polled and progress reported
once per step. Rows outside the declared bounds are brought to them first
(:func:`~privfit.solvers.base.enforce_declared_bounds`), so no numerical failure can come from row values. Whether a
fit finds its dataset's float32 design already built depends on the fits this process ran before and public sizes
only (:mod:`privfit.solvers.design_cache`).

**User-level privacy** (a dataset with a privacy unit, DESIGN §1.1; issue 37). The schema names a unit column (a
customer, a patient); at upload every unit keeps at most k rows (the public ``max_rows_per_unit``). Neighbouring
datasets D ~ D' now differ in ONE UNIT: the rows of one unit u replaced by the rows of another (up to k rows on each
side, with any values, and possibly a different number of rows). The number of units U is public and is the
metadata's n; the number of rows is not. With the units given (:class:`~privfit.solvers.units.UnitIndex`, the fit's
``units``), step (1) becomes

    g_t = Σ_{u=1..U} clip_C( Σ_{i ∈ u} ∇ℓ(θ_t; x_i, y_i) ) + N(0, σ² I),                                        (1u)

the noisy sum of each unit's SUMMED gradient clipped to C (:func:`~privfit.solvers.units.clipped_unit_gradient_sum`;
for the multinomial loss each unit's K × d gradient matrix is clipped in Frobenius norm), divided in (2) by U (public),
with the same σ, the same noise stream (the public bound on a coordinate of the sum is U·C) and no float32 path.

*Proof.* Fix θ_t. D and D' share every unit but u, so the two sums in (1u) share every summand but u's, and

    ‖(1u)(D) − (1u)(D')‖₂ = ‖clip_C(Σ_{i ∈ u in D} ∇ℓ_i) − clip_C(Σ_{i ∈ u in D'} ∇ℓ_i)‖₂ ≤ C + C = 2C,

whatever the unit's number of rows on either side and whatever its values (clipping bounds each side; rows outside
the declared bounds are brought to them first, which changes nothing in the argument). So each step is a Gaussian
mechanism of replace-one-UNIT sensitivity 2C, θ_t is a public function of g_1..g_{t−1} (U, λ, R, η are public),
and the T steps compose exactly as in (3): the cost is T · α(2C)²/(2σ²), the SAME curve, computed by the same
:meth:`DPGradientDescent.cost` with n = U, and the calibration and the defaults (ρ with n = U) are unchanged in form.
The resolved settings record ``max_rows_per_unit``, so the stored cost says for which relation it holds.

*Why clipping each row would not do.* Under per-row clipping a unit contributes Σ_{i ∈ u} clip_C(∇ℓ_i), a sum of up
to k vectors of norm ≤ C: replacing the unit moves the gradient sum by up to 2kC (k rows pushing one way replaced by
k rows pushing the other), k times the sensitivity the noise is calibrated for — the cost would understate the RDP by
a factor k² (the audit in ``tests/solvers/baselines/test_unit_level.py`` detects it at k = 8). Clipping the unit's
sum costs the same noise as one row, whatever k: a large k only lets a unit with many rows weigh as much as any
other once clipped.

*Observables.* The number of steps, the draws (one N(0, σ²I) vector of the public dimension per step), the progress
and the stop polls are those of the row-level fit with n = U: none depends on the number of rows or on the units'
sizes. Only the run time of each step's numpy pass (O(rows·d)) grows with the rows read, as it does with n.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from privfit.privacy import OrderGrid, PrivacyCost, PrivacyParameterError, gaussian_sigma, gdp_gaussian_sigma
from privfit.privacy.noise import gaussian_stream
from privfit.solvers.base import (
    MAX_SCALE,
    MIN_SCALE,
    FitRun,
    FloatArray,
    GLMParams,
    PrivacyRequest,
    ProgressReporter,
    PublicMetadata,
    Solver,
    SolverParameterError,
    UnitLevelGLMResolved,
    design_bound,
    glm_resolved_fields,
    gradient_noise_norm,
    parameter_loss,
    resolved_loss,
    unit_fields,
)
from privfit.solvers.compiled_losses import LOSS_KINDS
from privfit.solvers.design_cache import shared_float32_design
from privfit.solvers.float32_design import Float32Design, Precision, float32_suffices, step_pool
from privfit.solvers.geometry import clip_rows, clipped_outer_sum, clipped_scaled_row_sum, row_norms
from privfit.solvers.losses import GLMLoss, MultinomialLogisticLoss, RegularizedLoss
from privfit.solvers.partitioned import PartitionedRows
from privfit.solvers.units import UnitIndex, clipped_unit_gradient_sum

__all__ = [
    "DEFAULT_STEPS",
    "MULTICLASS_CLIP",
    "MULTICLASS_STEP_FACTOR",
    "REFERENCE_STEPS",
    "SQUARED_LOSS_SCHEDULE",
    "ClippedGradientConstants",
    "DPGDParams",
    "DPGDResolved",
    "DPGradientDescent",
    "clipped_gradient_constants",
    "clipped_gradient_sum",
    "default_clip_norm",
    "default_schedule",
    "dp_gradient_descent",
    "multiclass_schedule",
    "noise_dimension",
    "public_noise_level",
    "reference_noise_level",
    "theta_dimension",
]

DEFAULT_STEPS = 200
#: T₀ of the public noise level ρ = σ(T₀)·sqrt(d)/(n·B) that picks the default schedule
REFERENCE_STEPS = 200
MAX_STEPS = 100_000

Output = Literal["last", "suffix_average"]
Momentum = Literal["none", "nesterov"]


class DPGDParams(GLMParams):
    """Parameters of ``dp_gd`` (all optional; the defaults need no tuning)."""

    steps: int | None = Field(
        None,
        ge=1,
        le=MAX_STEPS,
        description="Number T of full-batch gradient steps. Each costs one Gaussian mechanism; the noise σ grows "
        "like sqrt(T) at a fixed ε. Default: from the public noise level ρ (16–300 steps; see 'momentum'); 1000 "
        "for the 'linear' model; for a categorical label (multinomial logistic) ⌈100/ρ⌉ clamped to [500, 2000], "
        "or 200 with momentum where ρ < 0.03.",
    )
    momentum: Literal["auto", "none", "nesterov"] = Field(
        "auto",
        description="'nesterov': FISTA's extrapolation (free: it post-processes past releases); 'none': plain "
        "projected GD. 'auto' picks from the public noise level ρ = σ₂₀₀·sqrt(d)/(n·B) of a 200-step run: "
        "plain with T = max(16, ⌈30/ρ⌉) if ρ ≥ 0.15 (early stopping) and T = 200 if 0.03 ≤ ρ < 0.15, Nesterov "
        "with T = 200 if 0.005 ≤ ρ < 0.03 and with T = 300 below; plain for the 'linear' model; for a categorical "
        "label Nesterov where ρ < 0.03, else plain (ρ uses the dimension k·d).",
    )
    step_size: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=MAX_SCALE,
        description="Step size η. Default 1/β, with β = c·B² + λ the public smoothness of the objective "
        "(c = 1/4 logistic, 1 linear/huber, 1/h svm, 1/2 multinomial; B the row-norm bound, with intercept "
        "sqrt(B² + 1)); 2/β for a categorical label with plain steps.",
    )
    clip_norm: float | None = Field(
        None,
        ge=MIN_SCALE,
        le=1e9,
        description="Per-example gradient clipping norm C; the gradient sum has replace-one sensitivity 2C. "
        "Maximum: the loss's public Lipschitz constant G from the declared bounds. Default: G (clipping "
        "changes nothing on rows within the bounds), except for 'linear': B/4, i.e. residuals clipped at a "
        "quarter of the label's half-range (B the row-norm bound, with intercept sqrt(B² + 1)), and for a "
        "categorical label: G/4 = √2·B/4 (Frobenius norm of the gradient matrix).",
    )
    noise_multiplier: float | None = Field(
        None,
        gt=0.0,
        le=1e8,
        description="Explicit noise instead of a target ε: z = σ / (2C), the Gaussian noise standard deviation "
        "on the gradient sum in units of its sensitivity 2C. Each step is then (α, α/(2z²))-RDP. Leave unset "
        "when a target ε is given (σ is then calibrated).",
    )
    output: Output | None = Field(
        None,
        description="'last': release the final iterate; 'suffix_average': the average of the last ⌈T/2⌉ iterates "
        "(helps at very small ε or large T). Default: 'suffix_average' for the 'linear' model (T = 1000), "
        "else 'last'.",
    )


class DPGDResolved(UnitLevelGLMResolved):
    """Fully resolved ``dp_gd`` settings (public, data-independent; JSON-serialisable)."""

    solver: Literal["dp_gd"] = "dp_gd"
    formula_version: Literal["dp_gd/gaussian-rdp-2C/v1"] = "dp_gd/gaussian-rdp-2C/v1"  # cost unchanged by momentum
    l2: float = Field(ge=0.0)
    radius: float = Field(gt=0.0)
    lipschitz: float = Field(gt=0.0, description="Public Lipschitz bound G of the unregularised loss on the ball.")
    smoothness: float = Field(gt=0.0, description="Public smoothness β of the regularised objective.")
    steps: int = Field(ge=1, le=MAX_STEPS)
    step_size: float = Field(gt=0.0)
    clip_norm: float = Field(gt=0.0, description="Clipping norm C actually used (≤ G).")
    sensitivity: float = Field(gt=0.0, description="Replace-one L2 sensitivity 2C of each step's gradient sum.")
    sigma: float = Field(gt=0.0, description="Standard deviation of the Gaussian noise added to each gradient sum.")
    noise_multiplier: float = Field(gt=0.0, description="σ / (2C).")
    output: Output
    momentum: Momentum
    noise_level: float = Field(
        ge=0.0, description="Public noise level ρ = σ₂₀₀·sqrt(d)/(n·B) that chose the defaults (module docstring)."
    )


@dataclass(frozen=True)
class ClippedGradientConstants:
    """The public constants of a clipped-gradient method (``dp_gd``, ``dp_sgd``), from the declared bounds."""

    radius: float
    lipschitz: float
    smoothness: float
    clip_norm: float
    step_size: float

    def resolved_fields(self) -> dict[str, float]:
        """The constants as fields of the resolved settings (same names)."""
        return asdict(self)


def clipped_gradient_constants(params: GLMParams, meta: PublicMetadata) -> ClippedGradientConstants:
    """R, the loss's Lipschitz constant G on the ball, the objective's smoothness β = c·B² + λ, the clipping
    norm C (the user's, capped at G; default G) and the step size (the user's; default 1/β). ``params`` must
    have the fields ``clip_norm`` and ``step_size`` (None for the defaults)."""
    radius = params.effective_radius()
    bound = design_bound(meta, params.fit_intercept)
    lipschitz = parameter_loss(params, meta).lipschitz(bound, meta.label_bound, radius)
    smoothness = parameter_loss(params, meta, l2=params.l2).smoothness(bound)
    if not (lipschitz > 0.0 and math.isfinite(lipschitz)):
        raise SolverParameterError("row_norm_bound", "gives a zero or infinite Lipschitz constant")
    clip_norm: float | None = getattr(params, "clip_norm", None)
    step_size: float | None = getattr(params, "step_size", None)
    return ClippedGradientConstants(
        radius=radius,
        lipschitz=lipschitz,
        smoothness=smoothness,
        clip_norm=min(default_clip_norm(params.model, bound, meta.label_bound, lipschitz, meta.classes), lipschitz)
        if clip_norm is None
        else min(clip_norm, lipschitz),
        step_size=1.0 / smoothness if step_size is None else step_size,
    )


#: The default clipping of the squared loss, as a residual in label units (module docstring, "Linear regression").
RESIDUAL_CLIP = 0.25


def default_clip_norm(
    model: str, bound: float, label_bound: float, lipschitz: float, classes: Sequence[str] | None = None
) -> float:
    """The default clipping norm: the Lipschitz constant G (clipping is then a no-op on rows within the declared
    bounds), except for the squared loss (``linear``), whose per-example gradient (⟨θ, x⟩ − y)·x is clipped at
    C = r₀·B_y·B̃ with r₀ = :data:`RESIDUAL_CLIP`: a residual beyond r₀·B_y counts as r₀·B_y (the Huber loss of
    that threshold), instead of G = (R·B̃ + B_y)·B̃, the worst residual of any θ in the ball; and the multinomial
    loss (a categorical label), whose gradient (p − e_y)xᵀ is clipped at C = c₀·G = c₀·√2·B̃ with
    c₀ = :data:`MULTICLASS_CLIP` (module docstring, "Multiclass")."""
    if classes is not None:
        return MULTICLASS_CLIP * lipschitz
    if model == "linear":
        return RESIDUAL_CLIP * label_bound * bound
    return lipschitz


#: The multinomial loss's default clipping, as a fraction of G = √2·B̃ (module docstring, "Multiclass").
MULTICLASS_CLIP = 0.25
#: The multinomial loss's default step size for plain steps, in units of 1/β (module docstring, "Multiclass").
MULTICLASS_STEP_FACTOR = 2.0
#: The squared loss's default (T, momentum, release) at every noise level (module docstring, "Linear regression").
SQUARED_LOSS_SCHEDULE: tuple[int, Momentum, Output] = (1000, "none", "suffix_average")

#: the bands of :func:`default_schedule` (module docstring, "Step size and defaults")
EARLY_STOP_CONSTANT = 30.0
HIGH_NOISE_LEVEL = EARLY_STOP_CONSTANT / DEFAULT_STEPS
MIN_STEPS = 16
LONG_RUN_CONSTANT = 25.0
LONG_RUN_MAX_STEPS = 1000
MOMENTUM_NOISE_LEVEL = 0.0125
DEEP_MOMENTUM_NOISE_LEVEL = 0.005
#: the band edges of dp_sgd's epoch rule (:func:`privfit.solvers.baselines.dp_sgd.default_epoch_schedule`), on the
#: same public ρ (they were dp_gd's before issue 34 re-derived its bands)
PLAIN_NOISE_LEVEL = 0.03
NESTEROV_NOISE_LEVEL = 0.005

#: The multinomial loss's plain-step schedule T = clamp(⌈c/ρ⌉, T_min, T_max) (module docstring, "Multiclass").
MULTICLASS_STEPS_CONSTANT = 100.0
MULTICLASS_MIN_STEPS = 500
MULTICLASS_MAX_STEPS = 2000
#: Below dp_gd's PLAIN_NOISE_LEVEL: Nesterov momentum, this many steps at η = 1/β.
MULTICLASS_NESTEROV_STEPS = 200


def multiclass_schedule(noise_level: float) -> tuple[int, Momentum, float]:
    """The multinomial loss's default (T, momentum, step factor η·β) for the public noise level ρ (module
    docstring, "Multiclass"): plain steps at η = 2/β with T = clamp(⌈100/ρ⌉, 500, 2000) where ρ ≥ 0.03, Nesterov
    momentum with T = 200 at η = 1/β below (the binary rule's band edge)."""
    if noise_level < PLAIN_NOISE_LEVEL:
        return MULTICLASS_NESTEROV_STEPS, "nesterov", 1.0
    steps = min(MULTICLASS_MAX_STEPS, max(MULTICLASS_MIN_STEPS, math.ceil(MULTICLASS_STEPS_CONSTANT / noise_level)))
    return steps, "none", MULTICLASS_STEP_FACTOR


def theta_dimension(d: int, fit_intercept: bool, classes: Sequence[str] | None) -> int:
    """The number of released parameters: d' = d + 1 with an intercept (else d), times k for a categorical label
    with k classes (vec Θ, Θ ∈ R^{k×d'}). The dimension of every noise vector, hence of the noise level and the
    outlook."""
    return (d + int(fit_intercept)) * (1 if classes is None else len(classes))


def noise_dimension(d: int, fit_intercept: bool, classes: Sequence[str] | None) -> int:
    """The dimension of the noise left in the released θ: :func:`theta_dimension`, except for a categorical label,
    whose noisy sums are projected onto {Σ_j θ_j = 0} (module docstring, "Multiclass"): (k − 1)·d'. The outlook's
    noise norm uses it (exact for the projected Gaussian)."""
    full = theta_dimension(d, fit_intercept, classes)
    return full if classes is None else full - (d + int(fit_intercept))


def public_noise_level(reference_sigma: float, meta: PublicMetadata, fit_intercept: bool) -> float:
    """ρ = σ₂₀₀·sqrt(d)/(n·B̃): the expected norm of one step's noise on the mean gradient of a 200-step run
    (σ₂₀₀ = ``reference_sigma``), relative to the public bound B̃ on a row's norm (with intercept). Public: a
    function of (n, d, ε, δ, the declared bounds) only. ``dp_sgd`` reads its defaults from the same ρ."""
    dimension = theta_dimension(meta.d, fit_intercept, meta.classes)
    return reference_sigma * math.sqrt(dimension) / (meta.n * design_bound(meta, fit_intercept))


def reference_noise_level(
    target: tuple[float, float] | None, sensitivity: float, meta: PublicMetadata, fit_intercept: bool, grid: OrderGrid
) -> float | None:
    """ρ of :func:`public_noise_level` for a target (ε, δ) and a per-step sensitivity, for solvers that read their
    defaults from it (``dp_sgd``, ``resque_dpsgd``). None without a target (explicit noise) or when the 200-step
    reference itself is beyond the noise cap (an ε so small that every run is noise: their first band applies,
    and their own calibration, with its sampling amplification, decides whether the fit is possible)."""
    if target is None:
        return None
    try:
        reference = gaussian_sigma(*target, sensitivity=sensitivity, count=REFERENCE_STEPS, grid=grid)
    except PrivacyParameterError:
        return None
    return public_noise_level(reference.noise, meta, fit_intercept)


def default_schedule(noise_level: float) -> tuple[int, Momentum]:
    """The default (T, momentum) for the public noise level ρ (module docstring, "Step size and defaults")."""
    if noise_level >= HIGH_NOISE_LEVEL:
        return max(MIN_STEPS, math.ceil(EARLY_STOP_CONSTANT / noise_level)), "none"
    if noise_level >= MOMENTUM_NOISE_LEVEL:
        return min(LONG_RUN_MAX_STEPS, max(DEFAULT_STEPS, math.ceil(LONG_RUN_CONSTANT / noise_level))), "none"
    if noise_level >= DEEP_MOMENTUM_NOISE_LEVEL:
        return DEFAULT_STEPS, "nesterov"
    return 300, "nesterov"


def clipped_gradient_sum(
    loss: GLMLoss | MultinomialLogisticLoss,
    theta: FloatArray,
    X: FloatArray,
    y: FloatArray,
    clip_norm: float,
    *,
    norms: FloatArray | None = None,
    design: Float32Design | None = None,
    pool: ThreadPoolExecutor | None = None,
) -> FloatArray:
    r"""``Σ_i clip_C(∇ℓ(θ; x_i, y_i))`` for each row θ of ``theta`` (shape (k, d) → (k, d); (d,) → (d,)).

    The per-example gradients ``φ'(⟨θ, x_i⟩, y_i) x_i`` (eq. (1) of :mod:`privfit.solvers.losses`) are
    multiples of the rows, so they are clipped and summed by
    :func:`~privfit.solvers.geometry.clipped_scaled_row_sum` without being formed: the margins ``X θᵀ``, the
    slopes φ', one factor min(1, C/(|φ'|‖x_i‖)) per row and ``Xᵀ w`` — O(n·d) time and O(n·k) memory beyond X.
    Every summand has norm ≤ C exactly, so the sum has replace-one sensitivity 2C for every θ. ``norms`` are
    the row norms ‖x_i‖ (computed here when not given; a fit passes them once). ``loss`` must be unregularised
    (the regulariser is not a per-example term). Several θ at once (k > 1) serve the vectorised privacy audit.

    For the multinomial loss each θ is vec(Θ) (length K·d for K classes) and the per-example gradient is the
    rank-one matrix (p_i − e_{y_i}) x_iᵀ, clipped in FROBENIUS norm (the L2 norm of its vec) by
    :func:`~privfit.solvers.geometry.clipped_outer_sum`: again every summand has norm ≤ C, the sum sensitivity 2C.

    With ``design`` (the float32 rows of X) the margins and the clipped sum run in float32 in one compiled pass over
    the rows (:meth:`~privfit.solvers.float32_design.Float32Design.clipped_gradient_sum`, on ``pool``'s threads when
    given), whose blocked sum has replace-one sensitivity ≤ 2C including every rounding (its module docstring); for
    the multinomial loss the logits, residuals and Frobenius-clipped sum are one such pass too
    (:meth:`~privfit.solvers.float32_design.Float32Design.clipped_multinomial_sum`; "Multiclass" there).
    ``X`` is then not read.
    """
    if isinstance(loss, RegularizedLoss) or (isinstance(loss, MultinomialLogisticLoss) and loss.l2 > 0.0):
        raise SolverParameterError("loss", "pass the unregularised loss; the L2 term is added after the noise")
    single = np.ndim(theta) == 1
    Theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    if isinstance(loss, MultinomialLogisticLoss) and design is not None:
        classes = loss.class_index(y)
        total = np.stack([
            design.clipped_multinomial_sum(loss.as_matrix(row, design.d), classes, clip_norm, pool).ravel()
            for row in Theta
        ])  # fmt: skip
    elif isinstance(loss, MultinomialLogisticLoss):
        d = X.shape[1]
        total = np.stack([
            clipped_outer_sum(X, loss.residuals(loss.as_matrix(row, d), X, y), clip_norm, norms=norms).ravel()
            for row in Theta
        ])  # fmt: skip
    elif design is not None and loss.name in LOSS_KINDS:
        parameter = float(next(iter(loss.public_params().values()), 0.0))  # Huber's δ, the hinge's h; else none
        total = design.clipped_gradient_sum(loss.name, parameter, Theta, y, clip_norm, pool)
    elif design is not None:
        slopes = loss.dphi(design.margins(Theta), np.asarray(y, dtype=np.float64)[:, None])
        total = design.clipped_sum(slopes, clip_norm, pool)
    else:
        slopes = loss.dphi(X @ Theta.T, np.asarray(y, dtype=np.float64)[:, None])  # (n, k): φ'(⟨θ_j, x_i⟩, y_i)
        total = clipped_scaled_row_sum(X, slopes, clip_norm, norms=norms)
    return total[0] if single else total


def parameter_dimension(loss: GLMLoss | MultinomialLogisticLoss, d: int) -> int:
    """The length of θ for rows of dimension d: d for a GLM loss, K·d (vec Θ) for the multinomial loss."""
    return loss.parameter_dimension(d) if isinstance(loss, MultinomialLogisticLoss) else d


@contextlib.contextmanager
def _shut_down_after(pool: ThreadPoolExecutor | None) -> Iterator[None]:
    """Shut the fit's step threads down when its steps end (however they end)."""
    try:
        yield
    finally:
        if pool is not None:
            pool.shutdown(wait=True)


def dp_gradient_descent(
    X: FloatArray,
    y: FloatArray,
    *,
    loss: GLMLoss | MultinomialLogisticLoss,
    clip_norm: float,
    sigma: float,
    steps: int,
    step_size: float,
    radius: float,
    l2: float = 0.0,
    rng: np.random.Generator,
    output: Output = "last",
    momentum: Momentum = "none",
    runs: int = 1,
    reporter: ProgressReporter | None = None,
    precision: Precision = "float32",
    units: UnitIndex | None = None,
    partitions: PartitionedRows | None = None,
    design: Float32Design | None = None,
) -> FloatArray:
    r"""Run iterations (1)–(2) of the module docstring; returns the released θ, shape (runs, p) with p = d, or
    p = K·d (vec Θ, the projection Π_R then being onto the Frobenius ball) for the multinomial loss.

    ``partitions`` (issue 39): rows held elsewhere, by partitions (:mod:`privfit.solvers.partitioned`); each step's
    clipped sum (1) is then :meth:`~privfit.solvers.partitioned.PartitionedRows.clipped_sum` — the same sum, computed
    where the rows are, in float64 (``precision`` is ignored) — and ``X`` and ``y`` are not read (pass empty arrays).

    ``units`` (user-level privacy; module docstring, "User-level privacy"): each step's sum is (1u), Σ over the
    units of each unit's summed gradient clipped to C (:func:`~privfit.solvers.units.clipped_unit_gradient_sum`),
    divided by the number of units U instead of the number of rows; always in float64 (``precision`` is ignored).

    ``momentum="nesterov"`` evaluates the gradient at the extrapolated point ``v_t = θ_t + (t−1)/(t+2)·(θ_t −
    θ_{t−1})``, projected on the ball, and steps from there (eq. (2′), FISTA's sequence).

    ``precision="float32"`` (every label type; the multinomial loss's logits and Frobenius-clipped sum too) computes
    the margins and the clipped sums on float32 rows (:mod:`privfit.solvers.float32_design`: the same replace-one
    sensitivity 2C, every rounding included); callers choose it by the public rule
    :func:`~privfit.solvers.float32_design.float32_suffices`. ``design``: the float32 rows of the design matrix,
    prepared by the caller (:meth:`~privfit.solvers.float32_design.Float32Design.of` of X, or the dataset's shared
    copy: :func:`~privfit.solvers.design_cache.shared_float32_design`), for a ``precision="float32"`` row-level fit of
    a binary or numeric label; ``X`` is then not read (pass an empty array of the design's columns).

    ``X`` is the design matrix (intercept column already appended if wanted), ``loss`` the unregularised loss.
    ``runs > 1`` runs independent copies in one vectorised pass (for audits on public data: the noise of
    each run is an independent row of the same generator's draws). ``sigma = 0`` is NOT private and exists
    only for tests of the noiseless path; :class:`DPGradientDescent` never passes it.
    """
    if partitions is not None and units is not None:
        raise SolverParameterError("units", "a dataset with a privacy unit is fitted in memory")
    row_level = units is None and partitions is None
    float32 = row_level and precision == "float32"
    if design is not None and not float32:
        raise SolverParameterError("precision", "a float32 design serves a float32 row-level fit only")
    if design is not None:
        rows, columns = design.n, design.d
    else:
        rows, columns = (X.shape[0], X.shape[1]) if partitions is None else (partitions.rows, partitions.features)
    d = parameter_dimension(loss, columns)
    if rows < 1 or runs < 1 or steps < 1:
        raise SolverParameterError("steps", "need n ≥ 1 rows, steps ≥ 1 and runs ≥ 1")
    if not (sigma >= 0.0 and math.isfinite(sigma)):
        raise SolverParameterError("sigma", f"must be finite and ≥ 0, got {sigma!r}")
    if units is not None and units.rows != rows:
        raise SolverParameterError("units", "must index the rows of X")
    # the public divisor and count of summands: n rows, or U units at unit level (the number of rows is private)
    n = rows if units is None else units.units
    theta = np.zeros((runs, d), dtype=np.float64)
    previous = theta
    average = np.zeros((runs, d), dtype=np.float64) if output == "suffix_average" else None
    tail = math.ceil(steps / 2)
    if float32 and design is None:
        design = Float32Design.of(X)
    norms = design.norms if design is not None else row_norms(X) if row_level else None
    pool = step_pool(rows * columns) if design is not None else None
    # The noisy sums are releases: exact lattice noise or float (privfit.privacy.noise); replace-one sensitivity 2C
    # (of a row, or of a unit), and every coordinate of a sum of n rows (or U units) clipped to C is at most n·C.
    with (
        _shut_down_after(pool),
        gaussian_stream(
            rng, sigma=sigma, l2_sensitivity=2.0 * clip_norm, shape=(runs, d), count=steps, bound=n * clip_norm
        ) as releases,
    ):
        for t in range(steps):
            if reporter is not None:
                reporter.check_stop(t)
            # v_t: the point the gradient is taken at (θ_t itself without momentum; FISTA's extrapolation with it)
            point = clip_rows(theta + (t / (t + 3)) * (theta - previous), radius) if momentum == "nesterov" else theta
            if partitions is not None:
                g = partitions.clipped_sum(loss, point, clip_norm)
            elif units is None:
                g = clipped_gradient_sum(loss, point, X, y, clip_norm, norms=norms, design=design, pool=pool)
            else:
                g = clipped_unit_gradient_sum(loss, point, X, y, units, clip_norm)
            if releases is not None:
                g = releases.release(g)
                if isinstance(loss, MultinomialLogisticLoss):
                    g = loss.identifiable(g)  # post-processing: the noise along Σ_j θ_j moves no prediction
            g /= n
            if l2 > 0.0:
                g += l2 * point
            previous = theta
            # Π_R row by row: clip_rows(·, R) is project_l2_ball(·, R) applied to each row (same rounding rules).
            theta = clip_rows(point - step_size * g, radius)
            if average is not None and t >= steps - tail:
                average += theta
            if reporter is not None:
                reporter.report(t + 1)
    if average is not None:
        return average / tail
    return theta


class DPGradientDescent(Solver[DPGDParams, DPGDResolved]):
    """DP full-batch projected gradient descent (BST 2014; SCS 2013) with the Gaussian RDP accountant.

    See the module docstring for the algorithm, the privacy proof and the defaults.
    """

    description: ClassVar[str] = (
        "DP full-batch gradient descent: per-example gradients clipped to C (default: the loss's public "
        "Lipschitz constant), Gaussian noise on the gradient sum, projected steps on an L2 ball. Cost: T-fold "
        "composition of a Gaussian mechanism with replace-one sensitivity 2C (exact RDP). Defaults: η = 1/β, λ = 0, "
        "T (200–300) and Nesterov momentum from the public noise level, release of the last iterate."
    )
    explicit_noise: ClassVar[str | None] = "noise_multiplier"
    multiclass: ClassVar[bool] = True
    privacy_units: ClassVar[bool] = True
    supports_partitions: ClassVar[bool] = True

    def _resolve(self, p: DPGDParams, meta: PublicMetadata, privacy: PrivacyRequest) -> DPGDResolved:
        """Defaults and noise from public inputs: G, β, C, η from the declared bounds; T and the momentum from the
        noise level ρ (:func:`default_schedule`); σ calibrated to T or explicit. At unit level n is the number of
        units U and the same rules apply (module docstring, "User-level privacy")."""
        constants = clipped_gradient_constants(p, meta)
        sensitivity = 2.0 * constants.clip_norm

        coordinates = theta_dimension(meta.d, p.fit_intercept, meta.classes)

        def noise(steps: int) -> float:
            """σ of ``steps`` steps: explicit, or calibrated on the exact Gaussian curve (GDP: the σ a PLD
            accountant certifies; :func:`~privfit.privacy.gdp_gaussian_sigma`)."""
            if privacy.target is None:
                return privacy.explicit() * sensitivity
            return gdp_gaussian_sigma(
                *privacy.target, sensitivity=sensitivity, count=steps, coordinates=coordinates, grid=privacy.grid
            ).noise

        # the schedule's noise level keeps the RDP-calibrated reference its thresholds were chosen with
        level = reference_noise_level(privacy.target, sensitivity, meta, p.fit_intercept, privacy.grid)
        if level is None:
            level = public_noise_level(noise(REFERENCE_STEPS), meta, p.fit_intercept)
        if meta.classes is not None:
            steps, momentum, factor = multiclass_schedule(level)
            output = "last"
            if p.step_size is None:
                constants = dataclasses.replace(constants, step_size=factor * constants.step_size)
        elif p.model == "linear":
            steps, momentum, output = SQUARED_LOSS_SCHEDULE
        else:
            (steps, momentum), output = default_schedule(level), "last"
        if p.output is not None:
            output = p.output
        if p.steps is not None:
            steps = p.steps
        if p.momentum != "auto":
            momentum = p.momentum
        sigma = noise(steps)
        return DPGDResolved(
            **glm_resolved_fields(p, meta, privacy),
            **constants.resolved_fields(),
            l2=p.l2,
            steps=steps,
            sensitivity=sensitivity,
            sigma=sigma,
            noise_multiplier=sigma / sensitivity,
            output=output,
            momentum=momentum,
            noise_level=level,
            classes=None if meta.classes is None else list(meta.classes),
            **unit_fields(meta),
        )

    def _cost(self, r: DPGDResolved, meta: PublicMetadata, grid: OrderGrid) -> PrivacyCost:
        """Eq. (3): T Gaussian releases of sensitivity 2C and noise σ, ``PrivacyCost.gaussian`` (the curve
        T · αΔ²/(2σ²) and the GDP Σ μ² = T(2C/σ)², for the filter's GDP certificate); reads no row."""
        coordinates = theta_dimension(r.d, r.fit_intercept, r.classes)
        return PrivacyCost.gaussian(
            grid, sigma=r.sigma, sensitivity=r.sensitivity, count=r.steps, coordinates=coordinates
        )

    def _progress_steps(self, r: DPGDResolved) -> int:
        return r.steps

    def _fit(self, run: FitRun, r: DPGDResolved) -> FloatArray:
        """Run DP-GD with ``r`` on the private rows; noise from ``run.rng`` (OS-seeded for private data). With
        ``run.units`` (a dataset with a privacy unit) each step clips each unit's summed gradient (eq. (1u))."""
        loss = resolved_loss(r.model, r.loss_params, r.classes)
        float32 = float32_suffices(r.design_norm_bound, r.radius, r.clip_norm)
        precision: Precision = "float32" if float32 else "float64"
        # the float32 rows of the dataset's design matrix, shared by its fits in this process (built from run.X on
        # the first; the float64 design matrix run.X is then not prepared at all: privfit.solvers.design_cache)
        design = (
            shared_float32_design(run, r.fit_intercept)
            if precision == "float32" and run.units is None and run.partitions is None
            else None
        )  # fmt: skip
        theta: FloatArray = dp_gradient_descent(
            run.X if design is None else np.empty((0, design.d)),
            run.y,
            loss=loss,
            clip_norm=r.clip_norm,
            sigma=r.sigma,
            steps=r.steps,
            step_size=r.step_size,
            radius=r.radius,
            l2=r.l2,
            rng=run.rng,
            output=r.output,
            momentum=r.momentum,
            reporter=run.reporter,
            precision=precision,
            units=run.units,
            partitions=run.partitions,
            design=design,
        )[0]
        return theta

    def _noise_norm(self, r: DPGDResolved, meta: PublicMetadata) -> float:
        """The noise of T steps of (2): Σ_t η ξ_t/n, ξ_t ~ N(0, σ²I), has expected norm η σ √(T d)/n (exactly:
        :func:`~privfit.solvers.base.gradient_noise_norm` with Σ_t η_t² = Tη²), capped at 2R by the projection.
        With Nesterov momentum (2′) the same expression is used: the default rule takes momentum only where this
        ratio is small (for the logistic loss, η = 4/B̃² and ρ < 0.03 give a ratio ≤ 56.6·ρ/(B̃·R) < 0.17 at the default
        R = 10), and there the
        momentum fits measured at ε ≥ 2 on Adult, Telco and HR all beat the majority class.

        A run of T < T₀ = 200 steps is judged by the noise of the T₀-step reference run, ×(T₀/T): at a fixed ε,
        σ(T) grows like sqrt(T), so the noise walk η σ(T) sqrt(T d)/n grows like T, exactly as the distance the
        signal can travel (at most T η ‖∇F‖). Their ratio does not depend on T: stopping early (the default when
        ρ ≥ 0.15) shortens both and does not make a noise-dominated fit less so, and the outlook must not say it
        does (measured: early-stopped fits at ε = 0.01–0.03 whose unscaled ratio was 0.2–0.6 did not beat the
        majority class)."""
        shorter = max(1.0, REFERENCE_STEPS / r.steps)
        squared = r.steps * r.step_size**2 * shorter**2
        return gradient_noise_norm(r.sigma, r.n, squared, noise_dimension(r.d, r.fit_intercept, r.classes), r.radius)

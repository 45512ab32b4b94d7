"""``resque_dpsgd`` (DP-SGD on the Gaussian-smoothed loss, ReSQue queries) next to DP-SGD on the UNSMOOTHED loss,
``dp_sgd`` and ``dp_otb`` on smooth surrogates, in one run: Adult (hinge, logistic) and synthetic median regression.

    .venv/bin/python benchmarks/resque.py [--seeds 3] [--epsilons 0.5 1 2] [--delta 1e-6] [--data DIR] [--quick]

Every privfit fit goes through the public solver interface exactly as the service does: ``plan =
get_solver(name).plan(params, meta, target_epsilon=ε, delta=δ)``; the charged ``plan.cost.epsilon(δ).epsilon`` must
be ≤ ε (the run stops with an error otherwise); then ``get_solver(name).fit(X, y, meta, plan.resolved,
make_generator(seed, data_is_public=True))`` (public or synthetic data, so seeded noise is allowed) and
``result.predict(X_test)``. Seed i seeds every method's noise at every ε (the data is fixed). Every method is
warmed up once, untimed, on 2 000 rows (numba compilation, first-call imports). "fit s" is the mean wall-clock
seconds of ``fit`` alone over every ε and seed (non-private rows: one fit).

Methods (rows), the same in each task; ONLY the parameters shown are set, all others are the solver's defaults:

* ``resque_dpsgd`` — the default ρ = R·max(1/√n, sqrt(d log(1/δ))/(nε)), block length m = 1, batch
  clamp(√n, 64, 4096), 5 or 10 epochs, Poisson sampling, suffix average (its module docstring);
* "DP-SGD, unsmoothed loss" — the SAME solver with ``smoothing`` = 1e-12: with m = 1 the weights are ≡ 1 and the
  queries are subgradients at θ_t + 1e-12·Z, i.e. at θ_t. This is exactly plain DP-SGD with per-example
  subgradients of the non-smooth loss (same batches, clipping C = L, step size, averaging and accountant), so the
  pair isolates the effect of the smoothing;
* ``resque_dpsgd`` with ρ = 10 × its default (the ONE extra, non-default row, fixed before any run was scored
  and not tuned: at the default ρ the smoothing is narrow — the margin ⟨θ + ρZ, x⟩ moves by sd ρ‖x‖ ≈ 0.18 on
  Adult (‖x‖ ≈ 3.2) and ≈ 0.004 on the synthetic rows — while the surrogates of the other rows are smoothed over
  a width ≈ 1 (hinge, h = 1) or 0.1 (Huber δ); 10 × puts the Gaussian smoothing on that scale: sd ≈ 1.8 on Adult,
  ≈ 0.04 on the synthetic rows);
* ``dp_sgd`` at its defaults (batch 256, 5 epochs, last iterate, R = 10) on the smooth surrogate: logistic, or
  model ``svm`` = the quadratically smoothed hinge (h = 1), or Huber with δ = 0.1 for the regression (an
  additional reference: plain DP-SGD with gradients of a smooth loss);
* ``dp_otb`` at its defaults (one pass, adagrad_norm, R = 2) on the smooth surrogate: ``svm`` (its svm IS the
  quadratically smoothed hinge, h = 1), ``logistic``, or — dp_otb needs a smooth loss and has no absolute loss —
  ``huber`` with ``huber_delta`` = 0.1 as the smooth surrogate of the absolute loss.

Tasks.

1. Adult, hinge loss. UCI Adult in privfit's declared schema (``benchmarks/common.py``: 104 columns, public
   row-norm bound sqrt(13), labels ±1), scored on ``adult.test``: test accuracy (%). ``resque_dpsgd`` rows use
   model ``svm`` (the plain hinge max(0, 1 − yz)). Non-private rows: scikit-learn ``LinearSVC(loss="hinge",
   C=1)`` (liblinear dual CD, run to convergence), ``LogisticRegression(C=1)``, the majority class.
2. Adult, logistic loss: every row on the logistic loss (smooth already, so ``resque_dpsgd``'s smoothing is
   not needed there; it is the control).
3. Synthetic median regression (absolute loss). n = 50 000 train and 20 000 test rows (one draw, data seed
   2024), d = 10, x uniform in the unit ball (row-norm bound 1, public), y = clip(⟨w*, x⟩ + 0.1·t₂, −1, 1) with
   Student-t noise of 2 degrees of freedom (infinite variance) and ‖w*‖ = 0.8, so the conditional median of y is
   exactly ⟨w*, x⟩ (clipping is monotone and |⟨w*, x⟩| ≤ 0.8). Metric: TEST excess mean absolute error over the
   non-private least-absolute-deviation (LAD) fit with intercept on ALL 50 000 training rows, solved exactly as
   a linear program by ``scipy.optimize.linprog(method="highs-ipm")`` (the same minimiser as scikit-learn's
   ``QuantileRegressor(quantile=0.5, alpha=0, solver="highs")``, which takes minutes at this n), in units of
   1e-4. Also the distance ‖θ̂ − θ̂_LAD‖₂ of (coefficients, intercept), which does not carry the test-set noise.
   Non-private rows: the LAD fit (0 by definition), the true w* (the population minimiser: its expected excess
   over the LAD fit is ≤ 0, so its measured value shows the test-set noise) and θ = 0. Model ``absolute`` for
   the ``resque_dpsgd`` rows.

Tables: cells mean ± sd over the seeds, per ε at δ. Under the headline table, a comparison table ("A vs B") for the
two ``resque_dpsgd`` rows against the unsmoothed DP-SGD row and against ``dp_otb``: "Δ d ± s; ×r" with d = mean(A)
− mean(B) (accuracy: positive = A better; excess MAE: negative = A better), s = sd over the seeds of the per-seed
differences A_i − B_i, and r = the ratio of the errors (test error 100 − accuracy, or excess MAE; "×n/a" when B's
mean error is ≤ 0, where a ratio means nothing; "×≤0" when only A's is). The three ``resque_dpsgd`` rows are
PAIRED per seed: ρ only scales the ξ draws, so seed i gives them the same batches, the same ξ ~ N(0, I) and the
same Gaussian noise, and their per-seed differences isolate the smoothing (against dp_sgd / dp_otb the seeds
drive different algorithms and s is just a spread). After each task: the resolved public settings of every
privfit row per ε (R, ρ, batch, epochs, steps T, clip C, σ/C, step η, release: suffix average or last iterate,
or dp_otb's one pass with its learner) and the charged ε. ``--quick``: 1 seed, ε = 1 (smoke run). Skips the
Adult tasks with a message when UCI Adult is not under ``../shared/data/adult``. No thresholds: this reports, it
does not judge.

Reading the recorded run (below; every fit is seeded, so a rerun reproduces it).

* Hinge (Adult): the default smoothing gains a small, consistent amount over DP-SGD on the unsmoothed hinge —
  +0.09 / +0.25 / +0.28 accuracy points at ε = 0.5 / 1 / 2, paired sd 0.08 / 0.12 / 0.05 over 3 seeds, test
  error ×0.98-0.99 —, and beats dp_otb's smoothed hinge by 7-9 points. It does NOT beat ``dp_sgd`` on the
  quadratically smoothed hinge at its defaults (84.0-84.1 %, 0.16-0.33 points higher, 5× faster: 640 steps
  against 1 810), whose settings differ (batch 256, 5 epochs, last iterate, constant η = 1/H). 10 × ρ
  (sd ≈ 1.8 in margin units) costs 0.1-0.2 points against the unsmoothed run: the smoothing bias wins.
* Logistic (Adult, the control): smoothing an already smooth loss changes nothing at the default ρ (Δ ≤ 0.03
  points) and costs 0.3 points at 10 × ρ. dp_otb is ~7 points lower, dp_sgd ~0.4 higher.
* Median regression: at n = 50 000, d = 10 the three ``resque_dpsgd`` rows are at the test-noise floor (excess
  MAE ≤ 0.03e-4, below the true w*'s +0.08e-4); the default ρ and unsmoothed DP-SGD are indistinguishable (paired Δ
  ≤ 1e-6 in MAE, ‖θ̂ − θ̂_LAD‖ 0.0027-0.0041 for both), and 10 × ρ is slightly farther from the LAD fit
  (0.0041-0.0051) — its slightly lower test excess is test noise. dp_sgd on the Huber surrogate has 13-27×
  the excess (0.4-0.8e-4). dp_otb on the Huber surrogate is worse than θ = 0 at ε ≤ 1: its noise scales with
  G + H·D = 0.14 + 2·4 (smoothness H = B² = 2 times its diameter D = 4), not with the small Lipschitz G = δB of
  the δ = 0.1 surrogate, so the small δ that makes Huber close to the absolute loss does not reduce its noise.

Recorded run (default arguments; 2-core AMD EPYC VM shared with other jobs, Python 3.11.7, numpy 2.4.6, scipy
1.17.1, scikit-learn 1.7.2):

    python 3.11.7, numpy 2.4.6, scipy 1.17.1, scikit-learn 1.7.2, 2 CPU(s); ε ∈ {0.5, 1, 2}, δ = 1e-06, 3 seed(s)

    UCI Adult: n = 32561 train, 16281 test, d = 104, row-norm bound 3.6056, median ‖x‖ 3.228;
    LinearSVC: 58474 liblinear iterations

    synthetic median regression: ‖w*‖ = 0.800, labels clipped 1.19% (train);
    LAD fit 4.7 s, test MAE 0.132885, ‖θ̂_LAD − (w*, 0)‖ = 0.0084

    ## Adult, hinge loss

    n = 32561 train, 16281 test, d = 104 (+ intercept), row-norm bound 3.606; δ = 1e-06; 3 seed(s) per cell

    test accuracy (%), mean ± sd over 3 seed(s)

    | method | ε = 0.5 | ε = 1 | ε = 2 | fit s | note |
    |---|---:|---:|---:|---:|---|
    | scikit-learn LinearSVC hinge (non-private, C=1) | 85.21 | 85.21 | 85.21 | 0.435 | fit once |
    | scikit-learn LogisticRegression (non-private, C=1) | 85.28 | 85.28 | 85.28 | 1.749 | fit once |
    | majority class (-1) | 76.38 | 76.38 | 76.38 | — |  |
    | resque_dpsgd svm (default ρ) | 83.66 ± 0.05 | 83.90 ± 0.04 | 83.96 ± 0.03 | 0.883 |  |
    | DP-SGD, unsmoothed svm (resque ρ=1e-12) | 83.57 ± 0.12 | 83.64 ± 0.14 | 83.68 ± 0.08 | 0.900 |  |
    | resque_dpsgd svm, ρ = 10× default (extra) | 83.41 ± 0.07 | 83.51 ± 0.03 | 83.56 ± 0.05 | 0.905 |  |
    | dp_sgd smoothed hinge h=1 (defaults) | 83.99 ± 0.08 | 84.11 ± 0.06 | 84.12 ± 0.01 | 0.182 |  |
    | dp_otb smoothed hinge h=1 (defaults) | 74.32 ± 5.29 | 76.16 ± 2.32 | 76.81 ± 1.71 | 0.075 |  |

    Δ mean(A) − mean(B) ± sd of the per-seed differences; ratio of the errors (module docstring)

    | A vs B | ε = 0.5 | ε = 1 | ε = 2 |
    |---|---:|---:|---:|
    | resque_dpsgd vs unsmoothed DP-SGD | Δ +0.09 ± 0.08; ×0.99 | Δ +0.25 ± 0.12; ×0.98 | Δ +0.28 ± 0.05; ×0.98 |
    | resque_dpsgd vs dp_otb | Δ +9.34 ± 5.26; ×0.64 | Δ +7.74 ± 2.27; ×0.68 | Δ +7.15 ± 1.68; ×0.69 |
    | resque_dpsgd 10×ρ vs unsmoothed DP-SGD | Δ -0.16 ± 0.15; ×1.01 | Δ -0.13 ± 0.12; ×1.01 | Δ -0.12 ± 0.12; ×1.01 |
    | resque_dpsgd 10×ρ vs dp_otb | Δ +9.09 ± 5.36; ×0.65 | Δ +7.35 ± 2.32; ×0.69 | Δ +6.75 ± 1.73; ×0.71 |

    Resolved settings (plan.resolved) and charged ε

    | method | ε | R | ρ | batch | epochs | steps T | clip C | σ/C | step η | release | charged ε |
    |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|
    | resque_dpsgd | 0.5 | 10 | 0.05542 | 180 | 10 | 1810 | 3.742 | 4.194 | 0.05071 | suffix_average | 0.500000 |
    | resque_dpsgd | 1 | 10 | 0.05542 | 180 | 10 | 1810 | 3.742 | 2.297 | 0.05555 | suffix_average | 1.000000 |
    | resque_dpsgd | 2 | 10 | 0.05542 | 180 | 10 | 1810 | 3.742 | 1.402 | 0.05818 | suffix_average | 1.999999 |
    | unsmoothed DP-SGD | 0.5 | 10 | 1e-12 | 180 | 10 | 1810 | 3.742 | 4.194 | 0.05071 | suffix_average | 0.500000 |
    | unsmoothed DP-SGD | 1 | 10 | 1e-12 | 180 | 10 | 1810 | 3.742 | 2.297 | 0.05555 | suffix_average | 1.000000 |
    | unsmoothed DP-SGD | 2 | 10 | 1e-12 | 180 | 10 | 1810 | 3.742 | 1.402 | 0.05818 | suffix_average | 1.999999 |
    | resque_dpsgd 10×ρ | 0.5 | 10 | 0.5542 | 180 | 10 | 1810 | 3.742 | 4.194 | 0.05071 | suffix_average | 0.500000 |
    | resque_dpsgd 10×ρ | 1 | 10 | 0.5542 | 180 | 10 | 1810 | 3.742 | 2.297 | 0.05555 | suffix_average | 1.000000 |
    | resque_dpsgd 10×ρ | 2 | 10 | 0.5542 | 180 | 10 | 1810 | 3.742 | 1.402 | 0.05818 | suffix_average | 1.999999 |
    | dp_sgd | 0.5 | 10 | — | 256 | 5 | 640 | 3.742 | 3.61 | 0.07143 | last | 0.500000 |
    | dp_sgd | 1 | 10 | — | 256 | 5 | 640 | 3.742 | 2.034 | 0.07143 | last | 1.000000 |
    | dp_sgd | 2 | 10 | — | 256 | 5 | 640 | 3.742 | 1.354 | 0.07143 | last | 1.999999 |
    | dp_otb | 0.5 | 2 | — | — | — | — | — | — | — | one pass, adagrad_norm | 0.500000 |
    | dp_otb | 1 | 2 | — | — | — | — | — | — | — | one pass, adagrad_norm | 1.000000 |
    | dp_otb | 2 | 2 | — | — | — | — | — | — | — | one pass, adagrad_norm | 1.999999 |

    ## Adult, logistic loss

    n = 32561 train, 16281 test, d = 104 (+ intercept), row-norm bound 3.606; δ = 1e-06; 3 seed(s) per cell

    test accuracy (%), mean ± sd over 3 seed(s)

    | method | ε = 0.5 | ε = 1 | ε = 2 | fit s | note |
    |---|---:|---:|---:|---:|---|
    | scikit-learn LogisticRegression (non-private, C=1) | 85.28 | 85.28 | 85.28 | 1.749 | fit once |
    | scikit-learn LinearSVC hinge (non-private, C=1) | 85.21 | 85.21 | 85.21 | 0.435 | fit once |
    | majority class (-1) | 76.38 | 76.38 | 76.38 | — |  |
    | resque_dpsgd logistic (default ρ) | 83.42 ± 0.03 | 83.59 ± 0.07 | 83.67 ± 0.07 | 0.838 |  |
    | DP-SGD, unsmoothed logistic (resque ρ=1e-12) | 83.44 ± 0.06 | 83.59 ± 0.06 | 83.67 ± 0.07 | 0.772 |  |
    | resque_dpsgd logistic, ρ = 10× default (extra) | 83.16 ± 0.07 | 83.29 ± 0.03 | 83.38 ± 0.03 | 0.756 |  |
    | dp_sgd logistic (defaults) | 83.84 ± 0.06 | 83.97 ± 0.10 | 84.02 ± 0.05 | 0.167 |  |
    | dp_otb logistic (defaults) | 76.37 ± 0.73 | 76.60 ± 0.26 | 76.82 ± 0.23 | 0.088 |  |

    Δ mean(A) − mean(B) ± sd of the per-seed differences; ratio of the errors (module docstring)

    | A vs B | ε = 0.5 | ε = 1 | ε = 2 |
    |---|---:|---:|---:|
    | resque_dpsgd vs unsmoothed DP-SGD | Δ -0.03 ± 0.03; ×1.00 | Δ +0.00 ± 0.00; ×1.00 | Δ -0.00 ± 0.00; ×1.00 |
    | resque_dpsgd vs dp_otb | Δ +7.04 ± 0.71; ×0.70 | Δ +6.99 ± 0.28; ×0.70 | Δ +6.85 ± 0.25; ×0.70 |
    | resque_dpsgd 10×ρ vs unsmoothed DP-SGD | Δ -0.28 ± 0.06; ×1.02 | Δ -0.31 ± 0.04; ×1.02 | Δ -0.30 ± 0.04; ×1.02 |
    | resque_dpsgd 10×ρ vs dp_otb | Δ +6.79 ± 0.78; ×0.71 | Δ +6.68 ± 0.28; ×0.71 | Δ +6.55 ± 0.24; ×0.72 |

    Resolved settings (plan.resolved) and charged ε

    | method | ε | R | ρ | batch | epochs | steps T | clip C | σ/C | step η | release | charged ε |
    |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|
    | resque_dpsgd | 0.5 | 10 | 0.05542 | 180 | 10 | 1810 | 3.742 | 4.194 | 0.05071 | suffix_average | 0.500000 |
    | resque_dpsgd | 1 | 10 | 0.05542 | 180 | 10 | 1810 | 3.742 | 2.297 | 0.05555 | suffix_average | 1.000000 |
    | resque_dpsgd | 2 | 10 | 0.05542 | 180 | 10 | 1810 | 3.742 | 1.402 | 0.05818 | suffix_average | 1.999999 |
    | unsmoothed DP-SGD | 0.5 | 10 | 1e-12 | 180 | 10 | 1810 | 3.742 | 4.194 | 0.05071 | suffix_average | 0.500000 |
    | unsmoothed DP-SGD | 1 | 10 | 1e-12 | 180 | 10 | 1810 | 3.742 | 2.297 | 0.05555 | suffix_average | 1.000000 |
    | unsmoothed DP-SGD | 2 | 10 | 1e-12 | 180 | 10 | 1810 | 3.742 | 1.402 | 0.05818 | suffix_average | 1.999999 |
    | resque_dpsgd 10×ρ | 0.5 | 10 | 0.5542 | 180 | 10 | 1810 | 3.742 | 4.194 | 0.05071 | suffix_average | 0.500000 |
    | resque_dpsgd 10×ρ | 1 | 10 | 0.5542 | 180 | 10 | 1810 | 3.742 | 2.297 | 0.05555 | suffix_average | 1.000000 |
    | resque_dpsgd 10×ρ | 2 | 10 | 0.5542 | 180 | 10 | 1810 | 3.742 | 1.402 | 0.05818 | suffix_average | 1.999999 |
    | dp_sgd | 0.5 | 10 | — | 256 | 5 | 640 | 3.742 | 3.61 | 0.2857 | last | 0.500000 |
    | dp_sgd | 1 | 10 | — | 256 | 5 | 640 | 3.742 | 2.034 | 0.2857 | last | 1.000000 |
    | dp_sgd | 2 | 10 | — | 256 | 5 | 640 | 3.742 | 1.354 | 0.2857 | last | 1.999999 |
    | dp_otb | 0.5 | 2 | — | — | — | — | — | — | — | one pass, adagrad_norm | 0.500000 |
    | dp_otb | 1 | 2 | — | — | — | — | — | — | — | one pass, adagrad_norm | 1.000000 |
    | dp_otb | 2 | 2 | — | — | — | — | — | — | — | one pass, adagrad_norm | 1.999999 |

    ## Synthetic median regression (absolute loss)

    n = 50000 train, 20000 test, d = 10 (+ intercept), row-norm bound 1; δ = 1e-06; 3 seed(s) per cell

    test excess MAE over the LAD fit (× 1e-4), mean ± sd over 3 seed(s)

    | method | ε = 0.5 | ε = 1 | ε = 2 | fit s | note |
    |---|---:|---:|---:|---:|---|
    | LAD fit (non-private, exact LP) | 0.00 | 0.00 | 0.00 | 4.656 | linprog highs-ipm, all train rows |
    | true w* (population median) | 0.08 | 0.08 | 0.08 | — | test-noise floor |
    | θ = 0 | 1065.18 | 1065.18 | 1065.18 | — |  |
    | resque_dpsgd absolute (default ρ) | 0.03 ± 0.10 | 0.03 ± 0.07 | 0.03 ± 0.06 | 0.465 |  |
    | DP-SGD, unsmoothed absolute (resque ρ=1e-12) | 0.03 ± 0.10 | 0.03 ± 0.07 | 0.03 ± 0.06 | 0.527 |  |
    | resque_dpsgd absolute, ρ = 10× default (extra) | -0.01 ± 0.09 | -0.02 ± 0.06 | -0.02 ± 0.05 | 0.498 |  |
    | dp_sgd Huber δ=0.1 surrogate (defaults) | 0.80 ± 0.07 | 0.49 ± 0.06 | 0.39 ± 0.06 | 0.179 |  |
    | dp_otb Huber δ=0.1 surrogate (defaults) | 1557.01 ± 348.44 | 1269.78 ± 276.46 | 858.19 ± 297.47 | 0.019 |  |

    Δ mean(A) − mean(B) ± sd of the per-seed differences; ratio of the errors (module docstring)

    | A vs B | ε = 0.5 | ε = 1 | ε = 2 |
    |---|---:|---:|---:|
    | resque_dpsgd vs unsmoothed DP-SGD | Δ -0.00 ± 0.01; ×0.96 | Δ -0.00 ± 0.00; ×0.94 | Δ -0.00 ± 0.01; ×0.97 |
    | resque_dpsgd vs dp_otb | Δ -1556.97 ± 348.47; ×0.00 | Δ -1269.75 ± 276.43; ×0.00 | Δ -858.15 ± 297.41; ×0.00 |
    | resque_dpsgd 10×ρ vs unsmoothed DP-SGD | Δ -0.04 ± 0.01; ×≤0 | Δ -0.05 ± 0.03; ×≤0 | Δ -0.05 ± 0.03; ×≤0 |
    | resque_dpsgd 10×ρ vs dp_otb | Δ -1557.02 ± 348.45; ×≤0 | Δ -1269.80 ± 276.42; ×≤0 | Δ -858.20 ± 297.42; ×≤0 |

    ‖θ̂ − θ̂_LAD‖₂ (coefficients and intercept), mean ± sd over 3 seed(s)

    | method | ε = 0.5 | ε = 1 | ε = 2 | fit s | note |
    |---|---:|---:|---:|---:|---|
    | LAD fit (non-private, exact LP) | 0.0000 | 0.0000 | 0.0000 | 4.656 | linprog highs-ipm, all train rows |
    | true w* (population median) | 0.0084 | 0.0084 | 0.0084 | — | test-noise floor |
    | θ = 0 | 0.7984 | 0.7984 | 0.7984 | — |  |
    | resque_dpsgd absolute (default ρ) | 0.0041 ± 0.0005 | 0.0031 ± 0.0003 | 0.0027 ± 0.0002 | 0.465 |  |
    | DP-SGD, unsmoothed absolute (resque ρ=1e-12) | 0.0041 ± 0.0008 | 0.0031 ± 0.0005 | 0.0028 ± 0.0003 | 0.527 |  |
    | resque_dpsgd absolute, ρ = 10× default (extra) | 0.0051 ± 0.0012 | 0.0043 ± 0.0007 | 0.0041 ± 0.0005 | 0.498 |  |
    | dp_sgd Huber δ=0.1 surrogate (defaults) | 0.0158 ± 0.0024 | 0.0125 ± 0.0025 | 0.0113 ± 0.0024 | 0.179 |  |
    | dp_otb Huber δ=0.1 surrogate (defaults) | 1.0135 ± 0.1784 | 0.8805 ± 0.1618 | 0.6755 ± 0.1688 | 0.019 |  |

    Resolved settings (plan.resolved) and charged ε

    | method | ε | R | ρ | batch | epochs | steps T | clip C | σ/C | step η | release | charged ε |
    |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|
    | resque_dpsgd | 0.5 | 1 | 0.004472 | 224 | 10 | 2240 | 1.414 | 3.794 | 0.01415 | suffix_average | 0.500000 |
    | resque_dpsgd | 1 | 1 | 0.004472 | 224 | 10 | 2240 | 1.414 | 2.093 | 0.01449 | suffix_average | 1.000000 |
    | resque_dpsgd | 2 | 1 | 0.004472 | 224 | 10 | 2240 | 1.414 | 1.329 | 0.01465 | suffix_average | 1.999999 |
    | unsmoothed DP-SGD | 0.5 | 1 | 1e-12 | 224 | 10 | 2240 | 1.414 | 3.794 | 0.01415 | suffix_average | 0.500000 |
    | unsmoothed DP-SGD | 1 | 1 | 1e-12 | 224 | 10 | 2240 | 1.414 | 2.093 | 0.01449 | suffix_average | 1.000000 |
    | unsmoothed DP-SGD | 2 | 1 | 1e-12 | 224 | 10 | 2240 | 1.414 | 1.329 | 0.01465 | suffix_average | 1.999999 |
    | resque_dpsgd 10×ρ | 0.5 | 1 | 0.04472 | 224 | 10 | 2240 | 1.414 | 3.794 | 0.01415 | suffix_average | 0.500000 |
    | resque_dpsgd 10×ρ | 1 | 1 | 0.04472 | 224 | 10 | 2240 | 1.414 | 2.093 | 0.01449 | suffix_average | 1.000000 |
    | resque_dpsgd 10×ρ | 2 | 1 | 0.04472 | 224 | 10 | 2240 | 1.414 | 1.329 | 0.01465 | suffix_average | 1.999999 |
    | dp_sgd | 0.5 | 10 | — | 256 | 5 | 980 | 0.1414 | 2.94 | 0.5 | last | 0.500000 |
    | dp_sgd | 1 | 10 | — | 256 | 5 | 980 | 0.1414 | 1.777 | 0.5 | last | 1.000000 |
    | dp_sgd | 2 | 10 | — | 256 | 5 | 980 | 0.1414 | 1.246 | 0.5 | last | 1.999999 |
    | dp_otb | 0.5 | 2 | — | — | — | — | — | — | — | one pass, adagrad_norm | 0.500000 |
    | dp_otb | 1 | 2 | — | — | — | — | — | — | — | one pass, adagrad_norm | 1.000000 |
    | dp_otb | 2 | 2 | — | — | — | — | — | — | — | one pass, adagrad_norm | 1.999999 |

    total run time: 93.0 s
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from common import ADULT_DIR, load_adult

from privfit.privacy import make_generator
from privfit.solvers import FitResult, PublicMetadata
from privfit.solvers.base import FitPlan
from privfit.solvers.registry import get_solver

DEFAULT_EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0)
QUICK_EPSILONS: tuple[float, ...] = (1.0,)
DEFAULT_DELTA = 1e-6
#: smoothing of the "unsmoothed" DP-SGD rows: queries at θ + 1e-12·Z, i.e. subgradients at θ
UNSMOOTHED_RHO = 1e-12
#: the one non-default row: ρ = this × resque_dpsgd's default ρ (module docstring)
RHO_SCALE = 10.0
#: Huber threshold of the smooth surrogate of the absolute loss (dp_otb, dp_sgd)
SURROGATE_HUBER_DELTA = 0.1
#: synthetic median regression (module docstring)
SYNTH_TRAIN, SYNTH_TEST, SYNTH_D = 50_000, 20_000, 10
SYNTH_W_NORM, SYNTH_NOISE_SCALE, SYNTH_NOISE_DF = 0.8, 0.1, 2.0
SYNTH_SEED = 2024
#: excess MAE is reported in units of 1e-4
MAE_UNIT = 1e-4
WARMUP_ROWS = 2000

_START = time.perf_counter()


def progress(message: str) -> None:
    """A time-stamped progress line on stderr (stdout carries only the report)."""
    print(f"[{time.perf_counter() - _START:7.1f} s] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------
# tasks, methods, rows
# ---------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Metric:
    """A score of a fitted linear model on the task's test rows, in table units."""

    title: str
    fn: Callable[[FitResult], float]
    digits: int
    #: the error (lower is better) of a mean cell value, for ratios; None: no comparison rows for this metric
    error: Callable[[float], float] | None = None


@dataclasses.dataclass(frozen=True)
class Method:
    """A privfit row: solver, explicit parameters (all others default) and an optional ρ = scale × default ρ."""

    label: str
    tag: str
    solver: str
    params: dict[str, Any]
    rho_scale: float | None = None


@dataclasses.dataclass
class Row:
    """One table row: per metric and ε the per-seed values; fit seconds; resolved settings per ε; a note."""

    label: str
    tag: str = ""
    values: dict[str, dict[float, list[float]]] = dataclasses.field(default_factory=dict)
    seconds: list[float] = dataclasses.field(default_factory=list)
    plans: dict[float, FitPlan] = dataclasses.field(default_factory=dict)
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Task:
    """Train/test rows, public metadata, metrics (the first is the headline), rows to run and non-private rows."""

    title: str
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    meta: PublicMetadata
    metrics: list[Metric]
    methods: list[Method]
    references: list[Row]
    #: labels of the resque rows and of the two references of the comparison rows
    resque_labels: tuple[str, ...]
    unsmoothed_label: str
    otb_label: str


def linear_result(model: str, coefficients: np.ndarray, intercept: float) -> FitResult:
    """A non-private θ wrapped as a :class:`FitResult`, so that it is scored by the same code as the fits."""
    return FitResult(solver="reference", model=model, coefficients=[float(c) for c in coefficients],
                     intercept=float(intercept))  # fmt: skip


def reference_row(task_metrics: list[Metric], label: str, result: FitResult, seconds: float | None, note: str,
                  epsilons: list[float]) -> Row:  # fmt: skip
    """A non-private row: the same value in every ε column."""
    row = Row(label, seconds=[] if seconds is None else [seconds], note=note)
    for metric in task_metrics:
        value = metric.fn(result)
        row.values[metric.title] = {epsilon: [value] for epsilon in epsilons}
    return row


def resque_methods(resque_model: str, surrogate: dict[str, Any], surrogate_note: str) -> list[Method]:
    """The five privfit rows of a task (module docstring), for resque_dpsgd's model and the smooth surrogate."""
    base = {"model": resque_model}
    return [
        Method(f"resque_dpsgd {resque_model} (default ρ)", "resque_dpsgd", "resque_dpsgd", base),
        Method(f"DP-SGD, unsmoothed {resque_model} (resque ρ=1e-12)", "unsmoothed DP-SGD", "resque_dpsgd",
               {**base, "smoothing": UNSMOOTHED_RHO}),
        Method(f"resque_dpsgd {resque_model}, ρ = {RHO_SCALE:g}× default (extra)", f"resque_dpsgd {RHO_SCALE:g}×ρ",
               "resque_dpsgd", base, RHO_SCALE),
        Method(f"dp_sgd {surrogate_note} (defaults)", "dp_sgd", "dp_sgd", surrogate),
        Method(f"dp_otb {surrogate_note} (defaults)", "dp_otb", "dp_otb", surrogate),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# running the privfit rows: one generic loop
# ---------------------------------------------------------------------------------------------------------


def method_params(method: Method, meta: PublicMetadata, epsilon: float, delta: float) -> dict[str, Any]:
    """The parameters sent to ``plan``: ``method.params``, with ρ = scale × the default ρ at this ε when scaled."""
    if method.rho_scale is None:
        return dict(method.params)
    default = get_solver(method.solver).plan(method.params, meta, target_epsilon=epsilon, delta=delta).resolved
    return {**method.params, "smoothing": method.rho_scale * float(default.smoothing)}  # type: ignore[attr-defined]


def checked_plan(method: Method, meta: PublicMetadata, epsilon: float, delta: float) -> FitPlan:
    """``plan`` as the service does it; raises when the charged ε exceeds the target."""
    params = method_params(method, meta, epsilon, delta)
    plan = get_solver(method.solver).plan(params, meta, target_epsilon=epsilon, delta=delta)
    charged = plan.cost.epsilon(delta).epsilon
    if not charged <= epsilon:  # an explicit raise, not ``assert``: it must also hold under ``python -O``
        raise RuntimeError(f"{method.label}: charged ε = {charged!r} > target ε = {epsilon!r} at δ = {delta:g}")
    return plan


def warm_up(method: Method, task: Task, delta: float) -> None:
    """One untimed fit on the first rows (numba compilation, first-call imports)."""
    rows = min(WARMUP_ROWS, task.meta.n)
    small = dataclasses.replace(task.meta, n=rows)
    plan = checked_plan(method, small, 1.0, delta)
    get_solver(method.solver).fit(
        task.X[:rows], task.y[:rows], small, plan.resolved, make_generator(0, data_is_public=True)
    )


def run_method(method: Method, task: Task, epsilons: list[float], seeds: int, delta: float) -> Row:
    """plan → cost check → fit → score for every ε and seed."""
    row = Row(method.label, method.tag, {metric.title: {} for metric in task.metrics})
    solver = get_solver(method.solver)
    warm_up(method, task, delta)
    for epsilon in epsilons:
        plan = checked_plan(method, task.meta, epsilon, delta)
        row.plans[epsilon] = plan
        for seed in range(seeds):
            rng = make_generator(seed, data_is_public=True)
            start = time.perf_counter()
            result = solver.fit(task.X, task.y, task.meta, plan.resolved, rng)
            row.seconds.append(time.perf_counter() - start)
            for metric in task.metrics:
                row.values[metric.title].setdefault(epsilon, []).append(metric.fn(result))
        headline = task.metrics[0]
        mean = statistics.fmean(row.values[headline.title][epsilon])
        progress(f"{task.title} | {method.label} ε={epsilon:g}: {headline.title} {mean:.{headline.digits}f}")
    return row


# ---------------------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------------------


def markdown(header: list[str], body: list[list[str]], left: tuple[int, ...] = (0, -1)) -> str:
    """A compact markdown table; the columns in ``left`` (default: the first and the last) are left-aligned, the
    others right-aligned."""
    left_set = {i % len(header) for i in left}
    rule = "|" + "|".join("---" if i in left_set else "---:" for i in range(len(header))) + "|"

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), rule, *(line(cells) for cells in body)])


def cell(values: list[float] | None, digits: int) -> str:
    """``mean ± sd`` (just the mean for one value), or — when the row has no value."""
    if not values:
        return "—"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def comparison(row: Row, reference: Row, metric: Metric, epsilon: float) -> str:
    """``Δ ± sd; error ratio`` of ``row`` against ``reference`` (module docstring): Δ = difference of the means,
    sd = sd of the per-seed differences (seed i against seed i)."""
    ours, theirs = row.values[metric.title][epsilon], reference.values[metric.title][epsilon]
    mean, peer = statistics.fmean(ours), statistics.fmean(theirs)
    assert metric.error is not None
    error, peer_error = metric.error(mean), metric.error(peer)
    differences = [a - b for a, b in zip(ours, theirs, strict=True)]
    spread = f" ± {statistics.stdev(differences):.{metric.digits}f}" if len(differences) > 1 else ""
    return f"Δ {mean - peer:+.{metric.digits}f}{spread}; {error_ratio(error, peer_error)}"


def error_ratio(error: float, peer_error: float) -> str:
    """``×r`` = error / peer error; "×n/a" when the peer's error is ≤ 0, "×≤0" when ours is (and the peer's > 0)."""
    if peer_error <= 0:
        return "×n/a"
    if error <= 0:
        return "×≤0"
    return f"×{error / peer_error:.2f}"


def metric_table(task: Task, rows: list[Row], metric: Metric, epsilons: list[float]) -> str:
    """The table of one metric: every row with its mean fit seconds and note."""
    header = ["method", *(f"ε = {e:g}" for e in epsilons), "fit s", "note"]
    body = []
    for row in rows:
        seconds = f"{statistics.fmean(row.seconds):.3f}" if row.seconds else "—"
        cells = [cell(row.values[metric.title].get(e), metric.digits) for e in epsilons]
        body.append([row.label, *cells, seconds, row.note])
    return markdown(header, body)


def comparison_table(task: Task, rows: list[Row], metric: Metric, epsilons: list[float]) -> str:
    """The comparison rows of the headline metric: each resque_dpsgd row against unsmoothed DP-SGD and dp_otb."""
    by_label = {row.label: row for row in rows}
    body = []
    for label in task.resque_labels:
        for peer in (task.unsmoothed_label, task.otb_label):
            cells = [comparison(by_label[label], by_label[peer], metric, e) for e in epsilons]
            body.append([f"{by_label[label].tag} vs {by_label[peer].tag}", *cells])
    return markdown(["A vs B", *(f"ε = {e:g}" for e in epsilons)], body, left=(0,))


def settings_table(rows: list[Row], delta: float) -> str:
    """The resolved public settings of every privfit row per ε, and the charged ε."""
    header = ["method", "ε", "R", "ρ", "batch", "epochs", "steps T", "clip C", "σ/C", "step η", "release",
              "charged ε"]  # fmt: skip
    body = []
    for row in rows:
        for epsilon, plan in row.plans.items():
            r = plan.resolved.model_dump()

            def number(key: str, fmt: str, r: dict[str, Any] = r) -> str:
                return "—" if r.get(key) is None else format(r[key], fmt)

            release = r.get("output") or f"one pass, {r.get('learner')}"
            body.append([
                row.tag, f"{epsilon:g}", number("radius", "g"), number("smoothing", ".4g"), number("batch_size", "d"),
                number("epochs", "d"), number("steps", "d"), number("clip_norm", ".4g"),
                number("noise_multiplier", ".4g"), number("step_size", ".4g"), release,
                f"{plan.cost.epsilon(delta).epsilon:.6f}",
            ])  # fmt: skip
    return markdown(header, body, left=(0, 10))


def run_task(task: Task, epsilons: list[float], seeds: int, delta: float) -> None:
    """Run every privfit row of ``task`` and print its tables and settings."""
    rows = [*task.references]
    for method in task.methods:
        progress(f"{task.title} | {method.label}: warm-up, then {len(epsilons)} ε × {seeds} seed(s)")
        rows.append(run_method(method, task, epsilons, seeds, delta))
    print(f"\n## {task.title}\n")
    print(f"n = {task.meta.n} train, {len(task.y_test)} test, d = {task.meta.d} (+ intercept), row-norm bound "
          f"{task.meta.row_norm_bound:.4g}; δ = {delta:g}; {seeds} seed(s) per cell\n")  # fmt: skip
    for metric in task.metrics:
        print(f"{metric.title}, mean ± sd over {seeds} seed(s)\n")
        print(metric_table(task, rows, metric, epsilons))
        print()
        if metric.error is not None:
            print("Δ mean(A) − mean(B) ± sd of the per-seed differences; ratio of the errors (module docstring)\n")
            print(comparison_table(task, rows, metric, epsilons))
            print()
    print("Resolved settings (plan.resolved) and charged ε\n")
    print(settings_table([row for row in rows if row.plans], delta))


# ---------------------------------------------------------------------------------------------------------
# Adult
# ---------------------------------------------------------------------------------------------------------


def accuracy_metric(X_test: np.ndarray, y_test: np.ndarray) -> Metric:
    """Test accuracy (%) of ``result.predict``; its error is 100 − accuracy."""
    return Metric("test accuracy (%)", lambda r: 100.0 * float(np.mean(r.predict(X_test) == y_test)), 2,
                  lambda accuracy: 100.0 - accuracy)  # fmt: skip


def adult_tasks(data_dir: Path, delta: float, epsilons: list[float]) -> list[Task]:
    """The two Adult tasks (hinge, logistic), with scikit-learn's LinearSVC / LogisticRegression and the majority."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    train, test = load_adult(data_dir, delta)
    meta = PublicMetadata.from_dataset(train)
    metric = accuracy_metric(test.X, test.y)
    start = time.perf_counter()
    logistic = LogisticRegression(C=1.0, max_iter=2000).fit(train.X, train.y)
    logistic_seconds = time.perf_counter() - start
    start = time.perf_counter()
    svc = LinearSVC(loss="hinge", C=1.0, dual=True, max_iter=1_000_000, random_state=0).fit(train.X, train.y)
    svc_seconds = time.perf_counter() - start
    labels, counts = np.unique(train.y, return_counts=True)
    majority = float(labels[np.argmax(counts)])
    median_norm = float(np.median(np.linalg.norm(train.X, axis=1)))
    print(
        f"\nUCI Adult: n = {train.n} train, {test.n} test, d = {train.d}, row-norm bound "
        f"{train.row_norm_bound:.4f}, median ‖x‖ {median_norm:.3f};\nLinearSVC: {svc.n_iter_} liblinear iterations"
    )

    def references(first: str) -> list[Row]:
        svc_fit = linear_result("svm", svc.coef_[0], svc.intercept_[0])
        logistic_fit = linear_result("logistic", logistic.coef_[0], logistic.intercept_[0])
        rows = {
            "svm": reference_row(
                [metric], "scikit-learn LinearSVC hinge (non-private, C=1)", svc_fit, svc_seconds, "fit once", epsilons
            ),
            "logistic": reference_row(
                [metric], "scikit-learn LogisticRegression (non-private, C=1)", logistic_fit, logistic_seconds,
                "fit once", epsilons,
            ),
        }  # fmt: skip
        ordered = [rows[first], *(row for key, row in rows.items() if key != first)]
        floor = reference_row([metric], f"majority class ({majority:+.0f})",
                              linear_result("svm", np.zeros(meta.d), majority), None, "", epsilons)  # fmt: skip
        return [*ordered, floor]

    tasks = []
    for title, model, surrogate_note in (
        ("Adult, hinge loss", "svm", "smoothed hinge h=1"),
        ("Adult, logistic loss", "logistic", "logistic"),
    ):
        methods = resque_methods(model, {"model": model}, surrogate_note)
        tasks.append(Task(title, train.X, train.y, test.X, test.y, meta, [metric], methods, references(model),
                          (methods[0].label, methods[2].label), methods[1].label, methods[4].label))  # fmt: skip
    return tasks


# ---------------------------------------------------------------------------------------------------------
# synthetic median regression
# ---------------------------------------------------------------------------------------------------------


def unit_ball(rng: np.random.Generator, rows: int, d: int) -> np.ndarray:
    """Rows uniform in the unit ball of R^d: a uniform direction times U^(1/d)."""
    directions = rng.standard_normal((rows, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return directions * rng.random(rows)[:, None] ** (1.0 / d)


def median_rows(rng: np.random.Generator, w: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """x uniform in the unit ball, y = clip(⟨w, x⟩ + scale·t_df, −1, 1)."""
    X = unit_ball(rng, rows, w.size)
    noise = SYNTH_NOISE_SCALE * rng.standard_t(SYNTH_NOISE_DF, rows)
    return X, np.clip(X @ w + noise, -1.0, 1.0)


def lad_fit(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Exact least-absolute-deviation fit with intercept as a linear program (HiGHS interior point).

    min Σ (u_i + v_i) s.t. Xβ + b + u − v = y, u, v ≥ 0. Returns (β, b, seconds).
    """
    import scipy.sparse as sp
    from scipy.optimize import linprog

    n, d = X.shape
    start = time.perf_counter()
    A = sp.hstack([sp.csr_matrix(np.c_[X, np.ones(n)]), sp.eye(n), -sp.eye(n)]).tocsc()
    cost = np.r_[np.zeros(d + 1), np.ones(2 * n)]
    bounds = [(None, None)] * (d + 1) + [(0.0, None)] * (2 * n)
    solution = linprog(cost, A_eq=A, b_eq=y, bounds=bounds, method="highs-ipm")
    if solution.status != 0:
        raise RuntimeError(f"LAD linear program failed: {solution.message}")
    return solution.x[:d], float(solution.x[d]), time.perf_counter() - start


def median_regression_task(epsilons: list[float]) -> Task:
    """The synthetic median-regression task, with the LAD fit, w* and θ = 0 as non-private rows."""
    rng = np.random.default_rng(SYNTH_SEED)
    w = rng.standard_normal(SYNTH_D)
    w *= SYNTH_W_NORM / np.linalg.norm(w)
    X, y = median_rows(rng, w, SYNTH_TRAIN)
    X_test, y_test = median_rows(rng, w, SYNTH_TEST)
    progress("median regression: exact LAD fit (linprog highs-ipm)")
    lad_coef, lad_intercept, lad_seconds = lad_fit(X, y)
    lad_theta = np.r_[lad_coef, lad_intercept]
    lad_mae = float(np.mean(np.abs(X_test @ lad_coef + lad_intercept - y_test)))
    clipped = float(np.mean(np.abs(y) >= 1.0))
    lad_error = float(np.linalg.norm(lad_theta - np.r_[w, 0.0]))
    print(
        f"\nsynthetic median regression: ‖w*‖ = {np.linalg.norm(w):.3f}, labels clipped {clipped:.2%} (train);\n"
        f"LAD fit {lad_seconds:.1f} s, test MAE {lad_mae:.6f}, ‖θ̂_LAD − (w*, 0)‖ = {lad_error:.4f}"
    )

    def excess(result: FitResult) -> float:
        return (float(np.mean(np.abs(result.predict(X_test) - y_test))) - lad_mae) / MAE_UNIT

    def distance(result: FitResult) -> float:
        return float(np.linalg.norm(np.r_[result.coefficients, result.intercept or 0.0] - lad_theta))

    metrics = [
        Metric("test excess MAE over the LAD fit (× 1e-4)", excess, 2, lambda value: value),
        Metric("‖θ̂ − θ̂_LAD‖₂ (coefficients and intercept)", distance, 4),
    ]
    references = [
        reference_row(metrics, "LAD fit (non-private, exact LP)", linear_result("absolute", lad_coef, lad_intercept),
                      lad_seconds, "linprog highs-ipm, all train rows", epsilons),
        reference_row(metrics, "true w* (population median)", linear_result("absolute", w, 0.0), None,
                      "test-noise floor", epsilons),
        reference_row(metrics, "θ = 0", linear_result("absolute", np.zeros(SYNTH_D), 0.0), None, "", epsilons),
    ]  # fmt: skip
    surrogate = {"model": "huber", "huber_delta": SURROGATE_HUBER_DELTA}
    methods = resque_methods("absolute", surrogate, f"Huber δ={SURROGATE_HUBER_DELTA:g} surrogate")
    meta = PublicMetadata(n=SYNTH_TRAIN, d=SYNTH_D, row_norm_bound=1.0, label_bound=1.0)
    return Task("Synthetic median regression (absolute loss)", X, y, X_test, y_test, meta, metrics, methods,
                references, (methods[0].label, methods[2].label), methods[1].label, methods[4].label)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------------------


def main() -> None:
    """Parse the arguments, run the Adult tasks (if the data is there) and the synthetic task, print the report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilons", type=float, nargs="+", default=list(DEFAULT_EPSILONS))
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0, 1, …, seeds − 1)")
    parser.add_argument("--delta", type=float, default=DEFAULT_DELTA)
    parser.add_argument("--data", type=Path, default=ADULT_DIR, help="directory with adult.data and adult.test")
    parser.add_argument("--quick", action="store_true", help=f"smoke run: 1 seed, ε ∈ {set(QUICK_EPSILONS)}")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.epsilons = 1, list(QUICK_EPSILONS)
    if args.seeds < 1:
        parser.error("--seeds must be ≥ 1")
    epsilons: list[float] = list(dict.fromkeys(args.epsilons))
    warnings.filterwarnings("ignore")
    import scipy
    import sklearn

    print(f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, scikit-learn "
          f"{sklearn.__version__}, {os.cpu_count()} CPU(s); ε ∈ {{{', '.join(f'{e:g}' for e in epsilons)}}}, "
          f"δ = {args.delta:g}, {args.seeds} seed(s)")  # fmt: skip
    tasks: list[Task] = []
    if (args.data / "adult.data").is_file() and (args.data / "adult.test").is_file():
        progress("loading Adult, fitting scikit-learn")
        tasks.extend(adult_tasks(args.data, args.delta, epsilons))
    else:
        print(f"UCI Adult not found under {args.data.resolve()} (expected adult.data and adult.test); Adult skipped")
    tasks.append(median_regression_task(epsilons))
    for task in tasks:
        run_task(task, epsilons, args.seeds, args.delta)
    print(f"\ntotal run time: {time.perf_counter() - _START:.1f} s")


if __name__ == "__main__":
    main()

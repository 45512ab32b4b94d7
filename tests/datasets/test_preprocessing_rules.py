"""Private preprocessing (privfit.datasets.preprocessing): the public rules on released counts, and preprocess()
end to end on small synthetic uploads.

The rules are checked on noiseless counts (σ tiny, so every non-empty bin survives the 3.5σ threshold): the clip
range is the 1%..99% mass rounded outward to bin edges, log1p is chosen for a right-skewed non-negative column
only. End to end, the derived schema fills in exactly the columns without a declared transform, the stored
matrix is re-encoded as if the CSV had been encoded by the derived schema (so predictions, which encode rows by
that schema, see the same encoding), and the release costs at most its share of the budget.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfit.datasets import DatasetSchema, encode_rows, parse_and_encode
from privfit.datasets.preprocessing import BINS, TAIL, derive_range, is_right_skewed, preprocess
from privfit.datasets.schema import NumericTransform
from privfit.privacy import DEFAULT_GRID, PrivacyFilter, make_generator
from privfit.privacy.histogram import histogram_counts, symlog_edges, variance_for_share

TINY_SIGMA = 1e-9  # threshold 3.5e-9: every count ≥ 1 survives, i.e. the rules see the exact histogram


def grid(lower: float, upper: float) -> np.ndarray:
    edges = symlog_edges(lower, upper, 32)
    assert edges is not None
    return edges


def assert_tail_rule(counts: np.ndarray, edges: np.ndarray, a: float, b: float) -> None:
    """[a, b] = [e_lo, e_hi+1] are bin edges; the mass below a is < TAIL·M and the mass of bins ≤ lo reaches it
    (the cut is rounded outward to whole bins); likewise above b."""
    lo = int(np.flatnonzero(edges == a)[0])
    hi = int(np.flatnonzero(edges == b)[0]) - 1
    total = counts.sum()
    assert counts[:lo].sum() < TAIL * total <= counts[: lo + 1].sum()
    assert counts[hi + 1 :].sum() < TAIL * total <= counts[hi:].sum()


# ---------------------------------------------------------------------------------------------------------------
# derive_range on noiseless counts
# ---------------------------------------------------------------------------------------------------------------


def test_hand_example_clip_and_label_range():
    """Bins [k, k+1), k = 0..6; M = 1000, TAIL·M = 10. From the left the cumulative mass is 1, 1, 11: it first
    reaches 10 in bin 2, so a = 2 (the single count in bin 0, 0.1%, is cut); from the right likewise b = 5.
    log1p(5) − log1p(2) = log 2 < 1: no log. A label's [2, 5] is widened by LABEL_MARGIN = ¼ of its width, 0.75,
    on each side: [1.25, 5.75]."""
    edges = np.arange(8.0)
    counts = np.array([1, 0, 10, 978, 10, 0, 1])
    assert derive_range(counts, edges, TINY_SIGMA, 1000, "feature") == {"clip": [2.0, 5.0], "log": False}
    assert derive_range(counts, edges, TINY_SIGMA, 1000, "label") == {"lower": 1.25, "upper": 5.75}
    wide = np.array([300, 0, 10, 378, 10, 0, 300])  # the margin stops at the declared bounds [0, 7]
    assert derive_range(wide, edges, TINY_SIGMA, 1000, "label") is None


@pytest.mark.parametrize(
    ("values", "upper", "log", "inside"),
    [  # a symmetric column: ≈ 50 ∓ 2.33·10 widened to the bins' edges, no log; a log-normal amount: log1p
        (np.clip(np.random.default_rng(1).normal(50.0, 10.0, 20_000), 0.0, 120.0), 120.0, False, (0.0, 30.0, 70.0)),
        (np.clip(np.exp(np.random.default_rng(2).normal(8.0, 1.5, 20_000)), 0.0, 1e6), 1e6, True, None),
    ],
    ids=["symmetric", "right-skewed"],
)
def test_a_column_gets_its_tail_clip_range_and_log_only_when_right_skewed(values, upper, log, inside):
    edges = grid(0.0, upper)
    counts = histogram_counts(values, edges)
    rule = derive_range(counts, edges, TINY_SIGMA, values.size, "feature")
    assert rule is not None and rule["log"] is log
    a, b = rule["clip"]
    assert_tail_rule(counts, edges, a, b)
    assert a <= np.quantile(values, TAIL) and b >= np.quantile(values, 1 - TAIL)  # outward
    assert 0.0 <= a < b < upper
    if inside is not None:
        assert inside[0] < a < inside[1] < inside[2] < b


def test_label_gets_lower_and_upper_only():
    values = np.clip(np.random.default_rng(3).normal(50.0, 10.0, 20_000), 0.0, 120.0)
    edges = grid(0.0, 120.0)
    counts = histogram_counts(values, edges)
    rule = derive_range(counts, edges, TINY_SIGMA, values.size, "label")
    assert rule is not None and set(rule) == {"lower", "upper"}
    feature = derive_range(counts, edges, TINY_SIGMA, values.size, "feature")
    assert feature is not None
    a, b = feature["clip"]  # the tail rule's range, then the label's margin of a quarter of its width each side
    assert (rule["lower"], rule["upper"]) == (max(0.0, a - (b - a) / 4), min(120.0, b + (b - a) / 4))


def test_too_little_surviving_mass_keeps_the_declared_encoding():
    edges = grid(0.0, 120.0)
    # every count below 3.5σ = 3.5: nothing survives
    assert derive_range(np.full(32, 3), edges, 1.0, 96, "feature") is None
    assert derive_range(np.full(32, 3), edges, 1.0, 96, "label") is None
    # one bin survives but holds 100 < MIN_SURVIVING·n = 500 of the n = 1000 rows
    counts = np.full(32, 3)
    counts[10] = 100
    assert derive_range(counts, edges, 1.0, 1000, "feature") is None


def test_full_range_without_skew_keeps_the_declared_encoding():
    """Uniform counts on [0, 7]: [a, b] is the whole grid and the median bin's centre √20 − 1 ≈ 3.47 leaves an
    upper tail 3.53 < 3 × 3.47: nothing to derive."""
    assert is_right_skewed(0.0, math.sqrt(20.0) - 1.0, 7.0) is False
    assert derive_range(np.full(7, 100), np.arange(8.0), TINY_SIGMA, 700, "feature") is None
    assert derive_range(np.full(7, 100), np.arange(8.0), TINY_SIGMA, 700, "label") is None


# ---------------------------------------------------------------------------------------------------------------
# preprocess() end to end
# ---------------------------------------------------------------------------------------------------------------

N = 4000
BUDGET = {"epsilon": 1.0, "delta": 1e-6}
PRIVACY_FILTER = PrivacyFilter.for_budget(1.0, 1e-6, DEFAULT_GRID)
COLORS = ["red", "green", "blue"]


def synthetic(seed: int) -> dict[str, list]:
    """Raw columns with wide declared bounds: ages ~ N(40, 12) on [0, 120], amounts ~ logN(8, 1.5) on [0, 10⁶],
    scores ~ U(0, 100), a colour and a yes/no label; values are Python floats, written with repr (exact)."""
    rng = np.random.default_rng(seed)
    return {
        "age": np.clip(np.round(rng.normal(40.0, 12.0, N), 1), 0.0, 120.0).tolist(),
        "amount": np.round(np.clip(np.exp(rng.normal(8.0, 1.5, N)), 0.0, 1e6), 2).tolist(),
        "score": np.round(rng.uniform(0.0, 100.0, N), 3).tolist(),
        "color": [COLORS[i] for i in rng.integers(0, 3, N)],
        "y": [("yes", "no")[i] for i in rng.integers(0, 2, N)],
    }


def to_csv(columns: dict[str, list]) -> bytes:
    names = list(columns)
    lines = [",".join(names)]
    for row in zip(*(columns[name] for name in names), strict=True):
        lines.append(",".join(repr(v) if isinstance(v, float) else str(v) for v in row))
    return ("\n".join(lines) + "\n").encode()


def schema_document(label: dict, *, declared_age: dict | None = None, preprocessing=None) -> dict:
    age = {"name": "age", "type": "numeric", "lower": 0.0, "upper": 120.0}
    if declared_age is not None:
        age["transform"] = declared_age
    document = {
        "label": label,
        "features": [
            age,
            {"name": "amount", "type": "numeric", "lower": 0.0, "upper": 1e6},
            {"name": "score", "type": "numeric", "lower": 0.0, "upper": 100.0, "transform": {"clip": [10.0, 90.0]}},
            {"name": "color", "type": "categorical", "levels": COLORS},
        ],
        "budget": BUDGET,
    }
    if preprocessing is not None:
        document["preprocessing"] = preprocessing
    return document


BINARY = {"name": "y", "type": "binary", "positive": "yes", "negative": "no"}


def feature_rows(columns: dict[str, list], with_label: str | None = None) -> list[dict]:
    names = ["age", "amount", "score", "color"] + ([with_label] if with_label else [])
    return [dict(zip(names, row, strict=True)) for row in zip(*(columns[n] for n in names), strict=True)]


def test_preprocess_derives_transforms_for_undeclared_columns_and_reencodes_like_the_csv():
    columns = synthetic(10)
    schema = DatasetSchema.model_validate(schema_document(BINARY))
    encoded = parse_and_encode(to_csv(columns), schema)
    outcome = preprocess(encoded, PRIVACY_FILTER, make_generator(11, data_is_public=True))
    assert outcome is not None

    # the release: one histogram per candidate (numeric features without a transform), at the default share
    assert outcome.names == ("age", "amount") and outcome.roles == ("feature", "feature")
    assert outcome.share == 0.05
    assert outcome.histograms.variance == variance_for_share(2, PRIVACY_FILTER, 0.05, bins=BINS)
    assert PRIVACY_FILTER.measure(outcome.cost).share <= outcome.share
    # the rules are post-processing of the released counts alone
    sigma = math.sqrt(outcome.histograms.variance)
    for j, role in enumerate(outcome.roles):
        counts, edges = outcome.histograms.counts[j], outcome.histograms.edges[j]
        assert counts.dtype == np.int64
        assert outcome.derived[j] == derive_range(counts, edges, sigma, N, role)

    # the derived schema: transforms for exactly age and amount; amount is right-skewed, age is not
    age_rule, amount_rule = outcome.derived
    assert age_rule is not None and amount_rule is not None
    assert age_rule["log"] is False and amount_rule["log"] is True
    age, amount, score = outcome.schema.features[:3]
    assert age.transform == NumericTransform(clip=age_rule["clip"], log=False)
    assert amount.transform == NumericTransform(clip=amount_rule["clip"], log=True)
    assert score.transform == schema.features[2].transform  # declared: untouched
    assert outcome.schema.features[3] == schema.features[3] and outcome.schema.label == schema.label
    assert outcome.encoded.schema == outcome.schema

    # the re-encoded matrix: derived columns as the CSV's raw values encoded by the derived schema (the stored
    # value is recovered from the declared encoding to within an ulp of U − L, far below 1e-12 after the scaling)
    X = outcome.encoded.X
    for i, name in enumerate(["age", "amount", "score"]):
        expected = outcome.schema.features[i].scale(np.array(columns[name]))
        assert np.max(np.abs(X[:, i] - expected)) <= 1e-12, name
    # the declared column, the one-hot block and the labels are byte-identical
    assert X[:, 2:].tobytes() == encoded.X[:, 2:].tobytes()
    assert outcome.encoded.y.tobytes() == encoded.y.tobytes()
    assert outcome.encoded.feature_names == encoded.feature_names and outcome.encoded.n == N

    # predictions encode rows by the derived schema: the same matrix
    rows = encode_rows(feature_rows(columns), outcome.schema)
    assert np.max(np.abs(rows.X - X)) <= 1e-12

    # an explicit, larger share: a smaller variance, still within its share
    larger = preprocess(encoded, PRIVACY_FILTER, make_generator(12, data_is_public=True), share=0.2)
    assert larger is not None and larger.share == 0.2
    assert larger.histograms.variance < outcome.histograms.variance
    assert PRIVACY_FILTER.measure(larger.cost).share <= 0.2


def test_preprocess_narrows_a_numeric_label_and_respects_declared_transforms():
    columns = synthetic(20)
    rng = np.random.default_rng(21)
    columns["price"] = np.round(np.clip(np.exp(rng.normal(9.0, 1.0, N)), 0.0, 1e6), 2).tolist()
    del columns["y"]
    label = {"name": "price", "type": "numeric", "lower": 0.0, "upper": 1e6}
    schema = DatasetSchema.model_validate(schema_document(label, declared_age={"clip": [18.0, 80.0]}))
    encoded = parse_and_encode(to_csv(columns), schema)
    outcome = preprocess(encoded, PRIVACY_FILTER, make_generator(22, data_is_public=True))
    assert outcome is not None
    assert outcome.names == ("amount", "price") and outcome.roles == ("feature", "label")
    assert PRIVACY_FILTER.measure(outcome.cost).share <= outcome.share

    amount_rule, label_rule = outcome.derived
    assert amount_rule is not None and label_rule is not None and set(label_rule) == {"lower", "upper"}
    assert outcome.schema.features[1].transform == NumericTransform(clip=amount_rule["clip"], log=amount_rule["log"])
    assert (outcome.schema.label.lower, outcome.schema.label.upper) == (label_rule["lower"], label_rule["upper"])
    assert 0.0 <= label_rule["lower"] < label_rule["upper"] < 1e6
    assert outcome.schema.features[0] == schema.features[0]  # age declares a transform: untouched
    X = outcome.encoded.X
    assert X[:, 0].tobytes() == encoded.X[:, 0].tobytes()
    assert X[:, 2:].tobytes() == encoded.X[:, 2:].tobytes()

    for i, name in [(0, "age"), (1, "amount")]:
        expected = outcome.schema.features[i].scale(np.array(columns[name]))
        assert np.max(np.abs(X[:, i] - expected)) <= 1e-12, name
    y_expected = outcome.schema.label.scale(np.array(columns["price"]))
    assert np.max(np.abs(outcome.encoded.y - y_expected)) <= 1e-12

    rows = encode_rows(feature_rows(columns, with_label="price"), outcome.schema)
    assert np.max(np.abs(rows.X - X)) <= 1e-12
    assert rows.y is not None and np.max(np.abs(rows.y - outcome.encoded.y)) <= 1e-12


def test_preprocess_returns_none_when_opted_out_or_nothing_to_measure():
    columns = synthetic(30)
    csv = to_csv(columns)
    rng = make_generator(31, data_is_public=True)
    opted_out = parse_and_encode(csv, DatasetSchema.model_validate(schema_document(BINARY, preprocessing="none")))
    assert preprocess(opted_out, PRIVACY_FILTER, rng) is None
    declared = schema_document(BINARY, declared_age={"clip": [18.0, 80.0]})
    declared["features"][1]["transform"] = {"log": True}
    all_declared = parse_and_encode(csv, DatasetSchema.model_validate(declared))
    assert preprocess(all_declared, PRIVACY_FILTER, rng) is None
    assert preprocess(all_declared, PRIVACY_FILTER, rng, share=0.2) is None


def test_zero_inflated_amount_is_reencoded_within_the_documented_recovery_error():
    """A capital-gain-like column (30% zeros, the rest logN(2, 2), on [0, 10⁶]) gets clip [0, b ≈ 48] with log.
    The stored value is recovered from the declared encoding to within a few ulps of U − L (ulp(10⁶) ≈ 1.2e-10),
    and the derived encoding's slope at 0 is 2/log1p(b) ≈ 0.5, so the re-encoded matrix can differ from
    encode_rows of the raw values by ~1e-10 (measured 2.3e-11 at the raw value 0.02): the documented bound."""
    columns = synthetic(10)
    rng = np.random.default_rng(5)
    gain = np.where(rng.random(N) < 0.3, 0.0, np.round(np.exp(rng.normal(2.0, 2.0, N)), 2))
    columns["amount"] = np.clip(gain, 0.0, 1e6).tolist()
    encoded = parse_and_encode(to_csv(columns), DatasetSchema.model_validate(schema_document(BINARY)))
    outcome = preprocess(encoded, PRIVACY_FILTER, make_generator(11, data_is_public=True))
    assert outcome is not None
    rule = outcome.derived[1]
    assert rule is not None and rule["log"] is True and rule["clip"][0] == 0.0
    slope = 2.0 / (math.log1p(rule["clip"][1]) - math.log1p(rule["clip"][0]))
    tolerance = 4 * math.ulp(1e6) * slope
    rows = encode_rows(feature_rows(columns), outcome.schema)
    error = float(np.max(np.abs(rows.X - outcome.encoded.X)))
    assert error <= tolerance


def test_too_few_rows_for_the_noise_release_nothing_and_charge_nothing():
    """n < 4 · 3.5 · √S: no bin holding a quarter of the rows could stand out of the noise, so preprocess returns
    None (nothing released, nothing to charge) — decided from n, the columns and the budget only."""
    from privfit.datasets.preprocessing import MIN_ROWS_IN_NOISE_SCALES, THRESHOLD_SIGMAS

    columns = synthetic(40)
    variance = variance_for_share(2, PRIVACY_FILTER, 0.05, bins=BINS)
    assert variance is not None
    needed = MIN_ROWS_IN_NOISE_SCALES * THRESHOLD_SIGMAS * math.sqrt(variance)
    small = {name: values[: int(needed) - 1] for name, values in columns.items()}
    enough = {name: values[: int(needed) + 1] for name, values in columns.items()}
    schema = DatasetSchema.model_validate(schema_document(BINARY))
    rng = make_generator(41, data_is_public=True)
    assert preprocess(parse_and_encode(to_csv(small), schema), PRIVACY_FILTER, rng) is None
    assert preprocess(parse_and_encode(to_csv(enough), schema), PRIVACY_FILTER, rng) is not None


def test_a_regression_widens_each_feature_range_by_a_tenth_of_its_width_on_each_side():
    """margin = REGRESSION_FEATURE_MARGIN for features when the label is numeric (preprocess decides it from the
    public label type): the tail rule's [2, 5] of the hand example becomes [1.7, 5.3]; a range at the bounds stays."""
    from privfit.datasets.preprocessing import REGRESSION_FEATURE_MARGIN

    edges = np.arange(8.0)
    counts = np.array([1, 0, 10, 978, 10, 0, 1])
    widened = derive_range(counts, edges, TINY_SIGMA, 1000, "feature", margin=REGRESSION_FEATURE_MARGIN)
    assert widened == {"clip": [pytest.approx(1.7), pytest.approx(5.3)], "log": False}
    at_bounds = np.array([300, 0, 10, 378, 10, 0, 300])
    assert derive_range(at_bounds, edges, TINY_SIGMA, 1000, "feature", margin=REGRESSION_FEATURE_MARGIN) is None
    columns = synthetic(50)
    columns["y"] = np.round(np.clip(np.exp(np.random.default_rng(9).normal(9.0, 1.0, N)), 0.0, 1e6), 2).tolist()
    document = schema_document({"name": "y", "type": "numeric", "lower": 0.0, "upper": 1e6})
    regression = parse_and_encode(to_csv(columns), DatasetSchema.model_validate(document))
    outcome = preprocess(regression, PRIVACY_FILTER, make_generator(51, data_is_public=True))
    assert outcome is not None and outcome.names[0] == "age"
    sigma = outcome.histograms.sigma
    counts, edges = outcome.histograms.counts[0], outcome.histograms.edges[0]
    plain = derive_range(counts, edges, sigma, regression.n, "feature")
    assert plain is not None
    c, d = plain["clip"]
    a, b = outcome.derived[0]["clip"]  # the same released counts, widened
    assert a == pytest.approx(max(0.0, c - (d - c) / 10)) and b == pytest.approx(min(120.0, d + (d - c) / 10))
    assert (a, b) != (c, d)

"""``synthetic_skewed``: a public, seeded synthetic binary dataset with heavy-tailed features (issue 34).

    .venv/bin/python benchmarks/synthetic.py [--seed 0] > synthetic_skewed.csv
    .venv/bin/python benchmarks/synthetic.py --schema naive|expert     # print a schema as JSON

Everything is a function of the seed (``numpy.random.default_rng(seed)``); the rows are public, so a benchmark may
generate them in-process (``benchmarks/utility.py --datasets synthetic_skewed``). N = 20,000 rows of:

* ``income`` ~ lognormal(μ = 10, σ = 1) and ``balance`` ~ lognormal(8, 1.5): money amounts (2 decimals);
* ``visits`` = ⌊1 + 5·Lomax(a = 1.5)⌋ (an integer count ≥ 1, infinite variance) and ``claims`` =
  1000·Lomax(a = 2) (a money amount, 2 decimals); numpy's ``pareto`` draws the Lomax (Pareto II) variate;
* ``age`` = round(clip(normal(45, 12), 18, 90)) and ``score`` ~ normal(0, 1) (4 decimals);
* ``region``: one of 4 levels with probabilities 0.4, 0.3, 0.2, 0.1;
* ``target`` ∈ {"1", "0"}: Bernoulli(σ(z)) with z linear in the LOG of the four skewed columns (as written to the
  file) and linear in ``age``, ``score`` and the region (:data:`COEFFICIENTS`); the intercept is calibrated by
  bisection on the generated rows so that the mean of σ(z) is :data:`POSITIVE_RATE` (≈ 10 % positive).

Two schemas for it (both validate with ``DatasetSchema.model_validate`` and encode the CSV):

* :data:`NAIVE_SCHEMA` — what an owner without DP knowledge writes: codebook-wide round bounds (money 0–10⁷,
  visits 0–10⁵, age 0–120, score −100–100), no transforms;
* :data:`EXPERT_SCHEMA` — what a DP expert declares from the generating process above, without looking at the
  rows: the same truthful bounds on the money columns but clip ranges at about the 0.1 % / 99.9 % quantiles of
  the generating distributions and a log1p transform on the four skewed columns; age 18–90 (the generator's
  clip); score bounded at ±10 and clipped to ±3.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from typing import Any

import numpy as np

NAME = "synthetic_skewed"
ROWS = 20_000
POSITIVE_RATE = 0.10
LABEL = "target"
REGIONS = ("north", "south", "east", "west")
REGION_PROBABILITIES = (0.4, 0.3, 0.2, 0.1)
COLUMNS = ("income", "balance", "visits", "claims", "age", "score", "region", LABEL)

#: the logistic model's slopes: on the log of the skewed columns (centred at their generating log-medians, scaled
#: by their log-spread), per year of age around 45, per unit of score, and each region's offset
COEFFICIENTS = {
    "log_income": 0.9,  # on (log(income) − 10) / 1
    "log_balance": -0.7,  # on (log(balance) − 8) / 1.5
    "log_visits": 0.8,  # on log(visits), visits ≥ 1
    "log_claims": 0.6,  # on log1p(claims) − log1p(1000)
    "age": -0.03,
    "score": 0.8,
}
REGION_EFFECTS = {"north": 0.0, "south": 0.4, "east": -0.4, "west": 0.8}


def _columns(seed: int) -> dict[str, np.ndarray]:
    """The feature columns as they are written to the file (rounded), from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    n = ROWS
    return {
        "income": np.round(rng.lognormal(10.0, 1.0, n), 2),
        "balance": np.round(rng.lognormal(8.0, 1.5, n), 2),
        "visits": np.floor(1.0 + rng.pareto(1.5, n) * 5.0),
        "claims": np.round(rng.pareto(2.0, n) * 1000.0, 2),
        "age": np.round(np.clip(rng.normal(45.0, 12.0, n), 18.0, 90.0)),
        "score": np.round(rng.normal(0.0, 1.0, n), 4),
        "region": rng.choice(np.array(REGIONS), size=n, p=REGION_PROBABILITIES),
        "_uniform": rng.random(n),  # the label's Bernoulli draws
    }


def _linear_part(columns: dict[str, np.ndarray]) -> np.ndarray:
    """z without the intercept."""
    c = COEFFICIENTS
    z = c["log_income"] * (np.log(columns["income"]) - 10.0)
    z += c["log_balance"] * (np.log(columns["balance"]) - 8.0) / 1.5
    z += c["log_visits"] * np.log(columns["visits"])
    z += c["log_claims"] * (np.log1p(columns["claims"]) - math.log1p(1000.0))
    z += c["age"] * (columns["age"] - 45.0) + c["score"] * columns["score"]
    z += np.array([REGION_EFFECTS[r] for r in columns["region"]])
    return z


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def calibrated_intercept(z: np.ndarray, rate: float = POSITIVE_RATE) -> float:
    """The b with mean σ(z + b) = rate (bisection; the mean is increasing in b)."""
    low, high = -50.0, 50.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if float(np.mean(_sigmoid(z + middle))) < rate:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def synthetic_rows(seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(the feature columns, the true probability of the positive class) — the generator behind the CSV."""
    columns = _columns(seed)
    z = _linear_part(columns)
    probability = _sigmoid(z + calibrated_intercept(z))
    columns[LABEL] = np.where(columns.pop("_uniform") < probability, "1", "0")
    return columns, probability


def synthetic_csv(seed: int = 0) -> bytes:
    """The ``synthetic_skewed`` dataset as CSV bytes with a header row (``\\n`` line ends)."""
    columns, _ = synthetic_rows(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    formats = {"income": "{:.2f}", "balance": "{:.2f}", "visits": "{:.0f}", "claims": "{:.2f}", "age": "{:.0f}",
               "score": "{:.4f}"}  # fmt: skip
    text = {name: [fmt.format(v) for v in columns[name]] for name, fmt in formats.items()}
    text["region"], text[LABEL] = list(columns["region"]), list(columns[LABEL])
    writer.writerows(zip(*(text[name] for name in COLUMNS), strict=True))
    return out.getvalue().encode()


_LABEL = {"name": LABEL, "type": "binary", "positive": "1", "negative": "0"}
_REGION = {"name": "region", "type": "categorical", "levels": list(REGIONS)}
_BUDGET = {"epsilon": 3.0, "delta": 1e-6}


def _numeric(name: str, lower: float, upper: float, **transform: Any) -> dict[str, Any]:
    feature: dict[str, Any] = {"name": name, "type": "numeric", "lower": lower, "upper": upper}
    if transform:
        feature["transform"] = transform
    return feature


NAIVE_SCHEMA: dict[str, Any] = {
    "label": dict(_LABEL),
    "features": [
        _numeric("income", 0.0, 10_000_000.0),
        _numeric("balance", 0.0, 10_000_000.0),
        _numeric("visits", 0.0, 100_000.0),
        _numeric("claims", 0.0, 10_000_000.0),
        _numeric("age", 0.0, 120.0),
        _numeric("score", -100.0, 100.0),
        {**_REGION, "levels": list(REGIONS)},
    ],
    "missing": "reject",
    "budget": dict(_BUDGET),
}
"""Codebook-wide round bounds, no transforms: what an owner without DP knowledge declares."""

EXPERT_SCHEMA: dict[str, Any] = {
    "label": dict(_LABEL),
    "features": [
        # lognormal(10, 1): e^(10 ± 3) ≈ 1,100 … 442,000 → clip [1,000, 500,000], log1p
        _numeric("income", 0.0, 10_000_000.0, clip=[1_000.0, 500_000.0], log=True),
        # lognormal(8, 1.5): e^(8 ± 4.5) ≈ 33 … 268,000 → clip [30, 300,000], log1p
        _numeric("balance", 0.0, 10_000_000.0, clip=[30.0, 300_000.0], log=True),
        # 1 + 5·Lomax(1.5): 99.9 % quantile 1 + 5·(1000^(1/1.5) − 1) ≈ 496 → clip [1, 500], log1p
        _numeric("visits", 0.0, 100_000.0, clip=[1.0, 500.0], log=True),
        # 1000·Lomax(2): 99.9 % quantile 1000·(1000^(1/2) − 1) ≈ 30,600 → clip [0, 30,000], log1p
        _numeric("claims", 0.0, 10_000_000.0, clip=[0.0, 30_000.0], log=True),
        _numeric("age", 18.0, 90.0),  # the generator clips to [18, 90]
        _numeric("score", -10.0, 10.0, clip=[-3.0, 3.0]),  # standard normal: ±3 σ
        {**_REGION, "levels": list(REGIONS)},
    ],
    "missing": "reject",
    "budget": dict(_BUDGET),
}
"""What a DP expert declares from the generating process (not from the rows): clip ranges and log1p on the
skewed columns, tight bounds on the others."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--schema", choices=["naive", "expert"], help="print this schema as JSON instead")
    args = parser.parse_args()
    if args.schema:
        print(json.dumps(NAIVE_SCHEMA if args.schema == "naive" else EXPERT_SCHEMA, indent=2))
    else:
        sys.stdout.buffer.write(synthetic_csv(args.seed))


if __name__ == "__main__":
    main()

"""Writes ``examples/loans.csv``: a small synthetic, public loan-default table for the CLI and client examples
of docs/client.md (no real person's data). Deterministic: ``python examples/make_loans.py`` rewrites the same file."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

EMPLOYMENT = ["salaried", "self-employed", "unemployed", "retired"]


def main(rows: int = 3000, seed: int = 2026) -> None:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, size=rows)
    income = np.clip(rng.lognormal(10.6, 0.5, size=rows), 5_000, 250_000).round(-2)
    debt_ratio = np.clip(rng.beta(2, 5, size=rows), 0, 1).round(3)
    employment = rng.choice(EMPLOYMENT, size=rows, p=[0.6, 0.2, 0.08, 0.12])
    score = (3.0 * debt_ratio - income / 60_000 - (age - 45) / 40 + 1.2 * (employment == "unemployed") - 0.3
             + 0.6 * rng.standard_normal(rows))  # fmt: skip
    default = np.where(score > 0, "yes", "no")
    path = Path(__file__).with_name("loans.csv")
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["age", "income", "debt_ratio", "employment", "default"])
        writer.writerows(zip(age, income.astype(int), debt_ratio, employment, default, strict=True))
    print(f"{path}: {rows} rows, {np.mean(default == 'yes'):.1%} defaults")


if __name__ == "__main__":
    main()

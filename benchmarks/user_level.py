"""User-level privacy (issue 37, item 3): what protecting a person with all their rows costs in utility.

    python benchmarks/user_level.py [--datasets adult telco_churn ...] [--schemas expert naive] [--epsilons 1 5]
                                    [--seeds 2] [--max-rows 4]

The public datasets have one row per person, so persons are made up by a PUBLIC, seeded rule: the training rows are
shuffled and cut into persons of 1 to 2k rows (uniform), so about half the persons have more rows than the bound k
(``--max-rows``) and lose some at upload. Each dataset (protocol of ``benchmarks/utility.py``: its expert schema, or
the non-expert one — codebook-wide bounds, no transforms — a seeded 80/20 split) goes through private preprocessing as
an upload does (the default 5 % of the budget; at the unit level its histograms are charged k times a row's
sensitivity) and is then fitted at the largest ε the dataset's filter still admits

* row-level by ``dp_gd`` on every training row — the guarantee is then for ONE ROW, so a person with r rows is
  protected only at about r·ε (what a team without a privacy unit gets);
* user-level by ``dp_gd`` and ``dp_sgd`` after contribution bounding to k rows per person (the service's upload
  path, :func:`privfit.datasets.units.bound_contributions`) — the guarantee is for one person with all their rows;
* non-privately by scikit-learn (the ceiling), in the same run.

Prints test accuracy (binary labels) or RMSE (numeric labels), mean over seeds, per ε, and the user-level fits'
gap to the row-level one. Datasets under ``../shared/data`` are skipped with a note when absent.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import warnings

import numpy as np
from preprocessing import admissible_epsilon
from utility import DATASETS, Split, baselines, load_split, score

from privfit.datasets import DatasetSchema, EncodedDataset
from privfit.datasets.encoding import compute_content_hash
from privfit.datasets.preprocessing import preprocess
from privfit.datasets.units import bound_contributions
from privfit.privacy import DEFAULT_GRID, PrivacyCost, PrivacyFilter, make_generator
from privfit.solvers import PublicMetadata, get_solver

GROUPING_SEED = 7  # the public rule that makes up persons (not a property of any data)


def with_persons(train: EncodedDataset, max_rows: int) -> tuple[EncodedDataset, float]:
    """``train`` as a user-level dataset: rows cut into persons of 1..2k rows by a public seeded rule, then bounded to
    k rows per person as an upload does. Returns the bounded dataset and the share of rows dropped."""
    rng = np.random.default_rng(GROUPING_SEED)
    order = rng.permutation(train.n)
    sizes = []
    while sum(sizes) < train.n:
        sizes.append(int(rng.integers(1, 2 * max_rows + 1)))
    codes = np.empty(train.n, dtype=np.int64)
    codes[order] = np.repeat(np.arange(len(sizes)), sizes)[: train.n]
    _, codes = np.unique(codes, return_inverse=True)  # every person present, numbered 0..U−1
    document = train.schema.model_dump(mode="json")
    if document["csv"]["columns"] is not None:  # a headerless file: the person column is one more column of it
        document["csv"]["columns"].append("person")
    document.update(validation_fraction=None, privacy_unit={"column": "person", "max_rows": max_rows})
    schema = DatasetSchema.model_validate(document)
    declared = dataclasses.replace(train, schema=schema, units=codes,
                                   content_hash=compute_content_hash(train.X, train.y, schema, codes))  # fmt: skip
    bounded = bound_contributions(declared, make_generator(GROUPING_SEED, data_is_public=True))
    return bounded.encoded, bounded.rows_dropped / train.n


def fitted(solver: str, data: EncodedDataset, split: Split, epsilon: float, delta: float, seeds: int) -> float:
    """The mean test metric (accuracy or RMSE) of ``solver`` with default settings on ``data``, after private
    preprocessing at the default share of the budget (ε, δ), fitted at the largest ε the filter still admits."""
    limit = PrivacyFilter.for_budget(epsilon, delta, DEFAULT_GRID)
    metric = "accuracy" if split.binary else "rmse"
    values = []
    for seed in range(seeds):
        outcome = preprocess(data, limit, make_generator(10_000 + seed, data_is_public=True))
        seen, already = (data, PrivacyCost.zero(DEFAULT_GRID)) if outcome is None else (outcome.encoded, outcome.cost)
        scored = split if outcome is None else split.encoded_by(outcome.schema, outcome.encoded)
        meta = PublicMetadata.from_dataset(seen)

        def cost(target: float, meta: PublicMetadata = meta) -> PrivacyCost:
            resolved = get_solver(solver).resolve({"model": split.model}, meta, target_epsilon=target, delta=delta)
            return get_solver(solver).cost(resolved, meta)

        target = admissible_epsilon(cost, already, limit)
        plan = get_solver(solver).plan({"model": split.model}, meta, target_epsilon=target, delta=delta)
        result = get_solver(solver).fit(seen.X, seen.y, meta, plan.resolved, make_generator(seed, data_is_public=True),
                                        units=seen.units)  # fmt: skip
        values.append(score(result, scored)[metric])
    return statistics.fmean(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--schemas", nargs="+", choices=("expert", "naive"), default=["expert", "naive"])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 5.0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--max-rows", type=int, default=4)
    parser.add_argument("--delta", type=float, default=1e-6)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(f"persons of 1..{2 * args.max_rows} rows, bounded to k = {args.max_rows}; δ = {args.delta:g}; "
          f"{args.seeds} seeds; accuracy (binary) or RMSE (numeric), mean over seeds")  # fmt: skip
    print(f"{'dataset':14} {'schema':6} {'ε':>4} {'sklearn':>8} {'row dp_gd':>10} {'unit dp_gd':>11} "
          f"{'unit dp_sgd':>12}  persons / rows kept")  # fmt: skip
    for name, kind in ((name, kind) for name in args.datasets for kind in args.schemas):
        spec = DATASETS[name]
        if spec.absent():
            print(f"{name:14} skipped: {spec.absent()}")
            continue
        split = load_split(spec, split_seed=0, max_rows=None, schemas=kind)
        persons, dropped = with_persons(split.train, args.max_rows)
        ceiling = baselines(split, args.epsilons)[0]
        metric = "accuracy" if split.binary else "rmse"
        for epsilon in args.epsilons:
            row = fitted("dp_gd", split.train, split, epsilon, args.delta, args.seeds)
            unit_gd = fitted("dp_gd", persons, split, epsilon, args.delta, args.seeds)
            unit_sgd = fitted("dp_sgd", persons, split, epsilon, args.delta, args.seeds)
            print(f"{name:14} {kind:6} {epsilon:>4g} {ceiling.mean(epsilon, metric):>8.4f} {row:>10.4f} "
                  f"{unit_gd:>11.4f} {unit_sgd:>12.4f}  {persons.public_n} / {persons.n} "
                  f"({dropped:.0%} of rows dropped)")  # fmt: skip


if __name__ == "__main__":
    main()

"""User-level privacy in the data layer (issue 37, item 3): the ``privacy_unit`` declaration, the unit index read by
every upload path, contribution bounding by a secret uniform choice, the store's unit index (with row-level blobs
keeping their keys), and the preprocessing histograms' per-unit sensitivity."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from privfit.datasets import DatasetSchema
from privfit.datasets.columnar import encode_csv_upload, encode_parquet
from privfit.datasets.encoding import DatasetValidationError, parse_and_encode
from privfit.datasets.store import DatasetStoreError, LocalDatasetStore
from privfit.datasets.units import bound_contributions
from privfit.privacy.histogram import histogram_cost, histogram_matrix, symlog_grids
from privfit.privacy.mechanisms import gaussian_rdp

DECLARED = {
    "label": {"name": "y", "type": "binary", "positive": "1", "negative": "0"},
    "features": [{"name": "a", "type": "numeric", "lower": 0, "upper": 100}],
    "budget": {"epsilon": 1.0, "delta": 1e-6},
    "privacy_unit": {"column": "uid", "max_rows": 2},
}
SCHEMA = DatasetSchema.model_validate(DECLARED)


def csv_of(rows: list[tuple[str, float, str]]) -> bytes:
    return ("y,a,uid\n" + "".join(f"{y},{a},{u}\n" for y, a, u in rows)).encode()


ROWS = [("1", float(i), f"u{(7 * i) % 5}") for i in range(20)]  # five units of four rows each


def parquet_of(rows: list[tuple[str, float, object]]) -> bytes:
    table = pa.table({"y": [r[0] for r in rows], "a": [r[1] for r in rows], "uid": [r[2] for r in rows]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


# ---- the declaration ----


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"privacy_unit": {"column": "a", "max_rows": 2}}, "feature"),
        ({"privacy_unit": {"column": "y", "max_rows": 2}}, "label"),
        ({"privacy_unit": {"column": "uid", "max_rows": 0}}, "max_rows"),
        ({"privacy_unit": {"column": "uid", "max_rows": 10_001}}, "max_rows"),
        ({"privacy_unit": {"column": "uid"}}, "max_rows"),
        ({"validation_fraction": 0.2}, "validation_fraction"),
        ({"csv": {"header": False, "columns": ["y", "a"]}}, "csv.columns"),
    ],
)
def test_a_bad_privacy_unit_declaration_is_refused_naming_the_field(change, field):
    with pytest.raises(ValidationError) as refused:
        DatasetSchema.model_validate({**DECLARED, **change})
    assert field.split(".")[-1] in str(refused.value) or field in str(refused.value)


def test_the_unit_column_is_part_of_the_file_and_of_the_canonical_schema():
    assert SCHEMA.column_names == ["y", "a", "uid"]
    assert json.loads(SCHEMA.canonical_json())["privacy_unit"] == {"column": "uid", "max_rows": 2}
    row_level = DatasetSchema.model_validate({k: v for k, v in DECLARED.items() if k != "privacy_unit"})
    assert "privacy_unit" not in json.loads(row_level.canonical_json())  # row-level schemas hash as before
    headerless = DatasetSchema.model_validate({**DECLARED, "csv": {"header": False, "columns": ["uid", "a", "y"]}})
    encoded = parse_and_encode(b"u1,3,1\nu2,4,0\n", headerless)
    assert encoded.units.tolist() == [0, 1]


# ---- reading the units ----


def test_every_upload_path_reads_the_same_units_and_hash():
    csv = csv_of(ROWS)
    results = [
        parse_and_encode(io.BytesIO(csv), SCHEMA, columnar=False),
        parse_and_encode(io.BytesIO(csv), SCHEMA, columnar=True),
        encode_csv_upload(io.BytesIO(csv), SCHEMA),
        encode_parquet(parquet_of(ROWS), SCHEMA),
        encode_parquet(parquet_of([(y, a, int(u[1:]) + 100) for y, a, u in ROWS]), SCHEMA),  # integer ids
    ]
    expected = [(7 * i) % 5 for i in range(20)]
    first_seen = {u: i for i, u in enumerate(dict.fromkeys(expected))}
    for encoded in results:
        assert encoded.units.tolist() == [first_seen[u] for u in expected]
        assert encoded.public_n == 5 and encoded.n == 20 and encoded.unit_count == 5
        assert not encoded.units.flags.writeable
    assert len({r.content_hash for r in results}) == 1
    row_level = DatasetSchema.model_validate({k: v for k, v in DECLARED.items() if k != "privacy_unit"})
    plain = parse_and_encode(b"y,a\n" + b"".join(f"1,{i}\n".encode() for i in range(20)), row_level)
    assert plain.units is None and plain.public_n == 20


def test_unit_ids_are_stripped_and_compared_in_nfc():
    encoded = parse_and_encode(io.BytesIO("y,a,uid\n1,1,caf\u00e9\n0,2, cafe\u0301 \n1,3,other\n".encode()), SCHEMA)
    assert encoded.units.tolist() == [0, 0, 1]


@pytest.mark.parametrize("missing", ["", "NA", "?"])
def test_a_row_without_a_unit_is_refused_naming_the_column_and_line(missing):
    csv = csv_of([("1", 1.0, "u1"), ("0", 2.0, missing), ("1", 3.0, "u2")])
    for columnar in (True, False):
        with pytest.raises(DatasetValidationError) as refused:
            parse_and_encode(io.BytesIO(csv), SCHEMA, columnar=columnar)
        assert refused.value.column == "uid" and refused.value.line == 3, refused.value
    with pytest.raises(DatasetValidationError) as refused:
        encode_parquet(parquet_of([("1", 1.0, "u1"), ("0", 2.0, None)]), SCHEMA)
    assert refused.value.column == "uid" and refused.value.line == 2


def test_a_file_without_the_unit_column_is_refused_and_a_wrongly_typed_one_too():
    with pytest.raises(DatasetValidationError) as refused:
        parse_and_encode(b"y,a\n1,2\n", SCHEMA)
    assert refused.value.column == "uid"
    with pytest.raises(DatasetValidationError) as refused:
        encode_parquet(parquet_of([("1", 1.0, 1.5)]), SCHEMA)
    assert refused.value.column == "uid" and "integer" in refused.value.message


# ---- contribution bounding ----


def test_bounding_keeps_at_most_max_rows_per_unit_in_file_order():
    encoded = parse_and_encode(io.BytesIO(csv_of(ROWS)), SCHEMA)
    bounded = bound_contributions(encoded, np.random.default_rng(1))
    kept = bounded.encoded
    assert bounded.rows_dropped == 10 and kept.n == 10 and kept.public_n == 5
    assert np.bincount(kept.units).tolist() == [2] * 5
    values = kept.X[:, 0]
    assert np.all(np.diff(values) > 0)  # file order (a = i increases down the file)
    assert kept.units[0] == 0 and sorted(set(kept.units.tolist())) == [0, 1, 2, 3, 4]
    # the rows kept are rows of the file, each with its own unit
    original = {round(float(x), 9): int(u) for x, u in zip(encoded.X[:, 0], encoded.units, strict=True)}
    pairs = {(original[round(float(x), 9)], int(u)) for x, u in zip(values, kept.units, strict=True)}
    assert len({old for old, _ in pairs}) == 5 and len(pairs) == 5  # a consistent renumbering
    assert kept.content_hash != encoded.content_hash and not kept.X.flags.writeable


def test_bounding_a_dataset_within_the_bound_changes_nothing():
    rows = [("1", float(i), f"u{i // 2}") for i in range(10)]  # two rows per unit: within max_rows = 2
    encoded = parse_and_encode(io.BytesIO(csv_of(rows)), SCHEMA)
    bounded = bound_contributions(encoded, np.random.default_rng(0))
    assert bounded.rows_dropped == 0 and bounded.encoded.X is encoded.X
    assert bounded.encoded.content_hash == encoded.content_hash


def test_the_rows_a_unit_keeps_are_a_uniformly_random_subset():
    """Each of the C(4, 2) = 6 pairs of a four-row unit is kept with probability 1/6: a chi-square test over 3,000
    draws (5 degrees of freedom; 20.5 is its 0.999 quantile — a fixed rule such as "the first two" scores 15,000)."""
    encoded = parse_and_encode(io.BytesIO(csv_of(ROWS)), SCHEMA)
    unit0 = {round(float(x), 9) for x, u in zip(encoded.X[:, 0], encoded.units, strict=True) if u == 0}
    counts: Counter[tuple[float, ...]] = Counter()
    draws = 3000
    for seed in range(draws):
        kept = bound_contributions(encoded, np.random.default_rng(seed)).encoded
        counts[tuple(sorted(v for v in (round(float(x), 9) for x in kept.X[:, 0]) if v in unit0))] += 1
    assert set(counts) == {tuple(sorted(p)) for p in itertools.combinations(unit0, 2)}
    expected = draws / 6
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 20.5, counts


# ---- the store ----


def test_the_store_keeps_the_unit_index_and_row_level_blobs_keep_their_keys(tmp_path):
    store = LocalDatasetStore(tmp_path)
    encoded = bound_contributions(parse_and_encode(io.BytesIO(csv_of(ROWS)), SCHEMA), np.random.default_rng(3)).encoded
    key = store.put(encoded)
    X, y, units = store.read(key)
    assert np.array_equal(X, encoded.X) and np.array_equal(y, encoded.y) and np.array_equal(units, encoded.units)
    # the key of a row-level dataset is the digest it always had (stored blobs keep their keys: nothing to migrate)
    row_level = DatasetSchema.model_validate({k: v for k, v in DECLARED.items() if k != "privacy_unit"})
    plain = parse_and_encode(b"y,a\n1,2\n0,3\n", row_level)
    digest = hashlib.sha256()
    for array in (plain.X, plain.y):
        digest.update(str(array.shape).encode())
        digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    assert store.put(plain) == digest.hexdigest()
    assert store.read(digest.hexdigest()).units is None
    # a unit index that does not match the key is refused
    buffer = io.BytesIO()
    np.savez(buffer, X=encoded.X, y=encoded.y, units=np.zeros_like(encoded.units))
    (tmp_path / f"{key}.npz").write_bytes(buffer.getvalue())
    with pytest.raises(DatasetStoreError):
        store.read(key)


# ---- preprocessing at the unit level ----


@pytest.mark.parametrize(("columns", "k"), [(1, 1), (3, 4), (5, 25)])
def test_the_histogram_charge_of_units_of_k_rows_is_the_gaussian_of_sensitivity_k_sqrt_2p(columns, k):
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    curve = histogram_cost(columns, 7, orders, rows_per_unit=k)
    exact = orders * (k * k * 2 * columns) / (2 * 7)
    assert np.all(curve >= exact) and np.allclose(curve, exact, rtol=1e-12)
    assert np.allclose(curve, gaussian_rdp(orders, sigma=math.sqrt(7), sensitivity=k * math.sqrt(2 * columns)))


def test_replacing_a_unit_of_k_rows_moves_the_histograms_by_at_most_k_sqrt_2p():
    """The sensitivity the charge assumes, checked on random units (including the worst case: every row of both
    units in one bin of each column)."""
    rng = np.random.default_rng(5)
    p, k = 3, 6
    edges = np.stack(symlog_grids(np.full(p, 0.0), np.full(p, 100.0), 32)[0])
    base = rng.uniform(0, 100, size=(200, p))
    worst = 0.0
    for trial in range(300):
        old = rng.uniform(0, 100, size=(rng.integers(1, k + 1), p)) if trial else np.full((k, p), 1.0)
        new = rng.uniform(0, 100, size=(rng.integers(1, k + 1), p)) if trial else np.full((k, p), 99.0)
        difference = histogram_matrix(np.vstack([base, old]), edges) - histogram_matrix(np.vstack([base, new]), edges)
        worst = max(worst, float(np.sum(difference.astype(float) ** 2)))
    assert worst == 2 * p * k * k  # attained by the worst case, never exceeded

"""Parse a CSV upload (or client-supplied rows) and encode it against a declared :class:`DatasetSchema`.

The encoding is fixed by the public schema alone (see :mod:`privfit.datasets.schema`): numerics are scaled to
[−1, 1] by their declared bounds and clipped, categoricals are one-hot, labels are ±1 or scaled to [−1, 1].

Privacy rules enforced here (DESIGN §1.2–1.3):

* Nothing about the rows is derived into public metadata: bounds, levels and scales come from the schema.
* Out-of-bounds numerics are clipped to their declared bounds. How many cells were clipped per column is private:
  it is counted only inside :func:`~privfit.datasets.schema.counting_clipped_cells` (the upload, whose answer
  goes to the dataset's owner alone) and never stored.
* Error messages (:class:`DatasetValidationError`) name the column and the first offending line, and may list
  public facts (declared levels, classes, bounds, NA markers) but never quote a cell value.
* Either the whole file encodes or an error is raised; nothing is half-encoded.

Text (:mod:`privfit.text`): categorical and label cells, CSV header names and the column names of prediction rows
are compared with the declaration in Unicode NFC, as the schema stores it: a cell "e" + U+0301 is the level "é".
The comparison lives in the helpers every path shares (:func:`_parse_token`, :func:`_level_codes`,
:func:`_binary_label_column`), so the exact CSV path, the columnar CSV path, Parquet and prediction rows agree bit
for bit; the content hash is over the encoded matrix and the NFC schema, so a table hashes alike in NFC and in NFD.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import math
import re
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal

import numpy as np

from privfit.text import nfc

from .schema import (
    BinaryLabel,
    CategoricalFeature,
    CategoricalLabel,
    DatasetSchema,
    NumericFeature,
    NumericLabel,
    restart_clipped_cells,
)

__all__ = [
    "DatasetTooLargeError",
    "DatasetValidationError",
    "EncodedDataset",
    "EncodedRows",
    "compute_content_hash",
    "encode_rows",
    "header_names",
    "parse_and_encode",
    "too_large_error",
]

#: Version tag mixed into every content hash; bump it if the encoding or the serialisation changes.
CONTENT_HASH_VERSION = b"privfit-encoded-dataset-v1"

# A plain decimal number (ASCII digits only). Python's float() is more permissive ("1_000", "nan", "infinity",
# non-ASCII digits); those are rejected so that what counts as a number is explicit.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NON_FINITE_WORDS = frozenset({"nan", "inf", "infinity"})


class DatasetValidationError(ValueError):
    """The data does not conform to its declared schema.

    Attributes:
        column: the offending column's name, or ``None`` for file-level problems (encoding, CSV syntax,
            field count, empty file).
        line: for CSV uploads, the 1-based physical line of the file where the first offending record
            starts (with a header, the header is line 1); for :func:`encode_rows`, the 1-based index of the
            first offending row; ``None`` when no line applies (e.g. an empty file).
        message: a human-readable explanation. It never contains a cell value (DESIGN §1.3).
    """

    def __init__(self, column: str | None, line: int | None, message: str) -> None:
        super().__init__(message)
        self.column = column
        self.line = line
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across worker processes
        return (type(self), (self.column, self.line, self.message))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for problem+json responses: ``{"column", "line", "detail"}``."""
        return {"column": self.column, "line": self.line, "detail": self.message}


class DatasetTooLargeError(ValueError):
    """The upload exceeds a public size limit of the service (not a fault of the data's content).

    Attributes:
        setting: the name of the setting that refused it (e.g. ``"max_matrix_bytes"``).
        limit: that setting's value.
        message: explanation; it states only public quantities (n, d, the limit), never a cell value.
    """

    def __init__(self, setting: str, limit: int, message: str) -> None:
        super().__init__(message)
        self.setting, self.limit, self.message = setting, limit, message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.setting, self.limit, self.message))


@dataclass(frozen=True, eq=False)
class EncodedDataset:
    """An encoded dataset: a private matrix plus public metadata derived from the schema alone.

    Attributes:
        X: (n, d) float64, read-only; columns in ``feature_names`` order.
        y: (n,) float64, read-only; ±1 for a binary label, the class index 0..k−1 for a categorical label, in
            [−1, 1] for a numeric label (``schema.label.decode`` maps back to the original scale or class names).
        feature_names: ``name`` for a numeric feature, ``name=level`` for each one-hot column.
        n: number of rows (public under the bounded-DP neighbour relation, DESIGN §1.1).
        row_norm_bound: public bound on ‖x_i‖₂, ``sqrt(#numeric + #categorical)``
            (see :attr:`DatasetSchema.row_norm_bound`).
        label_bound: public bound on |y_i| (1.0; k − 1 for a categorical label).
        content_hash: hex sha256 of the canonical serialisation (see :func:`compute_content_hash`).
            It is a deterministic function of the private rows: use it as an internal storage key and show it
            only to the dataset's owner, never to analysts (it would allow testing a guess of the data).
        schema: the declared schema the data was encoded against.
        units: for a schema with a ``privacy_unit``, each row's unit as an int64 index 0..U−1 (read-only; units
            numbered in order of first appearance, renumbered by :func:`privfit.datasets.units.bound_contributions`);
            None for a row-level dataset.
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: list[str]
    n: int
    row_norm_bound: float
    label_bound: float
    content_hash: str
    schema: DatasetSchema
    units: np.ndarray | None = None

    @property
    def d(self) -> int:
        """Number of encoded feature columns."""
        return int(self.X.shape[1])

    @property
    def unit_count(self) -> int | None:
        """The number of privacy units U (None for a row-level dataset)."""
        return None if self.units is None else (int(self.units.max()) + 1 if self.units.size else 0)

    @property
    def public_n(self) -> int:
        """The dataset's public size: the number of rows n, or of privacy units U for a user-level dataset (the
        row count is then not public: replacing one unit may change it, DESIGN §1.1)."""
        count = self.unit_count
        return self.n if count is None else count


@dataclass(frozen=True, eq=False)
class EncodedRows:
    """Client-supplied rows encoded for prediction: ``X`` (n, d); ``y`` (n,) or ``None`` if no label given."""

    X: np.ndarray
    y: np.ndarray | None
    feature_names: list[str]
    n: int


# --------------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------------


def parse_and_encode(
    source: bytes | IO[bytes],
    schema: DatasetSchema | Mapping[str, Any],
    *,
    max_matrix_bytes: int | None = None,
    columnar: bool = True,
) -> EncodedDataset:
    """Parse an uploaded CSV file and encode it against the declared schema.

    ``source`` is the file's bytes or a binary file object positioned at its start (e.g. an upload spooled to
    disk); it is read in blocks and encoded in chunks of rows straight into the float64 matrix, so memory is
    about the encoded matrix plus one chunk, not a multiple of the file. A seekable source is first offered to
    the columnar path (:func:`privfit.datasets.columnar.encode_csv`: Arrow's multi-threaded reader, vectorised
    validation), which returns the same result for the files it accepts; the others, and every file with an
    error, are encoded cell by cell (:func:`_parse_and_encode_exact`), which reports the first problem;
    ``columnar=False`` takes that path at once (the tests compare the two).

    The file must be UTF-8 (a leading BOM is ignored). With ``schema.csv.header`` the first record names the
    columns, which must be exactly the label and feature names (any order, no duplicates); otherwise the
    column order is ``schema.csv.columns``. Cells are stripped of surrounding whitespace; blank lines (and, if
    ``schema.csv.comment`` is set, comment lines) are skipped. See :mod:`privfit.datasets.schema` for the
    encoding and the missing-value policy.

    Raises:
        DatasetValidationError: for the first problem in file order (bad UTF-8, malformed CSV, wrong field
            count, bad header, unknown category, unknown label class, non-numeric or non-finite number,
            disallowed missing value, empty file or no data rows).
        DatasetTooLargeError: when ``max_matrix_bytes`` is set and n·(d + 1)·8 would exceed it (raised as soon
            as the rows read so far exceed it, before the memory for them is allocated).
    """
    schema = _as_schema(schema)
    stream: IO[bytes] = io.BytesIO(source) if isinstance(source, bytes) else source
    if columnar and _seekable(stream):
        from .columnar import encode_csv  # columnar builds on this module's helpers

        origin = stream.tell()
        encoded = encode_csv(stream, schema, max_matrix_bytes)
        if encoded is not None:
            return encoded
        stream.seek(origin)
        restart_clipped_cells()  # the exact path encodes every row again
    return _parse_and_encode_exact(stream, schema, max_matrix_bytes)


def _seekable(stream: IO[bytes]) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, OSError, ValueError):
        return False


def too_large_error(max_rows: int, d: int, max_matrix_bytes: int) -> DatasetTooLargeError:
    """The refusal of an upload of more than ``max_rows`` rows of ``d`` features (``max_matrix_bytes``)."""
    return DatasetTooLargeError(
        "max_matrix_bytes",
        max_matrix_bytes,
        f"the encoded matrix of more than {max_rows} rows with d = {d} features exceeds max_matrix_bytes = "
        f"{max_matrix_bytes} bytes (n·(d + 1)·8); split the dataset or ask the operator to raise the limit",
    )


def _parse_and_encode_exact(
    stream: IO[bytes], schema: DatasetSchema, max_matrix_bytes: int | None = None
) -> EncodedDataset:
    """:func:`parse_and_encode` cell by cell with Python's ``csv`` module: the definition of what a CSV upload
    means, the path of every file the columnar path declines, and the one that finds the first error's line."""
    opts = schema.csv
    d = schema.dimension
    row_bytes = (d + 1) * 8
    max_rows = None if max_matrix_bytes is None else max_matrix_bytes // row_bytes
    capacity = _line_bound(stream)
    if max_rows is not None and capacity is not None:
        capacity = min(capacity, max_rows + 1)
    text = _TextLines(stream)
    source_lines = _LineSource(iter(text), opts.comment)
    reader = csv.reader(source_lines, delimiter=opts.delimiter, quotechar='"', strict=True)
    expected = None if opts.columns is None else len(opts.columns)
    index: dict[str, int] | None = None if opts.header else {name: i for i, name in enumerate(opts.columns or [])}
    out = _Matrix(d, capacity, unit_ids_of(schema))
    records: list[list[str]] = []
    lines: list[int] = []
    chunk_rows = 65536
    struct_error: DatasetValidationError | None = None

    def flush() -> None:
        if not records:
            return
        assert index is not None
        order = index
        n0, m = out.n, len(records)
        if max_rows is not None and n0 + m > max_rows:
            assert max_matrix_bytes is not None
            raise too_large_error(max_rows, d, max_matrix_bytes)
        X, y = out.reserve(m)
        columns = list(zip(*records, strict=True))
        _encode(schema, cells=lambda name: columns[order[name]], n=m, positions=lines, unit="line",
                column_order=order, label_present=True, out=(X, y))  # fmt: skip
        if out.unit_ids is not None:
            codes = out.unit_ids.codes(columns[order[out.unit_ids.column]])
            out.set_units(codes, lambda i: (f"line {lines[i]}", lines[i]))
        out.n += m
        records.clear()
        lines.clear()

    while True:
        start = reader.line_num + 1
        source_lines.at_record_start = True
        try:
            rec = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            # csv's messages describe syntax (quotes, delimiters, NUL), never cell contents.
            struct_error = DatasetValidationError(
                None, start, f"malformed CSV in the record starting at line {start}: {exc}"
            )
            break
        if not rec or (len(rec) == 1 and not rec[0].strip()):
            continue  # blank line
        if index is None:  # the header record
            head = header_names(rec)
            index = _check_header(head, start, schema)
            expected = len(head)
            chunk_rows = max(16, min(65536, _CHUNK_CELLS // max(1, expected)))
            continue
        if expected is not None and len(rec) != expected:
            struct_error = _field_count_error(start, len(rec), expected)
            break
        if not records and expected is not None:
            chunk_rows = max(16, min(65536, _CHUNK_CELLS // max(1, expected)))
        records.append(rec)
        lines.append(start)
        if len(records) >= chunk_rows:
            flush()
    # A structural problem (CSV syntax, field count) precedes a UTF-8/NUL problem: it was found in the text
    # before it. Cell errors in the rows before either are reported first (flush raises them).
    pending = struct_error or text.error
    if index is None:
        raise pending or DatasetValidationError(None, None, "the file is empty: expected a header row")
    flush()
    if out.n == 0:
        raise pending or DatasetValidationError(None, None, "the file contains no data rows")
    if pending is not None:
        raise pending
    X, y = out.result()
    return _finish(schema, X, y, out.units())


def encode_rows(
    rows: Sequence[Mapping[str, Any]],
    schema: DatasetSchema | Mapping[str, Any],
    *,
    unknown_category: Literal["error", "ignore"] = "error",
) -> EncodedRows:
    """Encode client-supplied rows (e.g. for prediction) with exactly the rules of :func:`parse_and_encode`.

    ``unknown_category="ignore"`` encodes a categorical level the schema does not declare as an all-zero one-hot
    block (the row then carries no information for that column, as a missing cell under ``"impute"`` does) instead
    of refusing the rows; the default, ``"error"``, refuses them naming the column and row, as an upload does.

    Each row is a mapping from column name to value: a string (stripped; ``schema.csv.na_values`` mean
    missing), a number for numeric columns (not bool), or ``None`` (missing). Every numeric and categorical
    feature must be present as a key; ``"ignore"`` columns may be present and are not inspected; unknown keys
    are an error. The label is optional, but must then be given in every row or in none.

    Errors use the 1-based row index as ``line``.

    Raises:
        DatasetValidationError: for the first offending row (see :func:`parse_and_encode`).
    """
    schema = _as_schema(schema)
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise DatasetValidationError(None, None, "rows must be a list of objects")
    declared = set(schema.column_names)
    spelled = {nfc(name): name for name in declared}  # NFC → as declared (NFC too, unless stored before that rule)
    required = [f.name for f in schema.features if f.type != "ignore"]
    label = schema.label.name
    label_present: bool | None = None
    pending: DatasetValidationError | None = None
    good: list[Mapping[str, Any]] = []
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            pending = DatasetValidationError(None, i, f"row {i} is not an object mapping column names to values")
            break
        row, twice = _declared_keys(row, spelled)
        if twice is not None:
            pending = DatasetValidationError(
                twice, i, f"row {i} names column {twice!r} twice (column names are compared in Unicode NFC)"
            )
            break
        unknown = [k for k in row if k not in declared]
        if unknown:
            pending = DatasetValidationError(
                str(unknown[0]), i, f"row {i} has undeclared columns {[str(k) for k in unknown]}"
            )
            break
        absent = [name for name in required if name not in row]
        if absent:
            pending = DatasetValidationError(
                absent[0], i, f"row {i} lacks feature columns {absent} (use null for a missing value)"
            )
            break
        has_label = label in row
        if label_present is None:
            label_present = has_label
        elif has_label != label_present:
            pending = DatasetValidationError(
                label, i, f"label column {label!r} must be given in every row or in none (row {i} differs)"
            )
            break
        good.append(row)

    if not good:
        raise pending or DatasetValidationError(None, None, "no rows to encode")

    X, y = _encode(
        schema,
        cells=lambda name: [row.get(name) for row in good],
        n=len(good),
        positions=list(range(1, len(good) + 1)),
        unit="row",
        column_order={name: k for k, name in enumerate(schema.column_names)},
        label_present=bool(label_present),
        ignore_unknown=unknown_category == "ignore",
    )
    if pending is not None:
        raise pending
    _freeze(X)
    if y is not None:
        _freeze(y)
    return EncodedRows(X=X, y=y, feature_names=schema.feature_names, n=len(good))


def _declared_keys(row: Mapping[Any, Any], spelled: Mapping[str, str]) -> tuple[Mapping[Any, Any], str | None]:
    """``row`` with each string key that names a declared column in NFC spelled as declared (``spelled``: NFC name →
    declared name), and the first name two keys share once normalised (or None). A row whose keys are all spelled as
    declared already (or are not declared at all) is returned as is."""
    if all(not isinstance(k, str) or spelled.get(nfc(k), k) == k for k in row):
        return row, None
    out: dict[Any, Any] = {}
    for k, v in row.items():
        name = spelled.get(nfc(k), k) if isinstance(k, str) else k
        if name in out:
            return row, str(name)
        out[name] = v
    return out, None


def compute_content_hash(X: np.ndarray, y: np.ndarray, schema: DatasetSchema, units: np.ndarray | None = None) -> str:
    """Hex sha256 of a canonical serialisation of an encoded dataset.

    Serialisation: ``CONTENT_HASH_VERSION``, NUL, the schema's canonical JSON (sorted keys, compact), NUL,
    n and d as little-endian uint64, then X (row-major) and y as little-endian float64 bytes, then for a user-level
    dataset ``b"units"``, NUL and the unit index as little-endian int64 (a row-level dataset hashes as before units
    existed). Equal schema and
    equal encoded values give equal hashes on every platform. Both are free of the cells' Unicode form: the schema
    stores its names and levels in NFC and cells are matched in NFC (module docstring), so a table written in NFC
    and the same table in NFD hash alike (and the duplicate check sees one content).
    """
    X = np.ascontiguousarray(X, dtype="<f8")
    y = np.ascontiguousarray(y, dtype="<f8")
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError("X must be (n, d) and y must be (n,)")
    h = hashlib.sha256()
    h.update(CONTENT_HASH_VERSION + b"\0")
    h.update(schema.canonical_json().encode("utf-8") + b"\0")
    h.update(struct.pack("<QQ", X.shape[0], X.shape[1]))
    # In blocks of rows: ``+ 0.0`` maps −0.0 to 0.0 without a full-size copy of X (the bytes hashed are the
    # same as one ``(X + 0.0).tobytes()``), into one reused block (no fresh pages to fault in per block).
    step = max(1, _HASH_BLOCK_BYTES // max(1, X.shape[1] * 8))
    block = np.empty((min(step, X.shape[0]), X.shape[1]), dtype="<f8")
    for i in range(0, X.shape[0], step):
        rows = X[i : i + step]
        np.add(rows, 0.0, out=block[: rows.shape[0]])
        h.update(block[: rows.shape[0]].data)
    h.update((y + 0.0).data)
    if units is not None:
        h.update(b"units\0")
        h.update(np.ascontiguousarray(units, dtype="<i8").data)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------------
# CSV reading
# --------------------------------------------------------------------------------------------------


_READ_BLOCK = 1 << 20  # bytes read from the upload at a time
_CHUNK_CELLS = 1 << 20  # cells parsed into Python strings before a chunk of rows is encoded (~80 MB)
_HASH_BLOCK_BYTES = 1 << 22


def _line_bound(stream: IO[bytes]) -> int | None:
    """An upper bound on the number of records of a seekable file (its line terminators + 1), or None.

    ``csv`` line ends are ``\n``, ``\r\n`` and ``\r``, so counting both bytes over-counts but never under-counts.
    One fast pass over the file (bytes.count); the stream is put back where it was.
    """
    try:
        if not stream.seekable():
            return None
        origin = stream.tell()
    except (AttributeError, OSError, ValueError):
        return None
    count = 1
    while block := stream.read(_READ_BLOCK):
        count += block.count(b"\n") + block.count(b"\r")
    stream.seek(origin)
    return count


class _TextLines:
    """The file as text lines (split like ``io.StringIO(text, newline="")``), decoded block by block.

    Strict UTF-8; a leading BOM is dropped. At the first invalid UTF-8 byte or NUL byte, iteration ends with the
    lines before that line, and :attr:`error` holds the problem (its line counts ``\n`` bytes from 1), so that
    the caller can first report a problem in the lines before it. Blocks are cut after a ``\n`` (a character
    boundary), so the first bad byte is the same as when decoding the whole file at once.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.error: DatasetValidationError | None = None

    def __iter__(self) -> Iterator[str]:
        for block in self._blocks():
            yield from io.StringIO(block, newline="")

    def _blocks(self) -> Iterator[str]:
        buffer = bytearray()
        lines_before = 0
        first = True
        eof = False
        while not eof:
            chunk = self._stream.read(_READ_BLOCK)
            buffer += chunk
            if first:
                if len(buffer) < len(codecs.BOM_UTF8) and chunk:
                    continue  # too short to tell whether it starts with a BOM
                if buffer.startswith(codecs.BOM_UTF8):
                    del buffer[: len(codecs.BOM_UTF8)]
                first = False
            if chunk:
                cut = buffer.rfind(b"\n") + 1
                if cut == 0:
                    continue
                block = bytes(buffer[:cut])
                del buffer[:cut]
            else:
                eof = True
                block = bytes(buffer)
                buffer.clear()
            bad_at, problem = -1, ""
            try:
                text = block.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad_at, problem = exc.start, "invalid UTF-8 (the file must be UTF-8 encoded)"
            nul = block.find(b"\0")
            if nul >= 0 and (bad_at < 0 or nul < bad_at):
                bad_at, problem = nul, "NUL byte (not a text file?)"
            if bad_at >= 0:
                bad_line = lines_before + block.count(b"\n", 0, bad_at) + 1
                self.error = DatasetValidationError(None, bad_line, f"{problem} at line {bad_line}")
                # the lines before the bad one decode; check them first
                yield block[: block.rfind(b"\n", 0, bad_at) + 1].decode("utf-8")
                return
            lines_before += block.count(b"\n")
            yield text


class _LineSource:
    """Feeds lines to ``csv.reader``; blanks a comment line (keeping the line count) at a record start."""

    def __init__(self, lines: Iterator[str], comment: str | None) -> None:
        self._it = lines
        self._comment = comment
        self.at_record_start = True

    def __iter__(self) -> _LineSource:
        return self

    def __next__(self) -> str:
        line = next(self._it)
        if self.at_record_start and self._comment is not None and line.startswith(self._comment):
            line = "\n"
        self.at_record_start = False
        return line


class UnitIds:
    """The privacy unit of each row of an upload (:class:`~privfit.datasets.schema.PrivacyUnit`), as an index
    0, 1, … in order of first appearance, consistent across the chunks and batches of one file.

    A unit is the cell's text stripped and in NFC (an integer of a Parquet file by its decimal text), so " u1" and
    "u1" are one unit; an empty cell, a ``csv.na_values`` marker or a null is refused: every row must name its unit.
    The texts are kept only while the file is encoded (the matrix stores the index, never the text)."""

    def __init__(self, column: str, na: frozenset[str]) -> None:
        self.column = column
        self._na = na
        self._index: dict[str, int] = {}

    def codes(self, values: Sequence[Any]) -> np.ndarray:
        """The unit index of each value; −1 for a missing one (the caller reports it)."""
        out = np.empty(len(values), dtype=np.int64)
        index = self._index
        for i, value in enumerate(values):
            if value is None or isinstance(value, float | bool):
                out[i] = -1
                continue
            text = nfc(str(value).strip())
            if not text or text in self._na:
                out[i] = -1
                continue
            code = index.get(text)
            if code is None:
                code = index[text] = len(index)
            out[i] = code
        return out

    def missing_error(self, where: str, line: int | None) -> DatasetValidationError:
        return DatasetValidationError(
            self.column,
            line,
            f"privacy unit column {self.column!r} is missing at {where}: every row must name its unit (user-level "
            "privacy protects a unit with all its rows, so a row without one cannot be counted)",
        )


class _Matrix:
    """The growing (X, y) of an upload, filled chunk by chunk in place, with each row's privacy unit when the schema
    names one (``units``).

    Nothing is allocated before the first chunk of rows has passed the size check. With a known upper bound on
    the rows (``capacity``) the arrays are then allocated once with ``np.zeros``, whose pages the OS maps
    lazily: rows never written (blank lines, comments, the header) cost address space, not memory. Without one
    they grow geometrically (never past ``capacity`` when it is known).
    """

    def __init__(self, d: int, capacity: int | None, units: UnitIds | None = None) -> None:
        self.n = 0
        self._d = d
        self._capacity = capacity
        self._X = np.zeros((0, d), dtype=np.float64)
        self._y = np.zeros(0, dtype=np.float64)
        self.unit_ids = units
        self._units = np.zeros(0, dtype=np.int64)

    def reserve(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Views of the next ``m`` rows (zeros), allocating or growing the arrays if needed."""
        need = self.n + m
        if need > self._y.shape[0]:
            size = max(need, 2 * self._y.shape[0], 1024)
            if self._capacity is not None:
                size = max(need, min(size if self._y.shape[0] else self._capacity, self._capacity))
            X = np.zeros((size, self._d), dtype=np.float64)
            y = np.zeros(size, dtype=np.float64)
            X[: self.n] = self._X[: self.n]
            y[: self.n] = self._y[: self.n]
            self._X, self._y = X, y
            if self.unit_ids is not None:
                units = np.zeros(size, dtype=np.int64)
                units[: self.n] = self._units[: self.n]
                self._units = units
        return self._X[self.n : need], self._y[self.n : need]

    def set_units(self, codes: np.ndarray, where: Callable[[int], tuple[str, int | None]]) -> None:
        """Record the unit indexes (:meth:`UnitIds.codes`) of the ``len(codes)`` rows just reserved (before ``n``
        advances); a row without a unit raises its error, ``where`` giving row i's position (text, number)."""
        assert self.unit_ids is not None
        missing = np.flatnonzero(codes < 0)
        if missing.size:
            raise self.unit_ids.missing_error(*where(int(missing[0])))
        self._units[self.n : self.n + len(codes)] = codes

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        return self._X[: self.n], self._y[: self.n]

    def units(self) -> np.ndarray | None:
        """The rows' unit indexes so far (None without a privacy unit)."""
        return None if self.unit_ids is None else self._units[: self.n]


def unit_ids_of(schema: DatasetSchema) -> UnitIds | None:
    """A fresh :class:`UnitIds` for an upload against ``schema`` (None when it names no privacy unit)."""
    unit = schema.privacy_unit
    return None if unit is None else UnitIds(unit.column, frozenset(schema.csv.na_values))


def _field_count_error(line: int, found: int, expected: int) -> DatasetValidationError:
    return DatasetValidationError(None, line, f"line {line} has {found} fields, expected {expected}")


def header_names(record: Sequence[str]) -> list[str]:
    """A CSV header record's column names as they are matched with the schema: stripped, in NFC."""
    return [nfc(cell.strip()) for cell in record]


def _check_header(header: list[str], line: int, schema: DatasetSchema) -> dict[str, int]:
    """Name → position of the header's columns: exactly the declared ones (any order), no duplicate. The names are
    compared as given: a CSV header is first put in NFC (:func:`header_names`); a name that is not in NFC but whose
    NFC form is declared is refused saying so (a Parquet file's column names are matched as they are written)."""
    declared = schema.column_names
    known = set(declared)
    for name in header:
        normal = nfc(name)
        if normal != name and normal in known:
            raise DatasetValidationError(
                normal,
                line,
                f"header (line {line}) writes column {normal!r} in a Unicode form other than NFC (decomposed "
                "accents?); write the name in NFC, as the schema declares it",
            )
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise DatasetValidationError(name, line, f"duplicate column {name!r} in the header (line {line})")
        seen.add(name)
    missing = [c for c in declared if c not in seen]
    if missing:
        raise DatasetValidationError(missing[0], line, f"header (line {line}) lacks declared columns {missing}")
    extra = [c for c in header if c not in known]
    if extra:
        raise DatasetValidationError(
            extra[0],
            line,
            f"header (line {line}) has undeclared columns {extra}; declare unused columns as type 'ignore'",
        )
    return {name: i for i, name in enumerate(header)}


# --------------------------------------------------------------------------------------------------
# cell encoding (shared by CSV and row input)
# --------------------------------------------------------------------------------------------------

_OK, _MISSING, _NOT_NUMBER, _NON_FINITE, _BAD_TYPE = range(5)


def _parse_number(value: Any, na: frozenset[str]) -> tuple[int, float]:
    """Classify one numeric cell: (_OK, value) or (status, nan)."""
    if isinstance(value, str):
        s = value.strip()
        if s in na or (not s.isascii() and nfc(s) in na):  # NA markers are NFC (a number is ASCII)
            return _MISSING, math.nan
        if _NUMBER.fullmatch(s):
            return _OK, float(s)  # a decimal too large for float64 becomes ±inf and is then clipped
        if s.lower().lstrip("+-") in _NON_FINITE_WORDS:
            return _NON_FINITE, math.nan
        return _NOT_NUMBER, math.nan
    if value is None:
        return _MISSING, math.nan
    if isinstance(value, bool):
        return _BAD_TYPE, math.nan
    if isinstance(value, int):
        try:
            return _OK, float(value)
        except OverflowError:
            return _OK, math.copysign(math.inf, value)
    if isinstance(value, float):
        return (_OK, value) if math.isfinite(value) else (_NON_FINITE, math.nan)
    return _BAD_TYPE, math.nan


def _parse_token(value: Any, na: frozenset[str]) -> str | int:
    """Strip a categorical/label cell and put it in NFC (as the schema's levels, classes and NA markers are);
    returns the text, or _MISSING / _BAD_TYPE. Every path's level matching goes through here."""
    if isinstance(value, str):
        s = nfc(value.strip())
        return _MISSING if s in na else s
    if value is None:
        return _MISSING
    return _BAD_TYPE


def _levels_text(levels: Sequence[str]) -> str:
    return ", ".join(repr(lv) for lv in levels)


def _na_text(na: Sequence[str]) -> str:
    return ", ".join(repr(v) for v in na) if na else "none"


_Err = tuple[int, str]  # (row index, message)


def _map_cells(cells: Sequence[Any], fn: Callable[[Any], Any]) -> list[Any]:
    """``[fn(v) for v in cells]``, memoised on string cells (a column repeats few distinct texts)."""
    memo: dict[str, Any] = {}
    out: list[Any] = []
    append = out.append
    for v in cells:
        if type(v) is str:
            if v in memo:
                r = memo[v]
            else:
                r = memo[v] = fn(v)
        else:
            r = fn(v)
        append(r)
    return out


def _missing_message(name: str, at: str, na_list: Sequence[str]) -> str:
    return (
        f"missing value in column {name!r} at {at} (missing-value policy is 'reject'; "
        f"declared NA markers: {_na_text(na_list)})"
    )


def _numeric_column(
    cells: Sequence[Any],
    name: str,
    fill: float | None,
    is_label: bool,
    where: Callable[[int], str],
    na: frozenset[str],
    na_list: Sequence[str],
) -> tuple[np.ndarray, _Err | None]:
    parsed = _map_cells(cells, lambda v: _parse_number(v, na))
    status = np.fromiter((st for st, _ in parsed), dtype=np.int64, count=len(parsed))
    values = np.fromiter((v for _, v in parsed), dtype=np.float64, count=len(parsed))
    if fill is not None:
        values[status == _MISSING] = fill
        status[status == _MISSING] = _OK
    bad = np.flatnonzero(status != _OK)
    if bad.size == 0:
        return values, None
    i = int(bad[0])
    what = "label column" if is_label else "numeric column"
    code = status[i]
    if code == _MISSING:
        if is_label:
            msg = f"missing label in column {name!r} at {where(i)}: labels cannot be imputed"
        else:
            msg = _missing_message(name, where(i), na_list)
    elif code == _NON_FINITE:
        msg = f"non-finite number (NaN or infinity) in {what} {name!r} at {where(i)}"
    elif code == _NOT_NUMBER:
        msg = f"non-numeric value in {what} {name!r} at {where(i)} (expected a decimal number)"
    else:
        msg = f"wrong value type in {what} {name!r} at {where(i)} (expected a number or a string)"
    return values, (i, msg)


_UNKNOWN_CODE, _MISSING_CODE, _BAD_TYPE_CODE = -1, -2, -3


def _level_codes(cells: Sequence[Any], levels: Sequence[str], na: frozenset[str]) -> np.ndarray:
    """The index of each cell's level among ``levels``, or _UNKNOWN_CODE, _MISSING_CODE, _BAD_TYPE_CODE (< 0).
    Cells and levels are compared in NFC (levels are NFC already, except in a schema stored before that rule)."""
    lookup: dict[str, int] = {}
    for k, lv in enumerate(levels):
        lookup.setdefault(nfc(lv), k)

    def code_of(v: Any) -> int:
        tok = _parse_token(v, na)
        if isinstance(tok, str):
            return lookup.get(tok, _UNKNOWN_CODE)
        return _MISSING_CODE if tok == _MISSING else _BAD_TYPE_CODE

    return np.array(_map_cells(cells, code_of), dtype=np.int64)


def _categorical_column(
    cells: Sequence[Any],
    f: CategoricalFeature,
    impute: bool,
    where: Callable[[int], str],
    na: frozenset[str],
    na_list: Sequence[str],
    ignore_unknown: bool = False,
) -> tuple[np.ndarray, _Err | None]:
    """Level index per row (≥ 0), or _MISSING_CODE for an imputed missing cell, or _UNKNOWN_CODE for a level not
    declared when ``ignore_unknown`` (an all-zero one-hot block: prediction rows only, :func:`encode_rows`)."""
    codes = _level_codes(cells, f.levels, na)
    allowed = ((codes == _MISSING_CODE) & impute) | ((codes == _UNKNOWN_CODE) & ignore_unknown)
    bad = np.flatnonzero((codes < 0) & ~allowed)
    if bad.size == 0:
        return codes, None
    i = int(bad[0])
    if codes[i] == _UNKNOWN_CODE:
        msg = f"unknown category in column {f.name!r} at {where(i)} (declared levels: {_levels_text(f.levels)})"
    elif codes[i] == _MISSING_CODE:
        msg = _missing_message(f.name, where(i), na_list)
    else:
        msg = f"wrong value type in column {f.name!r} at {where(i)} (expected a string)"
    return codes, (i, msg)


def _binary_label_column(
    cells: Sequence[Any], lab: BinaryLabel, where: Callable[[int], str], na: frozenset[str]
) -> tuple[np.ndarray, _Err | None]:
    """+1 for the positive class, −1 for the negative class (codes 0, 2, 3: unknown, missing, bad type); compared
    in NFC like :func:`_level_codes`."""
    positive, negative = nfc(lab.positive), nfc(lab.negative)

    def code_of(v: Any) -> int:
        tok = _parse_token(v, na)
        if tok == positive:
            return 1
        if tok == negative:
            return -1
        if tok == _MISSING:
            return 2
        return 3 if tok == _BAD_TYPE else 0

    codes = np.array(_map_cells(cells, code_of), dtype=np.int64)
    y = codes.astype(np.float64)
    bad = np.flatnonzero(np.abs(codes) != 1)
    if bad.size == 0:
        return y, None
    i = int(bad[0])
    if codes[i] == 2:
        msg = f"missing label in column {lab.name!r} at {where(i)}: labels cannot be imputed"
    elif codes[i] == 3:
        msg = f"wrong value type in label column {lab.name!r} at {where(i)} (expected a string)"
    else:
        msg = (
            f"label in column {lab.name!r} at {where(i)} is not one of the declared classes "
            f"(positive {lab.positive!r}, negative {lab.negative!r})"
        )
    return y, (i, msg)


def _categorical_label_column(
    cells: Sequence[Any], lab: CategoricalLabel, where: Callable[[int], str], na: frozenset[str]
) -> tuple[np.ndarray, _Err | None]:
    """The class index 0..k−1 of each row's level (as float); an unknown level, a missing label or a non-string
    cell is an error naming the column and the row (never the cell's value)."""
    codes = _level_codes(cells, lab.levels, na)
    bad = np.flatnonzero(codes < 0)
    if bad.size == 0:
        return codes.astype(np.float64), None
    i = int(bad[0])
    if codes[i] == _MISSING_CODE:
        msg = f"missing label in column {lab.name!r} at {where(i)}: labels cannot be imputed"
    elif codes[i] == _BAD_TYPE_CODE:
        msg = f"wrong value type in label column {lab.name!r} at {where(i)} (expected a string)"
    else:
        msg = (f"label in column {lab.name!r} at {where(i)} is not one of the declared classes "
               f"(declared levels: {_levels_text(lab.levels)})")  # fmt: skip
    return codes.astype(np.float64), (i, msg)


def _encode(
    schema: DatasetSchema,
    cells: Callable[[str], Sequence[Any]],
    n: int,
    positions: Sequence[int],
    unit: str,
    column_order: Mapping[str, int],
    label_present: bool,
    out: tuple[np.ndarray, np.ndarray] | None = None,
    ignore_unknown: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Encode all columns; raise the error with the smallest (row, column position) if any cell is invalid.

    ``out``: a zero-filled (n, d) block and an (n,) block to write X and y into (a chunk of a larger matrix);
    otherwise new arrays are allocated. ``ignore_unknown``: an undeclared categorical level encodes as an all-zero
    one-hot block instead of an error (prediction rows only: an upload never passes it).
    """
    na_list = schema.csv.na_values
    na = frozenset(na_list)
    impute = schema.missing == "impute"

    def where(i: int) -> str:
        return f"{unit} {positions[i]}"

    errors: list[tuple[int, int, str, str]] = []  # (row index, column position, column, message)
    X = np.zeros((n, schema.dimension), dtype=np.float64) if out is None else out[0]
    j = 0
    for f in schema.features:
        if isinstance(f, NumericFeature):
            values, err = _numeric_column(cells(f.name), f.name, f.fill if impute else None, False, where, na, na_list)
            if err is None:
                X[:, j] = f.scale(values)
            j += 1
        elif isinstance(f, CategoricalFeature):
            codes, err = _categorical_column(cells(f.name), f, impute, where, na, na_list, ignore_unknown)
            if err is None:
                present = np.flatnonzero(codes >= 0)
                X[present, j + codes[present]] = 1.0
            j += len(f.levels)
        else:
            continue  # ignored column: never inspected
        if err is not None:
            errors.append((err[0], column_order[f.name], f.name, err[1]))

    y: np.ndarray | None = None
    if label_present:
        lab = schema.label
        if isinstance(lab, BinaryLabel):
            y, err = _binary_label_column(cells(lab.name), lab, where, na)
        elif isinstance(lab, CategoricalLabel):
            y, err = _categorical_label_column(cells(lab.name), lab, where, na)
        else:
            assert isinstance(lab, NumericLabel)
            raw, err = _numeric_column(cells(lab.name), lab.name, None, True, where, na, na_list)
            y = lab.scale(raw) if err is None else raw
        if err is not None:
            errors.append((err[0], column_order[lab.name], lab.name, err[1]))

    if errors:
        row, _, column, message = min(errors)
        raise DatasetValidationError(column, positions[row], message)
    if out is not None and y is not None:
        out[1][:] = y
        y = out[1]
    return X, y


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def _as_schema(schema: DatasetSchema | Mapping[str, Any]) -> DatasetSchema:
    if isinstance(schema, DatasetSchema):
        return schema
    return DatasetSchema.model_validate(schema)


def _freeze(a: np.ndarray) -> None:
    a.flags.writeable = False


def _finish(schema: DatasetSchema, X: np.ndarray, y: np.ndarray, units: np.ndarray | None = None) -> EncodedDataset:
    np.add(X, 0.0, out=X)  # canonical zeros (no −0.0), in place: no second full-size matrix
    np.add(y, 0.0, out=y)
    _freeze(X)
    _freeze(y)
    if units is not None:
        _freeze(units)
    return EncodedDataset(
        X=X,
        y=y,
        feature_names=schema.feature_names,
        n=int(X.shape[0]),
        row_norm_bound=schema.row_norm_bound,
        label_bound=schema.label_bound,
        content_hash=compute_content_hash(X, y, schema, units),
        schema=schema,
        units=units,
    )

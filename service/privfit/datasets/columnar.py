"""Column-wise upload encoding on Apache Arrow: the fast path for CSV files, and Parquet uploads (issue 23).

CSV (:func:`encode_csv`). :func:`privfit.datasets.encoding.parse_and_encode` defines what a CSV upload means
(Python's ``csv`` module, strict, cell by cell). This module computes the same result at disk speed: Arrow's
multi-threaded streaming reader (``pyarrow.csv.open_csv``) tokenises the file and converts numeric columns to
float64 and categorical ones to dictionary arrays in C++, and each record batch is validated and encoded with
vectorised numpy (categorical and label cells are decided once per distinct text, with the exact path's own
functions). The result must be bit-for-bit that of the exact path, so the fast path only *accepts*:

* files the exact path tokenises identically: no ``"`` byte (no quoting), no NUL byte, valid UTF-8, no line
  longer than ``csv.field_size_limit()`` bytes, no line starting with the declared comment prefix, an ASCII
  delimiter — checked in one pass over the bytes (:func:`_prescan`) before Arrow reads the file;
* cells every one of which is valid under the schema: Arrow's float parser accepts a superset of the exact
  path's decimal numbers except for the non-finite words, and any non-finite result, unconvertible cell, null
  under ``missing = "reject"``, unknown level or class, wrong field count or header problem makes it give up;
* schemas whose NA markers are not numbers to Arrow (:func:`_numeric_na_marker`).

When it gives up (``None``), the caller runs the exact path from the start of the file, which then reports the
first problem in file order with its line, exactly as before; valid files never take that path. Memory is the
encoded matrix plus a few blocks of ``_CSV_BLOCK`` bytes (the arrays are written in place, batch by batch).

Parquet (:func:`encode_parquet`): the same schema checks on a typed table. Numeric columns must be integer or
floating, categorical columns and categorical/binary labels strings (a column of another type is a 422 naming
it, before any row is read); string cells are stripped and ``csv.na_values`` mean missing, as in a CSV, and a
null is missing. The file is read in batches of rows (``iter_batches``: one row group's column chunks at a time),
so memory is the matrix plus a row group; errors name the column and the 1-based data row (``row 12``). The same
table uploaded as CSV or Parquet encodes to the same matrix and content hash.
"""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from .encoding import (
    _MISSING_CODE,
    DatasetValidationError,
    EncodedDataset,
    _as_schema,
    _binary_label_column,
    _check_header,
    _encode,
    _finish,
    _level_codes,
    _Matrix,
    too_large_error,
)
from .schema import (
    BinaryLabel,
    CategoricalFeature,
    CategoricalLabel,
    DatasetSchema,
    NumericFeature,
    NumericLabel,
)

__all__ = ["PARQUET_CONTENT_TYPES", "encode_csv", "encode_parquet", "is_parquet_upload"]

#: ``Content-Type`` values of a Parquet upload (either one; or a file name ending in ``.parquet``).
PARQUET_CONTENT_TYPES = frozenset({"application/vnd.apache.parquet", "application/x-parquet"})

_CSV_BLOCK = 1 << 20  # bytes Arrow parses per record batch
_SCAN_BLOCK = 1 << 20  # bytes the pre-scan reads at a time
_PARQUET_BATCH_ROWS = 1 << 16
_WINDOW = 1 << 15  # the pre-scan's coarse line-length check: every window of this many bytes holds a line end
_STRING_TYPES = (pa.types.is_string, pa.types.is_large_string)


def is_parquet_upload(content_type: str | None, filename: str | None) -> bool:
    """Whether an uploaded file part is Parquet: its ``Content-Type`` (parameters ignored) is one of
    :data:`PARQUET_CONTENT_TYPES`, or its file name ends in ``.parquet`` (any case)."""
    kind = (content_type or "").split(";")[0].strip().lower()
    return kind in PARQUET_CONTENT_TYPES or (filename or "").lower().endswith(".parquet")


# --------------------------------------------------------------------------------------------------
# shared: one batch of typed columns → rows of X and y
# --------------------------------------------------------------------------------------------------


def _dictionary_of(column: pa.Array) -> tuple[list[Any], np.ndarray]:
    """(distinct values as Python objects, per-row index into them); nulls index a trailing ``None``."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    values = column.dictionary.to_pylist()
    indices = column.indices
    if indices.null_count:
        indices = pc.fill_null(indices, len(values))
        values.append(None)
    return values, indices.to_numpy(zero_copy_only=False)


def _numeric_values(column: pa.Array, fill: float | None) -> np.ndarray | None:
    """float64 values of an integer or floating column with nulls replaced by ``fill``; None if a null remains
    (no ``fill``) or a value is not finite. (Integers convert to the nearest float64, as Python's ``float``.)"""
    if not pa.types.is_float64(column.type):
        column = pc.cast(column, pa.float64(), safe=False)
    if column.null_count:
        if fill is None:
            return None
        column = pc.fill_null(column, fill)
    values = column.to_numpy(zero_copy_only=True)
    return values if np.isfinite(values).all() else None


def _encode_batch(
    schema: DatasetSchema, column: Callable[[str], pa.Array], X: np.ndarray | None, y: np.ndarray | None
) -> bool:
    """Encode one batch into the zero-filled blocks ``X`` (m, d) and ``y`` (m,), or only validate it when they are
    None; False (blocks partly written) if any cell is invalid — the caller then finds the first error with the
    exact, cell-by-cell rules."""
    na = frozenset(schema.csv.na_values)
    impute = schema.missing == "impute"
    j = 0
    for f in schema.features:
        if isinstance(f, NumericFeature):
            values = _numeric_values(column(f.name), f.fill if impute else None)
            if values is None:
                return False
            if X is not None:
                X[:, j] = f.scale(values)
            j += 1
        elif isinstance(f, CategoricalFeature):
            texts, index = _dictionary_of(column(f.name))
            codes = _level_codes(texts, f.levels, na)[index]
            if ((codes < 0) & ~((codes == _MISSING_CODE) & impute)).any():
                return False
            if X is not None:
                present = np.flatnonzero(codes >= 0)
                X[present, j + codes[present]] = 1.0
            j += len(f.levels)
    lab = schema.label
    if isinstance(lab, NumericLabel):
        values = _numeric_values(column(lab.name), None)
        if values is None:
            return False
        encoded = lab.scale(values)
    else:
        texts, index = _dictionary_of(column(lab.name))
        if isinstance(lab, BinaryLabel):
            per_text, _ = _binary_label_column(texts, lab, lambda i: "", na)
            encoded = per_text[index]
            if (np.abs(encoded) != 1.0).any():
                return False
        else:
            assert isinstance(lab, CategoricalLabel)
            codes = _level_codes(texts, lab.levels, na)[index]
            if (codes < 0).any():
                return False
            encoded = codes.astype(np.float64)
    if y is not None:
        y[:] = encoded
    return True


def _read_types(schema: DatasetSchema) -> dict[str, pa.DataType]:
    """Arrow types of the used columns: float64 for numerics, dictionary-encoded strings otherwise."""
    text = pa.dictionary(pa.int32(), pa.string())
    types: dict[str, pa.DataType] = {}
    for f in schema.features:
        if f.type != "ignore":
            types[f.name] = pa.float64() if isinstance(f, NumericFeature) else text
    types[schema.label.name] = pa.float64() if isinstance(schema.label, NumericLabel) else text
    return types


def _check_rows(n0: int, m: int, max_rows: int | None, d: int, max_matrix_bytes: int | None) -> None:
    if max_rows is not None and n0 + m > max_rows:
        assert max_matrix_bytes is not None
        raise too_large_error(max_rows, d, max_matrix_bytes)


# --------------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------------


class _Prescan:
    """One pass over the bytes: whether the Arrow path tokenises the file exactly like the exact path; the header
    record (parsed by Python's ``csv``, so it may be quoted) and the offset where the data lines start; an upper
    bound on the records (line terminators + 1)."""

    def __init__(self, schema: DatasetSchema) -> None:
        self.delimiter = schema.csv.delimiter
        comment = schema.csv.comment
        self.comment = None if comment is None else comment.encode("utf-8")
        self.find_header = schema.csv.header
        self.lines = 1
        self.header: list[str] | None = None
        self.data_start = 0  # the offset (from the stream's start) of the first byte after the header line
        self._position = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._run = 0  # bytes since the last line end
        self._limit = csv.field_size_limit()
        self._tail = b"\n"  # the bytes before the current block that a comment prefix check needs
        self._head = bytearray()  # the bytes up to the end of the header line, until it is complete

    def run(self, stream: IO[bytes]) -> bool:
        if len(self.delimiter.encode("utf-8")) != 1:
            return False
        while block := stream.read(_SCAN_BLOCK):
            if self._position == 0 and block.startswith(codecs.BOM_UTF8):
                self._position = self.data_start = len(codecs.BOM_UTF8)
                block = block[len(codecs.BOM_UTF8) :]
            if not self._block(block):
                return False
            self._position += len(block)
        try:
            self._decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return False
        if self.find_header and self.header is None:  # a header line without a line end: the whole file
            self.data_start = self._position
            return self._take_header(bytes(self._head).lstrip(b"\r\n"))
        return True

    def _block(self, block: bytes) -> bool:
        if b"\0" in block:
            return False
        if not block.isascii() or self._decoder.getstate()[0]:
            try:
                self._decoder.decode(block)
            except UnicodeDecodeError:
                return False
        if self.comment is not None:
            joined = self._tail + block
            if b"\n" + self.comment in joined or b"\r" + self.comment in joined:
                return False
            self._tail = joined[-len(self.comment) :]
        data = 0  # where the data lines start in this block
        if self.find_header and self.header is None:
            self._head += block
            line = _first_nonempty_line(self._head)
            if line is None:
                data = len(block)
            else:
                start, end = line
                data = end + 1 - (len(self._head) - len(block))
                self.data_start = self._position + data
                if not self._take_header(bytes(self._head[start:end])):
                    return False
        if b'"' in block[data:]:
            return False  # quoting: Python's csv and Arrow's tokenizers differ on malformed quotes
        newlines = _count(block, 10) + (_count(block, 13) if b"\r" in block else 0)
        self.lines += newlines
        return self._lines_short(block, newlines)

    def _take_header(self, line: bytes) -> bool:
        self._head.clear()
        try:
            records = list(csv.reader([line.decode("utf-8")], delimiter=self.delimiter, strict=True))
        except (csv.Error, UnicodeDecodeError):
            return False
        if len(records) != 1:
            return False
        self.header = [cell.strip() for cell in records[0]]
        return True

    def _lines_short(self, block: bytes, newlines: int) -> bool:
        """Whether no run of bytes without a line end is longer than the field size limit (so no field is)."""
        if newlines == 0:
            self._run += len(block)
            return self._run <= self._limit
        first = min(i for i in (block.find(b"\n"), block.find(b"\r")) if i >= 0)
        if self._run + first > self._limit:
            return False
        last = max(block.rfind(b"\n"), block.rfind(b"\r"))
        self._run = len(block) - 1 - last
        inner = block[first : last + 1]  # from the first line end to the last, both included
        window = max(1, min(_WINDOW, self._limit // 2))  # a run longer than the limit holds a whole window
        if len(inner) > self._limit and not all(
            b"\n" in inner[i : i + window] or b"\r" in inner[i : i + window] for i in range(0, len(inner), window)
        ):  # a window without a line end: measure exactly
            ends = np.flatnonzero(np.isin(np.frombuffer(inner, dtype=np.uint8), (10, 13)))
            return bool(np.diff(ends).max(initial=0) <= self._limit + 1)
        return True


def _count(block: bytes, byte: int) -> int:
    """``block.count(bytes([byte]))``, vectorised (several times faster on a block of a MiB)."""
    return int(np.count_nonzero(np.frombuffer(block, dtype=np.uint8) == byte))


def _first_nonempty_line(head: bytearray) -> tuple[int, int] | None:
    """(start, end) of the first line of ``head`` with any byte, once its line end has been read (else None)."""
    start = 0
    while start < len(head):
        ends = [i for i in (head.find(b"\n", start), head.find(b"\r", start)) if i >= 0]
        if not ends:
            return None
        end = min(ends)
        if end > start:
            return start, end
        start = end + 1
    return None


def _numeric_na_marker(schema: DatasetSchema) -> bool:
    """Whether a numeric column could hold an NA marker that Arrow parses as a number (e.g. ``-999``): Arrow trims
    spaces and tabs before parsing a number but matches its null values untrimmed, so a padded ``" -999"`` would be
    a number to it and missing to the exact path. Such schemas take the exact path."""
    numeric = isinstance(schema.label, NumericLabel) or any(isinstance(f, NumericFeature) for f in schema.features)
    markers = [value for value in schema.csv.na_values if value]
    if not numeric or not markers:
        return False
    for value in markers:
        as_number = pa_csv.ConvertOptions(column_types={"v": pa.float64()}, null_values=[])
        try:
            pa_csv.read_csv(io.BytesIO(f"v\n{value}\n".encode()), parse_options=pa_csv.ParseOptions(quote_char=False),
                            convert_options=as_number)  # fmt: skip
        except (pa.ArrowInvalid, UnicodeEncodeError):
            continue
        return True
    return False


def encode_csv(stream: IO[bytes], schema: DatasetSchema, max_matrix_bytes: int | None = None) -> EncodedDataset | None:
    """The exact path's result for a CSV (``stream`` seekable, at the file's start), or None: the file must take
    the exact path (module docstring). Raises :class:`DatasetTooLargeError` like the exact path would."""
    if _numeric_na_marker(schema):
        return None
    origin = stream.tell()
    scan = _Prescan(schema)
    if not scan.run(stream):
        return None
    opts = schema.csv
    if opts.header:
        if scan.header is None:
            return None
        names = scan.header
        try:
            _check_header(names, 1, schema)
        except DatasetValidationError:
            return None  # the exact path says what is wrong, on which line
    else:
        assert opts.columns is not None
        names = list(opts.columns)
    stream.seek(origin + scan.data_start)  # Arrow reads the data lines only, the columns named
    used = _read_types(schema)
    read = pa_csv.ReadOptions(block_size=_CSV_BLOCK, use_threads=True, column_names=names)
    convert = pa_csv.ConvertOptions(
        column_types=used,
        include_columns=list(used),
        null_values=list(opts.na_values),
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    parse = pa_csv.ParseOptions(delimiter=opts.delimiter, quote_char=False, ignore_empty_lines=True)
    d = schema.dimension
    max_rows = None if max_matrix_bytes is None else max_matrix_bytes // ((d + 1) * 8)
    capacity = scan.lines if max_rows is None else min(scan.lines, max_rows + 1)
    out = _Matrix(d, capacity)
    try:
        reader = pa_csv.open_csv(stream, read_options=read, parse_options=parse, convert_options=convert)
        for batch in _batches(reader):
            m = batch.num_rows
            columns = dict(zip(used, batch.columns, strict=True)).__getitem__
            if max_rows is not None and out.n + m > max_rows:
                # The exact path reports a cell error before this batch first: check these rows (writing nothing:
                # no memory for them is allocated), then refuse.
                if not _encode_batch(schema, columns, None, None):
                    return None
                _check_rows(out.n, m, max_rows, d, max_matrix_bytes)
            X, y = out.reserve(m)
            if not _encode_batch(schema, columns, X, y):
                return None
            out.n += m
    except (pa.ArrowException, UnicodeDecodeError):
        return None  # a malformed record, a wrong field count, an unconvertible cell: the exact path says which
    if out.n == 0:
        return None
    X, y = out.result()
    return _finish(schema, X, y)


def _batches(reader: pa_csv.CSVStreamingReader) -> Iterator[pa.RecordBatch]:
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return


# --------------------------------------------------------------------------------------------------
# Parquet
# --------------------------------------------------------------------------------------------------


def _parquet_type_error(name: str, expected: str, found: pa.DataType) -> DatasetValidationError:
    return DatasetValidationError(
        name, None, f"column {name!r} of the Parquet file has type {found}, expected {expected}"
    )


def _check_parquet_schema(arrow: pa.Schema, schema: DatasetSchema) -> dict[str, int]:
    """Column names as for a CSV header (all declared, none undeclared, no duplicate); types of the used
    columns (numeric: integer or floating; categorical and class labels: strings). Returns name → position."""
    index = _check_header(list(arrow.names), 1, schema) if len(set(arrow.names)) == len(arrow.names) else None
    if index is None:
        dup = next(name for name in arrow.names if arrow.names.count(name) > 1)
        raise DatasetValidationError(dup, None, f"duplicate column {dup!r} in the Parquet file")
    for name, kind in _read_types(schema).items():
        found = arrow.field(name).type
        value = found.value_type if pa.types.is_dictionary(found) else found
        if pa.types.is_float64(kind):
            if not (pa.types.is_integer(found) or pa.types.is_floating(found)):
                raise _parquet_type_error(name, "an integer or floating type (a numeric column)", found)
        elif not any(check(value) for check in _STRING_TYPES):
            raise _parquet_type_error(name, "a string type (categories and class labels are text)", found)
    return index


def _header_errors(error: DatasetValidationError) -> DatasetValidationError:
    """A header error of :func:`_check_header`, reworded for a Parquet file's column names (no line)."""
    message = error.message.replace("header (line 1)", "the Parquet file")
    return DatasetValidationError(error.column, None, message)


def encode_parquet(
    source: bytes | IO[bytes], schema: DatasetSchema | Mapping[str, Any], *, max_matrix_bytes: int | None = None
) -> EncodedDataset:
    """Encode a Parquet upload (its bytes or a seekable binary file) against ``schema`` (module docstring), batch
    by batch.

    Raises:
        DatasetValidationError: not a Parquet file; a missing, undeclared or duplicate column; a used column of
            the wrong type; the first invalid cell (missing under ``"reject"``, non-finite, unknown level or
            class), naming the column and the 1-based row; no rows.
        DatasetTooLargeError: n·(d + 1)·8 over ``max_matrix_bytes`` (from the file's metadata, before reading).
    """
    schema = _as_schema(schema)
    stream: IO[bytes] = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        parquet = pq.ParquetFile(stream, buffer_size=_CSV_BLOCK, pre_buffer=False)  # column chunks read in blocks
        arrow = parquet.schema_arrow
    except (pa.ArrowException, OSError, ValueError):  # Arrow's message may quote bytes of the file: not shown
        raise DatasetValidationError(None, None, "the file is not a readable Parquet file") from None
    try:
        order = _check_parquet_schema(arrow, schema)
    except DatasetValidationError as error:
        raise _header_errors(error) from None
    n, d = parquet.metadata.num_rows, schema.dimension
    if max_matrix_bytes is not None:
        _check_rows(0, n, max_matrix_bytes // ((d + 1) * 8), d, max_matrix_bytes)
    if n == 0:
        raise DatasetValidationError(None, None, "the file contains no data rows")
    used = list(_read_types(schema))
    out = _Matrix(d, n)
    try:
        for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=used, use_threads=True):
            m = batch.num_rows
            X, y = out.reserve(m)
            if not _encode_batch(schema, batch.column, X, y):
                _encode_exactly(schema, batch, out.n, order, X, y)
            out.n += m
    except pa.ArrowException:
        raise DatasetValidationError(None, None, "the Parquet file is corrupt (a row group cannot be read)") from None
    if out.n != n:
        raise DatasetValidationError(None, None, "the Parquet file is corrupt (its row count does not match)")
    X, y = out.result()
    return _finish(schema, X, y)


def _encode_exactly(
    schema: DatasetSchema, batch: pa.RecordBatch, offset: int, order: dict[str, int], X: np.ndarray, y: np.ndarray
) -> None:
    """Encode ``batch`` cell by cell with the rules of uploaded rows (:func:`_encode`, rows numbered from
    ``offset + 1``): it raises the first invalid cell's error, naming the column and the row."""
    columns = {name: batch.column(name).to_pylist() for name in _read_types(schema)}
    m = batch.num_rows
    X[:] = 0.0
    _encode(schema, cells=columns.__getitem__, n=m, positions=range(offset + 1, offset + m + 1), unit="row",
            column_order=order, label_present=True, out=(X, y))  # fmt: skip

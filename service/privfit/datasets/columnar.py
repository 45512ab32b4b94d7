"""Column-wise upload encoding on Apache Arrow: the fast path for CSV files, and Parquet uploads (issue 23).

CSV (:func:`encode_csv`). :func:`privfit.datasets.encoding.parse_and_encode` defines what a CSV upload means
(Python's ``csv`` module, strict, cell by cell). This module computes the same result at disk speed: Arrow's
multi-threaded streaming reader (``pyarrow.csv.open_csv``) tokenises the file and converts numeric columns to
float64 and categorical ones to dictionary arrays in C++, and each record batch is validated and encoded with
vectorised numpy (categorical and label cells are decided once per distinct text, with the exact path's own
functions). The result must be bit-for-bit that of the exact path, so the fast path only *accepts*:

* files the exact path tokenises identically: no ``"`` byte (no quoting), no NUL byte, valid UTF-8, no line
  longer than ``csv.field_size_limit()`` bytes, no line starting with the declared comment prefix, an ASCII
  delimiter — checked in one pass over the bytes (:class:`_Prescan`) before Arrow reads the file;
* cells every one of which is valid under the schema: Arrow's float parser accepts a superset of the exact
  path's decimal numbers except for the non-finite words, and any non-finite result, unconvertible cell, null
  under ``missing = "reject"``, unknown level or class, wrong field count or header problem makes it give up;
* schemas whose NA markers are not numbers to Arrow (:func:`_numeric_na_marker`).

When it gives up (``None``), the caller runs the exact path from the start of the file, which then reports the
first problem in file order with its line, exactly as before; valid files never take that path. Memory is the
encoded matrix plus a few blocks of ``_CSV_BLOCK`` bytes (the arrays are written in place, batch by batch).

An upload (:func:`encode_csv_upload`) also caps cells (issue 35): the same pre-scan, over the whole file, refuses
a cell longer than ``max_cell_bytes`` or a line longer than its fields can take, naming the line (and the
column), before either path parses a cell — the exact path holds a line at a time, a 64 MiB cell several times.

Parquet (:func:`encode_parquet`): the same schema checks on a typed table. Numeric columns must be integer or
floating, categorical columns and categorical/binary labels flat strings (a column of another type, or nested,
is a 422 naming it, before any row is read); string cells are stripped and ``csv.na_values`` mean missing, as in
a CSV, and a null is missing. Before any page is decoded, what the file declares is checked
(:mod:`privfit.datasets.parquet_limits`: footer, row counts against the caps and the caller's δ rule, page
headers, dictionary sizes). The file is then read in batches of rows (``iter_batches``), text columns
dictionary-encoded (a value every row repeats is held once) and their values' lengths checked on the dictionary
before any becomes a Python string; errors name the column and the 1-based data row (``row 12``), and any error
Arrow raises while decoding is a 422. The same table uploaded as CSV or Parquet encodes to the same matrix and
content hash.
"""

from __future__ import annotations

import codecs
import csv
import io
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from .encoding import (
    _CHUNK_CELLS,
    _MISSING_CODE,
    DatasetTooLargeError,
    DatasetValidationError,
    EncodedDataset,
    _as_schema,
    _binary_label_column,
    _check_header,
    _encode,
    _finish,
    _level_codes,
    _Matrix,
    parse_and_encode,
    too_large_error,
    unit_ids_of,
)
from .parquet_limits import ParquetLimits, check_row_groups, check_trailer, declared_rows
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
    "PARQUET_CONTENT_TYPES",
    "UPLOAD_THREADS",
    "encode_csv",
    "encode_csv_stream",
    "encode_csv_upload",
    "encode_parquet",
    "is_parquet_upload",
    "stream_csv",
    "stream_parquet",
]

#: ``Content-Type`` values of a Parquet upload (either one; or a file name ending in ``.parquet``).
PARQUET_CONTENT_TYPES = frozenset({"application/vnd.apache.parquet", "application/x-parquet"})

_CSV_BLOCK = 1 << 20  # bytes Arrow parses per record batch
_SCAN_BLOCK = 1 << 20  # bytes the pre-scan reads at a time
_PARQUET_BATCH_ROWS = 1 << 16
_WINDOW = 1 << 15  # the pre-scan's coarse line-length check: every window of this many bytes holds a line end
#: The longest line of a CSV upload with ``max_cell_bytes`` (however many columns): the exact path holds a line in
#: memory several times over, so this bounds it whatever the schema's width.
MAX_LINE_BYTES = 32 * 1024 * 1024
_STRING_TYPES = (pa.types.is_string, pa.types.is_large_string)


def is_parquet_upload(content_type: str | None, filename: str | None) -> bool:
    """Whether an uploaded file part is Parquet: its ``Content-Type`` (parameters ignored) is one of
    :data:`PARQUET_CONTENT_TYPES`, or its file name ends in ``.parquet`` (any case)."""
    kind = (content_type or "").split(";")[0].strip().lower()
    return kind in PARQUET_CONTENT_TYPES or (filename or "").lower().endswith(".parquet")


# --------------------------------------------------------------------------------------------------
# shared: one batch of typed columns → rows of X and y
# --------------------------------------------------------------------------------------------------


def _by_text(column: pa.Array, per_text: Callable[[list[Any]], np.ndarray]) -> np.ndarray:
    """``per_text`` (a function of a list of texts, ``None`` for a null, returning one value per text) for each
    row of a text column, computed once per distinct text: on the column's dictionary, then indexed by row.

    A Parquet dictionary page is shared by the batches of its row group and may hold more values than a batch has
    rows: then only the values this batch refers to become Python strings, so a batch never makes more of them than
    it has rows (the caller has checked their lengths, :func:`_check_cell_bytes`)."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    dictionary = column.dictionary
    index = pc.fill_null(column.indices, len(dictionary)).to_numpy(zero_copy_only=False)  # a null: past the end
    if len(dictionary) > len(column):
        used, index = np.unique(index, return_inverse=True)
        texts = dictionary.take(pa.array(used[used < len(dictionary)])).to_pylist()
    else:
        texts = dictionary.to_pylist()
    if column.null_count:
        texts.append(None)
    return per_text(texts)[index]


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
            codes = _by_text(column(f.name), lambda texts: _level_codes(texts, f.levels, na))  # noqa: B023
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
    elif isinstance(lab, BinaryLabel):
        encoded = _by_text(column(lab.name), lambda texts: _binary_label_column(texts, lab, lambda i: "", na)[0])
        if (np.abs(encoded) != 1.0).any():
            return False
    else:
        assert isinstance(lab, CategoricalLabel)
        codes = _by_text(column(lab.name), lambda texts: _level_codes(texts, lab.levels, na))
        if (codes < 0).any():
            return False
        encoded = codes.astype(np.float64)
    if y is not None:
        y[:] = encoded
    return True


def _read_types(schema: DatasetSchema) -> dict[str, pa.DataType]:
    """Arrow types of the used columns: float64 for numerics, dictionary-encoded strings otherwise (the privacy
    unit column included: a CSV's units are text)."""
    text = pa.dictionary(pa.int32(), pa.string())
    types: dict[str, pa.DataType] = {}
    for f in schema.features:
        if f.type != "ignore":
            types[f.name] = pa.float64() if isinstance(f, NumericFeature) else text
    types[schema.label.name] = pa.float64() if isinstance(schema.label, NumericLabel) else text
    if schema.privacy_unit is not None:
        types[schema.privacy_unit.column] = text
    return types


class _Blocks:
    """Where an upload stored by partitions puts its rows (:func:`stream_csv`, :func:`stream_parquet`): like
    :class:`~privfit.datasets.encoding._Matrix` (``reserve``, then ``n`` advanced by the caller), but each batch is
    encoded into fresh arrays and handed to ``emit(X, y)`` when the next is reserved or at :meth:`close`, never
    gathered. Row-level only (``unit_ids`` is None)."""

    unit_ids = None

    def __init__(self, d: int, emit: Callable[[np.ndarray, np.ndarray], None]) -> None:
        self.n = 0
        self._d = d
        self._emit = emit
        self._pending: tuple[np.ndarray, np.ndarray, int] | None = None

    def reserve(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Fresh zero arrays for the next ``m`` rows (the rows reserved before are handed on first)."""
        self.close()
        X, y = np.zeros((m, self._d), dtype=np.float64), np.zeros(m, dtype=np.float64)
        self._pending = (X, y, self.n)
        return X, y

    def close(self) -> None:
        """Hand on the rows reserved last, as far as ``n`` has advanced over them."""
        if self._pending is not None:
            X, y, start = self._pending
            self._pending = None
            rows = self.n - start
            if rows:
                self._emit(X[:rows], y[:rows])


def _unit_codes(out: _Matrix, column: pa.Array, offset: int) -> None:
    """Record the privacy units of a batch (rows numbered from ``offset + 1``) in ``out`` (:meth:`_Matrix.set_units`),
    each distinct value converted once (:func:`_by_text`); a row without a unit raises its error."""
    ids = out.unit_ids
    assert ids is not None
    codes = _by_text(column, ids.codes)
    out.set_units(codes, lambda i: (f"row {offset + i + 1}", offset + i + 1))


def _check_rows(n0: int, m: int, max_rows: int | None, d: int, max_matrix_bytes: int | None) -> None:
    if max_rows is not None and n0 + m > max_rows:
        assert max_matrix_bytes is not None
        raise too_large_error(max_rows, d, max_matrix_bytes)


# --------------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------------


class _Runs:
    """Runs of bytes without any of ``separators``, fed block by block (a run may cross blocks): where the first
    run longer than ``limit`` starts. Such a run holds a whole aligned window of (limit + 1) // 2 bytes without a
    separator, so a block is measured exactly (numpy) only when one of its windows has none."""

    def __init__(self, separators: bytes, limit: int) -> None:
        self.limit = limit
        self._separators = [separators[i : i + 1] for i in range(len(separators))]
        self._codes = np.frombuffer(separators, dtype=np.uint8)
        self._window = max(1, min(_WINDOW, (limit + 1) // 2))
        self._run = 0  # bytes since the last separator

    def feed(self, block: bytes, position: int) -> int | None:
        """The offset where the first run longer than the limit starts (``position``: the block's), or None."""
        firsts = [i for i in (block.find(sep) for sep in self._separators) if i >= 0]
        if not firsts:
            self._run += len(block)
            return position + len(block) - self._run if self._run > self.limit else None
        first = min(firsts)
        if self._run + first > self.limit:
            return position - self._run
        last = max(block.rfind(sep) for sep in self._separators)
        if last - first > self.limit and not all(
            any(block.find(sep, i, i + self._window) >= 0 for sep in self._separators)
            for i in range(first, last, self._window)
        ):  # a window without a separator: measure exactly
            inner = np.frombuffer(block, dtype=np.uint8, count=last - first + 1, offset=first)
            ends = first + np.flatnonzero(np.isin(inner, self._codes))
            long = np.flatnonzero(np.diff(ends) > self.limit + 1)
            if long.size:
                return position + int(ends[long[0]]) + 1
        self._run = len(block) - 1 - last
        return position + last + 1 if self._run > self.limit else None


class _Prescan:
    """One pass over the bytes, before either path parses the file.

    * The caps, with ``max_cell_bytes`` (every file, whichever path then encodes it): no cell — the bytes between
      two delimiters or line ends, quotes included — longer than ``max_cell_bytes``, and no line longer than the
      most its fields can take, columns × (max_cell_bytes + 1) bytes and at most :data:`MAX_LINE_BYTES` (a
      quoted cell may hold delimiters; the exact path holds a line in memory at a time, so this bounds it). The
      first violation found is kept in :attr:`violation` and the scan stops; :meth:`error` says where it is.
    * Whether the Arrow path tokenises the file exactly like the exact path (:attr:`fast`); the header record
      (parsed by Python's ``csv``, so it may be quoted) and the offset where the data lines start; an upper bound
      on the records (line terminators + 1).
    """

    def __init__(self, schema: DatasetSchema, max_cell_bytes: int | None = None, *, count_lines: bool = True) -> None:
        opts = schema.csv
        self.delimiter = opts.delimiter.encode("utf-8")
        comment = opts.comment
        self.comment = None if comment is None else comment.encode("utf-8")
        self.find_header = opts.header
        self.names = None if opts.columns is None else list(opts.columns)
        self.columns = len(schema.features) + 1 if opts.columns is None else len(opts.columns)
        self.fast = len(self.delimiter) == 1
        self._count_lines = count_lines  # the bound on the records (lines), which a streamed file does not need
        self.lines = 1
        self.header: list[str] | None = None
        self.data_start = 0  # the offset (from the stream's start) of the first byte after the header line
        self.max_cell_bytes = max_cell_bytes
        self.violation: tuple[str, int] | None = None  # ("cell" or "line", the offset where it starts)
        self._cells = self._long = None
        if max_cell_bytes is not None:  # a multi-byte delimiter's first byte splits cells too (never joins two)
            self._cells = _Runs(self.delimiter[:1] + b"\n\r", max_cell_bytes)
            self._long = _Runs(b"\n\r", min(self.columns * (max_cell_bytes + 1), MAX_LINE_BYTES))
        self._fast_lines = _Runs(b"\n\r", csv.field_size_limit())  # the exact path's csv refuses longer fields
        self._header_end: int | None = None  # where the header line ends, once found
        self._first_quote: int | None = None  # the first quote after the header line
        self._position = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._tail = b"\n"  # the bytes before the current block that a comment prefix check needs
        self._head = bytearray()  # the bytes up to the end of the header line, until it is complete
        self._head_limit = max(csv.field_size_limit(), 0 if self._long is None else self._long.limit) + _SCAN_BLOCK

    def run(self, stream: IO[bytes]) -> bool:
        """Scan ``stream`` (to its end unless the caps are not set and the Arrow path is ruled out, or a cap is
        exceeded); whether the Arrow path takes the file."""
        while self.violation is None and (self.fast or self._cells is not None):
            block = stream.read(_SCAN_BLOCK)
            if not block:
                break
            self.feed(block)
        return self.finish()

    @property
    def scanned(self) -> int:
        """The bytes of the stream scanned so far (a leading BOM included)."""
        return self._position

    @property
    def header_done(self) -> bool:
        """Whether the data lines' start (:attr:`data_start`) is known: the header line was read, or there is none."""
        return not self.find_header or self._header_end is not None

    def feed(self, block: bytes) -> None:
        """Scan the next ``block`` of the stream (:meth:`run` block by block, for a stream that arrives in pieces:
        :func:`encode_csv_stream`)."""
        if self._position == 0 and block.startswith(codecs.BOM_UTF8):
            self._position = self.data_start = len(codecs.BOM_UTF8)
            block = block[len(codecs.BOM_UTF8) :]
        self._block(block)
        self._position += len(block)

    def finish(self) -> bool:
        """After the last :meth:`feed`: whether the Arrow path takes the file (no violation, nothing ruled it out,
        valid UTF-8 to the end, a header line found)."""
        if self.violation is not None or not self.fast:
            return False
        try:
            self._decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return False
        if self.find_header and self.header is None:  # a header line without a line end: the whole file
            self.data_start = self._position
            return self._take_header(bytes(self._head).lstrip(b"\r\n"))
        return True

    def _block(self, block: bytes) -> None:
        data = self._header_line(block) if self.find_header and self._header_end is None else 0
        if self._first_quote is None and (quote := block.find(b'"', data)) >= 0:
            self._first_quote = self._position + quote
        if self._cells is not None and self._long is not None:
            cell, line = self._cells.feed(block, self._position), self._long.feed(block, self._position)
            if cell is not None:  # a long cell rather than its long line: the cell names its column
                self.violation = ("cell", cell)
            elif line is not None:
                self.violation = ("line", line)
        if self.fast and self.violation is None:
            self.fast = self._fast_block(block, data)

    def _header_line(self, block: bytes) -> int:
        """Collect the header line; where the data lines start in ``block`` (its length if not yet)."""
        self._head += block
        line = _first_nonempty_line(self._head)
        if line is None:
            if len(self._head) > self._head_limit:  # far longer than any line the caps or the Arrow path take
                self._header_end, self.fast = self._position + len(block), False
                self._head.clear()
            return len(block)
        start, end = line
        data = end + 1 - (len(self._head) - len(block))
        self._header_end = self.data_start = self._position + data
        if not self._take_header(bytes(self._head[start:end])):
            self.fast = False
        return data

    def _fast_block(self, block: bytes, data: int) -> bool:
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
        if b'"' in block[data:]:
            return False  # quoting: Python's csv and Arrow's tokenizers differ on malformed quotes
        if self._count_lines:
            self.lines += _count(block, 10) + (_count(block, 13) if b"\r" in block else 0)
        return self._fast_lines.feed(block, self._position) is None

    def _take_header(self, line: bytes) -> bool:
        self._head.clear()
        try:
            records = list(csv.reader([line.decode("utf-8")], delimiter=self.delimiter.decode("utf-8"), strict=True))
        except (csv.Error, UnicodeDecodeError):
            return False
        if len(records) != 1:
            return False
        self.header = [cell.strip() for cell in records[0]]
        return True

    def error(self, stream: IO[bytes], origin: int) -> DatasetValidationError:
        """The 422 of :attr:`violation`, naming its line and, when no quote precedes it, its column."""
        assert self.violation is not None and self.max_cell_bytes is not None
        kind, offset = self.violation
        cap = self.max_cell_bytes
        # A run starts after a separator byte: for a multi-byte delimiter, after its first byte (the run holds no
        # line end, so counting a few bytes more changes the line of none)
        line, field = _locate(stream, origin, offset + len(self.delimiter) - 1, self.delimiter)
        if kind == "line":
            assert self._long is not None
            return DatasetValidationError(None, line, f"line {line} is longer than {self._long.limit} bytes, the most "
                                          f"its {self.columns} fields can take (max_cell_bytes = {cap} bytes a field "
                                          f"and a delimiter; at most {MAX_LINE_BYTES} bytes a line)")  # fmt: skip
        if self.find_header and (self._header_end is None or offset < self._header_end):
            return DatasetValidationError(None, line, f"a cell of the header (line {line}) is longer than "
                                          f"max_cell_bytes = {cap} bytes")  # fmt: skip
        names = self.header if self.find_header else self.names
        if names is not None and field < len(names) and (self._first_quote is None or offset <= self._first_quote):
            name = names[field]
            return DatasetValidationError(name, line, f"cell in column {name!r} at line {line} is longer than "
                                          f"max_cell_bytes = {cap} bytes")  # fmt: skip
        return DatasetValidationError(None, line, f"a cell at line {line} is longer than max_cell_bytes = {cap} bytes")


def _locate(stream: IO[bytes], origin: int, offset: int, delimiter: bytes) -> tuple[int, int]:
    """The 1-based line of the byte at ``offset`` (``\\n``, ``\\r\\n`` and ``\\r`` each end a line, as the
    exact path counts lines) and the delimiters before it on its line (its 0-based field if no quote precedes it)."""
    stream.seek(origin)
    line, fields, position, carry, previous = 1, 0, origin, b"", b""
    while position < offset and (block := stream.read(min(_SCAN_BLOCK, offset - position))):
        line += _count(block, 10) + _count(block, 13) - block.count(b"\r\n")
        line -= previous == b"\r" and block.startswith(b"\n")
        joined = carry + block  # a multi-byte delimiter may cross blocks
        end = max(joined.rfind(b"\n"), joined.rfind(b"\r"))
        fields = joined.count(delimiter, end + 1) if end >= 0 else fields + joined.count(delimiter)
        carry, previous = block[len(block) - len(delimiter) + 1 :] if len(delimiter) > 1 else b"", block[-1:]
        position += len(block)
    return line, fields


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


def encode_csv(
    stream: IO[bytes], schema: DatasetSchema, max_matrix_bytes: int | None = None, max_cell_bytes: int | None = None
) -> EncodedDataset | None:
    """The exact path's result for a CSV (``stream`` seekable, at the file's start), or None: the file must take
    the exact path (module docstring). Raises :class:`DatasetTooLargeError` like the exact path would.

    With ``max_cell_bytes`` the pre-scan first reads the whole file (even one the Arrow path will not take) and
    raises :class:`DatasetValidationError` for its first cell longer than that, or line longer than its fields can
    take (:class:`_Prescan`): a cap, checked before the content, whichever path would encode the file."""
    out = _csv_rows(stream, schema, lambda d, rows: _Matrix(d, rows, unit_ids_of(schema)), max_matrix_bytes,
                    max_cell_bytes)  # fmt: skip
    if out is None:
        return None
    assert isinstance(out, _Matrix)
    X, y = out.result()
    return _finish(schema, X, y, out.units())


def stream_csv(
    stream: IO[bytes],
    schema: DatasetSchema,
    emit: Callable[[np.ndarray, np.ndarray], None],
    *,
    max_matrix_bytes: int | None = None,
    max_cell_bytes: int | None = None,
) -> int | None:
    """:func:`encode_csv` handing the encoded rows to ``emit(X, y)`` batch by batch (fresh arrays, in file order)
    instead of gathering them: memory is one batch. Returns the number of rows, or None if the file must take the
    exact path (some batches may have been emitted by then: the caller discards them). For a row-level schema only
    (a privacy unit's rows are bounded on the whole matrix)."""
    if schema.privacy_unit is not None:
        raise ValueError("a schema with a privacy unit is encoded in memory")
    blocks = _Blocks(schema.dimension, emit)
    if _csv_rows(stream, schema, lambda d, rows: blocks, max_matrix_bytes, max_cell_bytes) is None:
        return None
    blocks.close()
    return blocks.n


def _csv_rows(
    stream: IO[bytes],
    schema: DatasetSchema,
    make: Callable[[int, int], _Matrix | _Blocks],
    max_matrix_bytes: int | None,
    max_cell_bytes: int | None,
) -> _Matrix | _Blocks | None:
    """The Arrow path's rows of a CSV into ``make(d, capacity)`` (:func:`encode_csv`), or None."""
    declined = _numeric_na_marker(schema)
    if declined and max_cell_bytes is None:
        return None
    origin = stream.tell()
    scan = _Prescan(schema, max_cell_bytes)
    fast = scan.run(stream)
    if scan.violation is not None:
        raise scan.error(stream, origin)
    if declined or not fast:
        return None
    names = _data_names(scan, schema)
    if names is None:
        return None
    stream.seek(origin + scan.data_start)  # Arrow reads the data lines only, the columns named
    d = schema.dimension
    max_rows = None if max_matrix_bytes is None else max_matrix_bytes // ((d + 1) * 8)
    capacity = scan.lines if max_rows is None else min(scan.lines, max_rows + 1)
    return _arrow_rows(stream, schema, names, make(d, capacity), max_matrix_bytes)


def _data_names(scan: _Prescan, schema: DatasetSchema) -> list[str] | None:
    """The names of the data lines' columns (the header's, checked against the schema, or ``csv.columns``), or
    None: the exact path must say what is wrong with the header."""
    if not schema.csv.header:
        assert schema.csv.columns is not None
        return list(schema.csv.columns)
    if scan.header is None:
        return None
    try:
        _check_header(scan.header, 1, schema)
    except DatasetValidationError:
        return None  # the exact path says what is wrong, on which line
    return scan.header


def _csv_options(
    schema: DatasetSchema, names: list[str]
) -> tuple[dict[str, pa.DataType], pa_csv.ConvertOptions, pa_csv.ParseOptions]:
    """Arrow's conversion and parsing options of the data lines (columns ``names``): the used columns' types."""
    opts = schema.csv
    used = _read_types(schema)
    convert = pa_csv.ConvertOptions(
        column_types=used,
        include_columns=list(used),
        null_values=list(opts.na_values),
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    parse = pa_csv.ParseOptions(delimiter=opts.delimiter, quote_char=False, ignore_empty_lines=True)
    return used, convert, parse


def _arrow_rows(
    stream: IO[bytes], schema: DatasetSchema, names: list[str], out: _Matrix | _Blocks, max_matrix_bytes: int | None
) -> _Matrix | _Blocks | None:
    """Arrow's streaming reader over the data lines of a CSV (``stream`` at the first byte after the header line,
    the columns ``names``), each batch validated and encoded into ``out``; None if the exact path must take the
    file (a malformed record, a wrong field count, any invalid cell, no rows)."""
    used, convert, parse = _csv_options(schema, names)
    read = pa_csv.ReadOptions(block_size=_CSV_BLOCK, use_threads=True, column_names=names)
    try:
        reader = pa_csv.open_csv(stream, read_options=read, parse_options=parse, convert_options=convert)
        return _encode_batches(_batches(reader), schema, used, out, max_matrix_bytes)
    except (pa.ArrowException, UnicodeDecodeError, DatasetValidationError):
        return None  # a malformed record, a wrong field count, an unconvertible cell: the exact path says which


def _encode_batches(
    batches: Iterable[pa.RecordBatch],
    schema: DatasetSchema,
    used: dict[str, pa.DataType],
    out: _Matrix | _Blocks,
    max_matrix_bytes: int | None,
    on_rows: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> _Matrix | _Blocks | None:
    """Validate and encode the record ``batches`` (the ``used`` columns, in file order) into ``out``, each batch's
    rows then handed to ``on_rows(X, y)`` if given; None if any cell is invalid or there are no rows. Raises
    :class:`DatasetTooLargeError` past ``max_matrix_bytes`` (after checking the cells of the batch that crosses
    it, as the exact path would report one of them first), and whatever iterating ``batches`` raises."""
    d = schema.dimension
    max_rows = None if max_matrix_bytes is None else max_matrix_bytes // ((d + 1) * 8)
    for batch in batches:
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
        if isinstance(out, _Matrix) and out.unit_ids is not None:
            _unit_codes(out, columns(out.unit_ids.column), out.n)
        if on_rows is not None:
            on_rows(X, y)
        out.n += m
    return None if out.n == 0 else out


#: Threads that parse a streamed CSV's pieces (:func:`_parsed_pieces`) and sum statistics of its encoded batches
#: (:class:`privfit.api.upload_stream`), shared by the uploads of the process (created when first used).
UPLOAD_THREADS = ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2)), thread_name_prefix="privfit-csv")
_PIECE_BYTES = 1 << 20  # bytes of data lines parsed by one task
_PIECES_AHEAD = 4  # pieces parsed or being parsed ahead of the encoding


def _parse_piece(piece: bytes, names: list[str], convert: pa_csv.ConvertOptions,
                 parse: pa_csv.ParseOptions) -> list[pa.RecordBatch]:  # fmt: skip
    """The record batches of ``piece``, whole data lines of the CSV (one parser thread, Arrow's own rules)."""
    if piece[0] in b"\r\n" and piece.count(b"\n") + piece.count(b"\r") == len(piece):
        return []  # only empty lines, which Arrow skips (and would call an empty file)
    read = pa_csv.ReadOptions(block_size=len(piece) + 1, use_threads=False, column_names=names)
    table = pa_csv.read_csv(pa.BufferReader(piece), read_options=read, parse_options=parse, convert_options=convert)
    return table.to_batches()


def _parsed_pieces(
    stream: _ScannedStream, names: list[str], convert: pa_csv.ConvertOptions, parse: pa_csv.ParseOptions
) -> Iterator[pa.RecordBatch]:
    """The record batches of the data lines ``stream`` delivers, in order: cut into pieces of whole lines (at the
    last line end of each block read; a line end is ``\n``, ``\r`` or both, and a piece that starts with the
    ``\n`` of a ``\r\n`` cut in two has an empty first line, which Arrow skips) parsed by :data:`UPLOAD_THREADS` in
    parallel, at most :data:`_PIECES_AHEAD` ahead. Arrow parses lines independently (no quoting, the pre-scan
    guarantees it), so the batches hold the rows its streaming reader gives, cut elsewhere."""
    pending: deque[Future[list[pa.RecordBatch]]] = deque()
    carry = b""
    try:
        while True:
            block = stream.read(_PIECE_BYTES)
            if block:
                newline = block.rfind(b"\n")
                cut = max(newline, block.rfind(b"\r", newline + 1)) + 1  # the last line end
                if cut == 0:  # no line end: the line goes on (the pre-scan bounds its length)
                    carry += block
                    continue
                piece = b"".join((carry, memoryview(block)[:cut]))
                carry = block[cut:]
            else:
                piece, carry = carry, b""
            if piece:
                pending.append(UPLOAD_THREADS.submit(_parse_piece, piece, names, convert, parse))
            while pending and (len(pending) > _PIECES_AHEAD or pending[0].done() or not block):
                yield from pending.popleft().result()
            if not block:
                return
    finally:
        for future in pending:
            future.cancel()


class ByteSource(Protocol):
    """Where :func:`encode_csv_stream` reads a CSV as it arrives: ``read(size)`` returns ``size`` bytes, fewer only
    at the end (``b""`` there), blocking until they are there."""

    def read(self, size: int, /) -> bytes: ...


class _Declined(Exception):
    """Raised by :class:`_ScannedStream` into Arrow's reader when the bytes that arrive rule the Arrow path out."""


class _ScannedStream:
    """The data lines of a CSV that arrives through ``source`` (``read(k)``: k bytes, fewer only at the end; read
    once, not seekable), for Arrow's reader: every block is scanned by ``scan`` (:class:`_Prescan`) *before* any
    reader sees it, so the caps hold for what Arrow parses exactly as when the whole file is scanned first, and a
    block that rules the Arrow path out (a quote, invalid UTF-8, a long line, …) raises :class:`_Declined`
    instead of being returned."""

    def __init__(self, source: ByteSource, scan: _Prescan) -> None:
        self._source, self._scan = source, scan
        self._pending = b""  # scanned bytes not yet returned (the rest of the header's block)
        self.complete = False  # the source's end was reached

    def _next(self, size: int) -> bytes:
        block = self._source.read(size)
        if not block:
            self.complete = True
            return b""
        self._scan.feed(block)
        if self._scan.violation is not None or not self._scan.fast:
            raise _Declined
        return block

    def start(self) -> bool:
        """Read and scan up to the data lines (at least one block: a BOM is recognised in the first); whether
        the Arrow path may go on (no rule broken yet, a header line found where the schema says there is one)."""
        scan, head = self._scan, bytearray()
        try:
            while not head or not scan.header_done:
                block = self._next(_SCAN_BLOCK)
                if not block:
                    return False  # the whole file is a header, or empty: the exact path says so
                head += block
        except _Declined:
            return False
        self._pending = bytes(head[scan.data_start - (scan.scanned - len(head)) :])
        return True

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            parts = [self._pending]
            while block := self._next(_SCAN_BLOCK):
                parts.append(block)
            self._pending = b""
            return b"".join(parts)
        out, self._pending = self._pending[:size], self._pending[size:]
        if len(out) < size and not self.complete:
            out += self._next(size - len(out))
        return out

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return False

    def close(self) -> None:
        pass


def encode_csv_stream(
    source: ByteSource,
    schema: DatasetSchema | Mapping[str, Any],
    *,
    max_bytes: int,
    max_matrix_bytes: int | None = None,
    max_cell_bytes: int | None = None,
    on_rows: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> EncodedDataset | None:
    """:func:`encode_csv` of a CSV read once from ``source`` as it arrives (an upload's body: ``read(k)`` returns k
    bytes, fewer only at its end, blocking until they are there), at most ``max_bytes`` long: the exact path's
    result, or None when it must take the file (then ``source`` may be read only in part).

    The same checks as :func:`encode_csv` in one pass instead of two: the pre-scan runs block by block ahead of
    Arrow's reader (:class:`_ScannedStream`), so Arrow starts on the first block while the rest arrives. Any
    problem — a cap exceeded (which :func:`encode_csv_upload` reports from the whole file), a byte that rules the
    Arrow path out, an invalid cell, rows over ``max_matrix_bytes`` — makes it decline, and the caller encodes the
    file as a whole (spooled as it was read) with :func:`encode_csv_upload`, which reports the first problem as
    before. The matrix is allocated for the most rows ``max_bytes`` can hold (a record of c fields takes at
    least c − 1 delimiters and a line end) and at most the cap's: address space, not memory, until rows are
    written (:class:`~privfit.datasets.encoding._Matrix`). ``on_rows(X, y)`` is given each batch's encoded rows in
    file order (before ``−0.0`` becomes ``0.0``), e.g. to sum statistics while the rest arrives; when the result is
    None, what it was given is to be discarded."""
    schema = _as_schema(schema)
    if _numeric_na_marker(schema):
        return None
    scan = _Prescan(schema, max_cell_bytes, count_lines=False)
    stream = _ScannedStream(source, scan)
    if not stream.start():
        return None
    names = _data_names(scan, schema)
    if names is None:
        return None
    d = schema.dimension
    capacity = max_bytes // max(1, scan.columns - 1) + 1
    if max_matrix_bytes is not None:
        capacity = min(capacity, max_matrix_bytes // ((d + 1) * 8) + 1)
    used, convert, parse = _csv_options(schema, names)
    try:
        out = _encode_batches(_parsed_pieces(stream, names, convert, parse), schema, used,
                              _Matrix(d, capacity, unit_ids_of(schema)), max_matrix_bytes, on_rows)  # fmt: skip
    except (pa.ArrowException, UnicodeDecodeError, DatasetValidationError, _Declined):
        return None  # a malformed record, a wrong field count, a byte that rules the Arrow path out, …
    except DatasetTooLargeError:
        return None  # the caller's encoding of the whole file refuses it, after the caps over the whole file
    if out is None or not stream.complete or not scan.finish():
        return None
    assert isinstance(out, _Matrix)
    X, y = out.result()
    return _finish(schema, X, y, out.units())


def _batches(reader: pa_csv.CSVStreamingReader) -> Iterator[pa.RecordBatch]:
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return


def encode_csv_upload(
    stream: IO[bytes],
    schema: DatasetSchema | Mapping[str, Any],
    *,
    max_matrix_bytes: int | None = None,
    max_cell_bytes: int | None = None,
) -> EncodedDataset:
    """:func:`privfit.datasets.encoding.parse_and_encode` of an uploaded CSV (``stream`` seekable, at its start),
    with the cell cap: the pre-scan refuses a cell over ``max_cell_bytes`` (or a line longer than its fields can
    take) naming its line and column, before the Arrow path or the exact path parses a cell; then the same as
    ``parse_and_encode`` (the Arrow path if it takes the file, else the exact path from the start)."""
    schema = _as_schema(schema)
    origin = stream.tell()
    encoded = encode_csv(stream, schema, max_matrix_bytes, max_cell_bytes)
    if encoded is not None:
        return encoded
    stream.seek(origin)
    restart_clipped_cells()  # the exact path encodes every row again
    return parse_and_encode(stream, schema, max_matrix_bytes=max_matrix_bytes, columnar=False)


# --------------------------------------------------------------------------------------------------
# Parquet
# --------------------------------------------------------------------------------------------------


#: What reading a Parquet file with Arrow raises for a file it cannot decode: a corrupt or truncated page, bad
#: Thrift, an unsupported encoding or codec (ArrowInvalid, ArrowIOError, ArrowNotImplementedError, a plain OSError).
_ARROW_ERRORS = (pa.ArrowException, OSError, ValueError, EOFError, IndexError, KeyError, NotImplementedError,
                 OverflowError)  # fmt: skip
_TYPE_TEXT = 200  # characters of a column's type shown in an error (a nested type's text can be long)


def _parquet_type_error(name: str, expected: str, found: pa.DataType) -> DatasetValidationError:
    shown = str(found)
    shown = shown if len(shown) <= _TYPE_TEXT else shown[:_TYPE_TEXT] + "…"
    if pa.types.is_nested(found):
        found_text = f"the nested type {shown}"
        expected += ": only 'ignore' columns may be nested"
    else:
        found_text = f"type {shown}"
    return DatasetValidationError(
        name, None, f"column {name!r} of the Parquet file has {found_text}, expected {expected}"
    )


def _check_parquet_schema(arrow: pa.Schema, schema: DatasetSchema) -> dict[str, int]:
    """Column names as for a CSV header (all declared, none undeclared, no duplicate); types of the used
    columns (numeric: integer or floating; categorical and class labels: strings; never nested). Returns name →
    position."""
    index = _check_header(list(arrow.names), 1, schema) if len(set(arrow.names)) == len(arrow.names) else None
    if index is None:
        dup = next(name for name in arrow.names if arrow.names.count(name) > 1)
        raise DatasetValidationError(dup, None, f"duplicate column {dup!r} in the Parquet file")
    unit = None if schema.privacy_unit is None else schema.privacy_unit.column
    for name, kind in _read_types(schema).items():
        found = arrow.field(name).type
        value = found.value_type if pa.types.is_dictionary(found) else found
        if name == unit:
            if not (pa.types.is_integer(value) or any(check(value) for check in _STRING_TYPES)):
                raise _parquet_type_error(name, "a string or integer type (the privacy unit's id)", found)
        elif pa.types.is_float64(kind):
            if not (pa.types.is_integer(found) or pa.types.is_floating(found)):
                raise _parquet_type_error(name, "an integer or floating type (a numeric column)", found)
        elif not any(check(value) for check in _STRING_TYPES):
            raise _parquet_type_error(name, "a string type (categories and class labels are text)", found)
    return index


def _header_errors(error: DatasetValidationError) -> DatasetValidationError:
    """A header error of :func:`_check_header`, reworded for a Parquet file's column names (no line)."""
    message = error.message.replace("header (line 1)", "the Parquet file")
    return DatasetValidationError(error.column, None, message)


def _corrupt(what: str) -> DatasetValidationError:
    return DatasetValidationError(None, None, f"the Parquet file is corrupt ({what})")


def encode_parquet(
    source: bytes | IO[bytes],
    schema: DatasetSchema | Mapping[str, Any],
    *,
    max_matrix_bytes: int | None = None,
    max_cell_bytes: int | None = None,
    max_page_bytes: int | None = None,
    admit_rows: Callable[[int], None] | None = None,
    on_rows: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> EncodedDataset:
    """Encode a Parquet upload (its bytes or a seekable binary file) against ``schema`` (module docstring), batch
    by batch, after checking what the file declares (:mod:`privfit.datasets.parquet_limits`); ``on_rows(X, y)``
    is given each batch's encoded rows in file order (e.g. :class:`~privfit.datasets.preprocessing.BatchCounts`).

    Before any page is decoded: the trailer (footer at most ``max_page_bytes``), the columns and their types, the
    row count n of the footer — against ``max_matrix_bytes`` and then ``admit_rows(n)`` (the caller's own rules on
    n, e.g. the budget's δ < 1/n; it raises to refuse) — and every used column chunk's page headers (dictionary
    pages at most ``max_page_bytes``, strings at most ``max_cell_bytes`` where statistics or dictionary sizes tell,
    the row group rule). While decoding: each batch's strings at most ``max_cell_bytes``, checked on Arrow's
    dictionaries before any becomes Python text; text columns are read dictionary-encoded, so a value repeated by
    every row is held once.

    Raises:
        DatasetValidationError: not a Parquet file, or one Arrow cannot decode (corrupt or truncated pages, bad
            Thrift, an unsupported codec or encoding); a missing, undeclared or duplicate column; a used column of
            the wrong or a nested type; a value longer than ``max_cell_bytes``; a row group over the row group
            rule; the first invalid cell (missing under ``"reject"``, non-finite, unknown level or class), naming
            the column and the 1-based row; no rows.
        DatasetTooLargeError: n·(d + 1)·8 over ``max_matrix_bytes``; a footer or dictionary page over
            ``max_page_bytes`` (setting ``max_parquet_page_bytes``).
    """
    schema = _as_schema(schema)
    out = _parquet_rows(source, schema, lambda d, rows: _Matrix(d, rows, unit_ids_of(schema)), max_matrix_bytes,
                        max_cell_bytes, max_page_bytes, admit_rows, on_rows)  # fmt: skip
    assert isinstance(out, _Matrix)
    X, y = out.result()
    return _finish(schema, X, y, out.units())


def stream_parquet(
    source: IO[bytes],
    schema: DatasetSchema,
    emit: Callable[[np.ndarray, np.ndarray], None],
    *,
    max_matrix_bytes: int | None = None,
    max_cell_bytes: int | None = None,
    max_page_bytes: int | None = None,
    admit_rows: Callable[[int], None] | None = None,
) -> int:
    """:func:`encode_parquet` handing the encoded rows to ``emit(X, y)`` batch by batch (fresh arrays, in file
    order) instead of gathering them: memory is one batch. Returns the number of rows. Raises as
    :func:`encode_parquet` (some batches may have been emitted by then: the caller discards them). For a row-level
    schema only (a privacy unit's rows are bounded on the whole matrix)."""
    if schema.privacy_unit is not None:
        raise ValueError("a schema with a privacy unit is encoded in memory")
    blocks = _Blocks(schema.dimension, emit)
    _parquet_rows(source, schema, lambda d, rows: blocks, max_matrix_bytes, max_cell_bytes, max_page_bytes,
                  admit_rows)  # fmt: skip
    blocks.close()
    return blocks.n


def _parquet_rows(
    source: bytes | IO[bytes],
    schema: DatasetSchema,
    make: Callable[[int, int], _Matrix | _Blocks],
    max_matrix_bytes: int | None,
    max_cell_bytes: int | None,
    max_page_bytes: int | None,
    admit_rows: Callable[[int], None] | None,
    on_rows: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> _Matrix | _Blocks:
    """The rows of a Parquet upload into ``make(d, n)`` (:func:`encode_parquet`), each batch's handed to
    ``on_rows`` if given."""
    stream: IO[bytes] = io.BytesIO(source) if isinstance(source, bytes) else source
    limits = ParquetLimits(max_cell_bytes=max_cell_bytes, max_page_bytes=max_page_bytes)
    footer_start = check_trailer(stream, limits)
    try:
        parquet = pq.ParquetFile(stream, buffer_size=_CSV_BLOCK, pre_buffer=False)  # column chunks read in blocks
        arrow = parquet.schema_arrow
        n = declared_rows(parquet.metadata)
    except DatasetValidationError:
        raise
    except _ARROW_ERRORS:  # Arrow's message may quote bytes of the file: not shown
        raise DatasetValidationError(None, None, "the file is not a readable Parquet file") from None
    try:
        order = _check_parquet_schema(arrow, schema)
    except DatasetValidationError as error:
        raise _header_errors(error) from None
    if n == 0:
        raise DatasetValidationError(None, None, "the file contains no data rows")
    d = schema.dimension
    if max_matrix_bytes is not None:
        _check_rows(0, n, max_matrix_bytes // ((d + 1) * 8), d, max_matrix_bytes)
    if admit_rows is not None:
        admit_rows(n)
    used = _read_types(schema)
    if schema.privacy_unit is not None and pa.types.is_integer(arrow.field(schema.privacy_unit.column).type):
        used[schema.privacy_unit.column] = pa.int64()  # integer ids: read as numbers, not as text
    texts = [name for name, kind in used.items() if pa.types.is_dictionary(kind)]
    batch_rows = min(_PARQUET_BATCH_ROWS, max(16, _CHUNK_CELLS // len(used)))  # bounds an error's Python cells
    out = make(d, n)
    try:
        plain = check_row_groups(stream, parquet, {name: name in texts for name in used}, d, footer_start, limits)
        dictionaries = [name for name in texts if name not in plain]
        parquet = pq.ParquetFile(stream, buffer_size=_CSV_BLOCK, pre_buffer=False, read_dictionary=dictionaries,
                                 metadata=parquet.metadata)  # fmt: skip
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=list(used), use_threads=True):
            m = batch.num_rows
            if sorted(batch.schema.names) != sorted(used):
                raise _corrupt("its columns are not the ones its schema names")
            if out.n + m > n:
                raise _corrupt("its row groups hold more rows than they declare")
            if max_cell_bytes is not None:
                _check_cell_bytes(batch, texts, max_cell_bytes, out.n)
            X, y = out.reserve(m)
            if not _encode_batch(schema, batch.column, X, y):
                _encode_exactly(schema, batch, out.n, order, X, y)
            if isinstance(out, _Matrix) and out.unit_ids is not None:
                _unit_codes(out, batch.column(out.unit_ids.column), out.n)
            if on_rows is not None:
                on_rows(X, y)
            out.n += m
    except (DatasetValidationError, DatasetTooLargeError, MemoryError):
        raise
    except _ARROW_ERRORS:
        raise _corrupt("a page cannot be decoded") from None
    if out.n != n:
        raise _corrupt("its row count does not match")
    return out


def _check_cell_bytes(batch: pa.RecordBatch, texts: list[str], cap: int, offset: int) -> None:
    """Refuse a text value longer than ``cap`` bytes in ``batch`` (its first row numbered ``offset + 1``), from
    the lengths Arrow holds: a dictionary column is checked on its dictionary, before any value becomes a Python
    string (a value over the cap is refused even if no row of this batch refers to it)."""
    for name in texts:
        column = batch.column(name)
        dictionary = pa.types.is_dictionary(column.type)
        over = pc.fill_null(pc.greater(pc.binary_length(column.dictionary if dictionary else column), cap), False)
        if not pc.any(over).as_py():
            continue
        long = over.to_numpy(zero_copy_only=False)
        if dictionary:  # per row: refers to a long value
            index = pc.fill_null(column.indices, 0).to_numpy(zero_copy_only=False)
            long = long[index] & ~column.is_null().to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(long)
        row = offset + int(rows[0]) + 1 if rows.size else None
        at = "in the file's dictionary" if row is None else f"at row {row}"
        raise DatasetValidationError(
            name, row, f"a value in column {name!r} {at} is longer than max_cell_bytes = {cap} bytes"
        )


def _objects(texts: list[Any]) -> np.ndarray:
    """``texts`` as a 1-D array of the same Python objects (shared, not copied)."""
    out = np.empty(len(texts), dtype=object)
    out[:] = texts
    return out


def _encode_exactly(
    schema: DatasetSchema, batch: pa.RecordBatch, offset: int, order: dict[str, int], X: np.ndarray, y: np.ndarray
) -> None:
    """Encode ``batch`` cell by cell with the rules of uploaded rows (:func:`_encode`, rows numbered from
    ``offset + 1``): it raises the first invalid cell's error, naming the column and the row. A text column's rows
    share the Python strings of its distinct values (:func:`_by_text`), never one string per row."""
    columns: dict[str, list[Any]] = {}
    for name in _read_types(schema):
        column = batch.column(name)
        if pa.types.is_dictionary(column.type):
            columns[name] = _by_text(column, _objects).tolist()
        else:
            columns[name] = column.to_pylist()
    m = batch.num_rows
    X[:] = 0.0
    _encode(schema, cells=columns.__getitem__, n=m, positions=range(offset + 1, offset + m + 1), unit="row",
            column_order=order, label_present=True, out=(X, y))  # fmt: skip

"""What a Parquet upload declares about its size, checked before Apache Arrow decodes any page (issue 35).

Arrow decodes what a file's metadata tells it to: a 7 KB file can hold a dictionary page that decompresses to
64 MiB, one string that every one of 200,000 rows references; a 193 KB file can declare 10 M rows; a footer can
claim any length. So before a page is decompressed, :func:`check_trailer` and :func:`check_row_groups` read what
the file *declares* and refuse it when that is more than the upload may cost:

* the trailer: the magic bytes and the footer's length, at most ``max_page_bytes`` (Arrow parses the footer whole,
  into about 9 × its size of memory);
* every row group: its declared rows add up to the file's, and every used column chunk lies inside the file and
  declares one value per row (flat columns);
* the header of every page of every used column chunk (Thrift compact protocol, read here field by field without
  decompressing anything — the footer's sizes alone could lie): a dictionary page is at most ``max_page_bytes``
  uncompressed, and so are a row group's text dictionaries together (Arrow holds each whole, in about 7 × its
  size); a text dictionary's values average at most ``max_cell_bytes`` (a longer average means a longer value);
  text is not front-coded (DELTA_BYTE_ARRAY, where a few bytes can repeat a long value in every row);
* string statistics, where present: a min or max longer than ``max_cell_bytes`` is a value that long;
* the row group rule: the used column chunks of a row group of r rows hold, uncompressed (or compressed, whichever
  is larger, page headers included), at most twice the encoded matrix of its rows, 2·r·(d + 1)·8 bytes, plus
  :data:`ROW_GROUP_SLACK_BYTES`. A numeric column takes 8 bytes a row plain and about 10 dictionary-encoded, a
  category's or label's dictionary index at most 4, so honest files hold far less; the rule bounds what decoding a
  row group can allocate by what its rows encode to (docs/datasets.md, Parquet files).

The value-level rule (no string longer than ``max_cell_bytes``) is then enforced on each batch's dictionaries
before any value becomes Python text (:mod:`privfit.datasets.columnar`). Errors name the column and the 1-based row
group; they state sizes, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

import pyarrow.parquet as pq

from .encoding import DatasetTooLargeError, DatasetValidationError

__all__ = ["ROW_GROUP_SLACK_BYTES", "ParquetLimits", "check_row_groups", "check_trailer", "declared_rows"]

MAGIC = b"PAR1"
#: The row group rule's allowance on top of twice the encoded matrix of its rows (dictionaries, page headers).
ROW_GROUP_SLACK_BYTES = 64 * 1024 * 1024
_MAX_PAGE_HEADER = 1 << 20  # an honest page header is a few dozen bytes (plus statistics of at most 2 cells)
_MAX_NESTING = 32
_PARQUET_816_PADDING = 100  # Arrow reads this much past a chunk written by old parquet-mr (PARQUET-816)
_DATA_PAGE, _INDEX_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 1, 2, 3
# PageHeader fields read (parquet.thrift): 1 type, 2 uncompressed_page_size, 3 compressed_page_size; num_values
# (field 1) and encoding of 5 DataPageHeader (2), 7 DictionaryPageHeader, 8 DataPageHeaderV2 (4). Others: skipped.
_PAGE_HEADER: dict[int, Any] = {1: None, 2: None, 3: None, 5: {1: None, 2: None}, 7: {1: None}, 8: {1: None, 4: None}}
_DELTA_LENGTH_BYTE_ARRAY, _DELTA_BYTE_ARRAY = 6, 7  # Encoding (parquet.thrift)


@dataclass(frozen=True)
class ParquetLimits:
    """The caps of a Parquet upload (None: not enforced). Settings ``max_cell_bytes`` and
    ``max_parquet_page_bytes``; the row group rule needs no setting (it is relative to the matrix)."""

    max_cell_bytes: int | None = None
    max_page_bytes: int | None = None


class _Corrupt(Exception):
    """A structural problem found while reading a page header (the caller adds the column and row group)."""


def _corrupt(what: str, column: str | None = None, group: int | None = None) -> DatasetValidationError:
    where = "" if column is None else f" (column {column!r}, row group {group})"
    return DatasetValidationError(column, None, f"the Parquet file is corrupt: {what}{where}")


def check_trailer(stream: IO[bytes], limits: ParquetLimits) -> int:
    """Check the file's magic bytes and its footer's declared length (at most ``max_page_bytes``) before Arrow
    reads the footer; returns the offset where the footer starts (column chunks lie before it). Offsets count
    from the stream's start, as Arrow's do."""
    size = stream.seek(0, 2)
    stream.seek(0)
    head = stream.read(4)
    stream.seek(max(0, size - 8))
    tail = stream.read(8)
    stream.seek(0)
    if size < 12 or head != MAGIC or tail[4:] != MAGIC:
        if tail[4:] == b"PARE":
            raise DatasetValidationError(None, None, "encrypted Parquet files are not supported")
        raise DatasetValidationError(None, None, "the file is not a readable Parquet file")
    footer = int.from_bytes(tail[:4], "little")
    if footer > size - 12:
        raise _corrupt(f"its footer is declared {footer} bytes long, longer than the file")
    cap = limits.max_page_bytes
    if cap is not None and footer > cap:
        raise DatasetTooLargeError(
            "max_parquet_page_bytes",
            cap,
            f"the Parquet file's footer is {footer} bytes, over max_parquet_page_bytes = {cap} bytes (a footer is "
            "decoded whole; write fewer row groups or columns per file)",
        )
    return int(size) - 8 - footer


def declared_rows(metadata: pq.FileMetaData) -> int:
    """The file's row count, once its row groups' counts are checked to add up to it."""
    n = metadata.num_rows
    groups = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
    if n < 0 or min(groups, default=0) < 0 or sum(groups) != n:
        raise _corrupt(f"its row groups declare {sum(groups)} rows in all, its footer {n}")
    return int(n)


def check_row_groups(
    stream: IO[bytes],
    parquet: pq.ParquetFile,
    columns: Mapping[str, bool],
    d: int,
    footer_start: int,
    limits: ParquetLimits,
) -> set[str]:
    """Check every used column chunk (``columns``: name → whether it is read as text) from the footer and its
    page headers, and each row group against the row group rule (module docstring), before any page is decoded.
    Returns the text columns Arrow must read as plain strings, not dictionary-encoded: those written with
    DELTA_LENGTH_BYTE_ARRAY pages (Arrow decodes them only to plain strings; their bytes are all in the pages).

    Raises:
        DatasetValidationError: a structural problem (a used column that is not one flat leaf, a chunk outside the
            file, a page header that cannot be read, fewer values than rows); a string statistic or a dictionary
            page whose values average more than ``max_cell_bytes``; a text column with DELTA_BYTE_ARRAY pages
            (front coding: a few bytes stand for a long value repeated, which Arrow would decode in full), or
            with DELTA_LENGTH_BYTE_ARRAY pages and dictionary pages both; a row group over the row group rule.
        DatasetTooLargeError: a dictionary page, or the text columns' dictionary pages of a row group together,
            over ``max_page_bytes`` (setting ``max_parquet_page_bytes``).
    """
    metadata = parquet.metadata
    leaves = _leaves(parquet, columns)
    physical = {name: metadata.schema.column(leaf).physical_type for name, leaf in leaves.items()}
    plain: set[str] = set()
    with_dictionary: set[str] = set()
    try:
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            rows = group.num_rows
            held: dict[str, int] = {}
            dictionaries = 0  # of the text columns: Arrow keeps each whole while it reads the row group
            for name, leaf in leaves.items():
                text = columns[name]
                pages = _check_chunk(stream, group.column(leaf), physical[name], rows, text, footer_start, limits,
                                     name, g + 1)  # fmt: skip
                held[name] = pages.held
                if text:
                    dictionaries += pages.dictionary
                    _check_text_encodings(pages.encodings, name, g + 1)
                    if pages.dictionary:
                        with_dictionary.add(name)
                    if _DELTA_LENGTH_BYTE_ARRAY in pages.encodings:
                        plain.add(name)
            _check_group(held, dictionaries, rows, d, limits, g + 1)
        both = sorted(plain & with_dictionary)
        if both:
            raise DatasetValidationError(
                both[0], None, f"column {both[0]!r} of the Parquet file has both dictionary pages and "
                "DELTA_LENGTH_BYTE_ARRAY pages; write it with one encoding"
            )  # fmt: skip
    finally:
        stream.seek(0)
    return plain


def _check_text_encodings(encodings: set[int], name: str, group: int) -> None:
    if _DELTA_BYTE_ARRAY in encodings:
        raise DatasetValidationError(
            name,
            None,
            f"column {name!r} of the Parquet file is written with the DELTA_BYTE_ARRAY encoding (row group {group}), "
            "in which a few bytes can stand for a long value repeated; write it dictionary- or plain-encoded",
        )


def _check_group(held: dict[str, int], dictionaries: int, rows: int, d: int, limits: ParquetLimits, group: int) -> None:
    """A row group's text dictionaries together at most ``max_page_bytes``, and the row group rule."""
    cap = limits.max_page_bytes
    if cap is not None and dictionaries > cap:
        raise DatasetTooLargeError(
            "max_parquet_page_bytes",
            cap,
            f"the dictionary pages of the text columns in row group {group} of the Parquet file add up to "
            f"{dictionaries} bytes uncompressed, over max_parquet_page_bytes = {cap} bytes",
        )
    allowed = 2 * rows * (d + 1) * 8 + ROW_GROUP_SLACK_BYTES
    total = sum(held.values())
    if total > allowed:
        largest = max(held, key=held.__getitem__)
        raise DatasetValidationError(
            largest,
            None,
            f"row group {group} of the Parquet file holds {total} bytes of pages in the used columns (most in column "
            f"{largest!r}), more than twice the encoded matrix of its {rows} rows (2·{rows}·(d + 1)·8 = "
            f"{allowed - ROW_GROUP_SLACK_BYTES} bytes) plus {ROW_GROUP_SLACK_BYTES} bytes",
        )


def _leaves(parquet: pq.ParquetFile, columns: Mapping[str, bool]) -> dict[str, int]:
    """name → index of the one flat leaf column Arrow reads for it (``iter_batches(columns=…)`` selects every
    leaf whose dotted path starts with the name: a nested column named alike would be read too)."""
    paths = [".".join(path) for path in parquet.reader.column_paths]
    out: dict[str, int] = {}
    for name in columns:
        selected = [i for i, path in enumerate(paths) if path == name or path.startswith(name + ".")]
        if len(selected) != 1 or paths[selected[0]] != name or len(parquet.reader.column_paths[selected[0]]) != 1:
            raise DatasetValidationError(
                name, None, f"column {name!r} of the Parquet file is not one flat column (a nested column's path "
                "starts with its name)"
            )  # fmt: skip
        out[name] = selected[0]
    return out


@dataclass(frozen=True)
class _Pages:
    """What a column chunk's page headers declare: the bytes its pages hold (headers included, the larger of a
    page's uncompressed and compressed sizes), its dictionary page's uncompressed size (0: none) and the
    encodings of its data pages."""

    held: int
    dictionary: int
    encodings: set[int]


def _check_chunk(
    stream: IO[bytes],
    chunk: pq.ColumnChunkMetaData,
    physical: str,
    rows: int,
    text: bool,
    footer_start: int,
    limits: ParquetLimits,
    name: str,
    group: int,
) -> _Pages:
    """Check one used column chunk from the footer and its page headers; its pages, the declared totals counted
    in ``held`` when larger than what the headers say."""
    if chunk.file_path:
        raise _corrupt("a column chunk is stored in another file", name, group)
    if chunk.physical_type != physical:  # pyarrow aborts the process reading statistics of such a chunk
        raise _corrupt("a column chunk's type is not its column's", name, group)
    if chunk.num_values != rows:
        raise _corrupt(f"the column chunk declares {chunk.num_values} values for {rows} rows", name, group)
    cap = limits.max_cell_bytes
    if text and cap is not None and chunk.is_stats_set:
        statistics = chunk.statistics
        if statistics is not None and statistics.has_min_max:
            longest = max(len(statistics.min_raw or b""), len(statistics.max_raw or b""))
            if longest > cap:
                raise _long_value(name, group, "its statistics hold", cap)
    start = chunk.data_page_offset
    dictionary = chunk.dictionary_page_offset if chunk.has_dictionary_page else None
    if dictionary is not None and 0 < dictionary < start:
        start = dictionary
    length = chunk.total_compressed_size
    if start < 4 or length < 0 or chunk.total_uncompressed_size < 0 or start + length > footer_start:
        raise _corrupt("a column chunk lies outside the file's data", name, group)
    end = min(start + length + _PARQUET_816_PADDING, footer_start)
    try:
        pages = _walk_pages(stream, start, end, rows, text, limits, name, group)
    except _Corrupt as error:
        raise _corrupt(str(error), name, group) from None
    held = max(pages.held, chunk.total_uncompressed_size, length)
    return _Pages(held, pages.dictionary, pages.encodings)


def _walk_pages(
    stream: IO[bytes], start: int, end: int, values: int, text: bool, limits: ParquetLimits, name: str, group: int
) -> _Pages:
    """Read the page headers of one column chunk (offsets ``start``..``end``) until its data pages declare
    ``values`` values, as Arrow reads them."""
    position, seen, held, dictionary, first = start, 0, 0, 0, True
    encodings: set[int] = set()
    while seen < values:
        if position >= end:
            raise _Corrupt(f"its pages hold {seen} of its {values} values")
        reader = _Compact(stream, position, min(end, position + _MAX_PAGE_HEADER))
        header = reader.struct(_PAGE_HEADER)
        kind, size, compressed = header.get(1), header.get(2), header.get(3)
        if kind is None or size is None or compressed is None or size < 0 or compressed < 0:
            raise _Corrupt("a page header lacks its type or sizes")
        body = reader.position
        if body + compressed > end:
            raise _Corrupt("a page runs past its column chunk")
        if kind == _DICTIONARY_PAGE:
            if not first:
                raise _Corrupt("a dictionary page is not the chunk's first page")
            _check_dictionary(size, header.get(7, {}).get(1), text, limits, name, group)
            dictionary = size
        elif kind in (_DATA_PAGE, _DATA_PAGE_V2):
            data = header.get(5 if kind == _DATA_PAGE else 8, {})
            count, encoding = data.get(1), data.get(2 if kind == _DATA_PAGE else 4)
            if count is None or count < 0 or encoding is None:
                raise _Corrupt("a data page header lacks its number of values or its encoding")
            seen += count
            encodings.add(encoding)
        elif kind != _INDEX_PAGE:
            raise _Corrupt(f"a page has the unknown type {kind}")
        held += (body - position) + max(size, compressed)
        position, first = body + compressed, False
    return _Pages(held, dictionary, encodings)


def _check_dictionary(size: int, entries: int | None, text: bool, limits: ParquetLimits, name: str, group: int) -> None:
    """A dictionary page of ``size`` bytes uncompressed holding ``entries`` values (PLAIN: a 4-byte length and the
    bytes of each string) — at most ``max_page_bytes``; for text, values averaging at most ``max_cell_bytes``."""
    if entries is None or entries < 0:
        raise _Corrupt("a dictionary page header lacks its number of values")
    cap = limits.max_page_bytes
    if cap is not None and size > cap:
        raise DatasetTooLargeError(
            "max_parquet_page_bytes",
            cap,
            f"the dictionary page of column {name!r} in row group {group} of the Parquet file is {size} bytes "
            f"uncompressed, over max_parquet_page_bytes = {cap} bytes",
        )
    cell = limits.max_cell_bytes
    if text and cell is not None and size - 4 * entries > cell * max(entries, 1):
        raise _long_value(name, group, "its dictionary page holds", cell)


def _long_value(name: str, group: int, where: str, cap: int) -> DatasetValidationError:
    return DatasetValidationError(
        name,
        None,
        f"column {name!r} of the Parquet file holds a value longer than max_cell_bytes = {cap} bytes ({where} one, "
        f"row group {group})",
    )


class _Compact:
    """Reads a Thrift compact-protocol struct from ``stream`` between two absolute offsets: the integer fields
    asked for, every other field skipped (a binary by moving past it, so nothing large is read into memory)."""

    def __init__(self, stream: IO[bytes], start: int, end: int) -> None:
        self._stream, self.position, self._end = stream, start, end
        self._buffer, self._at = b"", start

    def _take(self, k: int) -> bytes:
        if self.position + k > self._end:
            raise _Corrupt("a page header cannot be read (it runs past its column chunk or is over 1 MiB)")
        offset = self.position - self._at
        if offset + k > len(self._buffer):
            self._stream.seek(self.position)
            self._buffer, self._at, offset = self._stream.read(max(k, 256)), self.position, 0
            if len(self._buffer) < k:
                raise _Corrupt("the file ends inside a page header")
        self.position += k
        return self._buffer[offset : offset + k]

    def _skip_bytes(self, k: int) -> None:
        if k < 0 or self.position + k > self._end:
            raise _Corrupt("a page header cannot be read (it runs past its column chunk or is over 1 MiB)")
        self.position += k

    def _varint(self) -> int:
        result = shift = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 63:
                raise _Corrupt("a page header holds an overlong integer")

    def _zigzag(self) -> int:
        n = self._varint()
        return (n >> 1) ^ -(n & 1)

    def struct(self, wanted: Mapping[int, Any], depth: int = 0) -> dict[int, Any]:
        """The struct's fields whose ids ``wanted`` maps to None (integers) or to a mapping (a nested struct read
        the same way); the others are skipped."""
        if depth > _MAX_NESTING:
            raise _Corrupt("a page header nests too deeply")
        out: dict[int, Any] = {}
        last = 0
        while (head := self._take(1)[0]) != 0:
            kind, delta = head & 0x0F, head >> 4
            last = last + delta if delta else self._zigzag()
            spec = wanted.get(last, False)
            if spec is None and kind in (4, 5, 6):
                out[last] = self._zigzag()
            elif isinstance(spec, Mapping) and kind == 12:
                out[last] = self.struct(spec, depth + 1)
            else:
                self._skip(kind, depth)
        return out

    def _skip(self, kind: int, depth: int, element: bool = False) -> None:
        """Skip a value of compact type ``kind`` (a boolean field's value lives in its header; a boolean element of
        a list is one byte). Every value takes at least a byte, so a header of at most 1 MiB is skipped in at most
        a million steps."""
        if depth > _MAX_NESTING:
            raise _Corrupt("a page header nests too deeply")
        if kind in (1, 2):
            if element:
                self._take(1)
        elif kind == 3:
            self._take(1)
        elif kind in (4, 5, 6):
            self._varint()
        elif kind == 7:
            self._skip_bytes(8)
        elif kind == 8:
            self._skip_bytes(self._varint())
        elif kind in (9, 10):
            head = self._take(1)[0]
            size = head >> 4 if head >> 4 != 15 else self._varint()
            for _ in range(size):
                self._skip(head & 0x0F, depth + 1, element=True)
        elif kind == 11:
            size = self._varint()
            if size:
                types = self._take(1)[0]
                for _ in range(size):
                    self._skip(types >> 4, depth + 1, element=True)
                    self._skip(types & 0x0F, depth + 1, element=True)
        elif kind == 12:
            self.struct({}, depth + 1)
        else:
            raise _Corrupt(f"a page header holds the unknown type {kind}")

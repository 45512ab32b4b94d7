"""Streaming, bounded-memory CSV encoding (privfit.datasets.encoding) and linear-time schema validation.

The upload is read in blocks and encoded in chunks of rows; these tests shrink the blocks and chunks to a few
bytes and rows so that every boundary case is crossed, and check that results, hashes and error messages are
exactly those of encoding the file in one piece.
"""

from __future__ import annotations

import copy
import io
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError
from test_dataset_encoding import HEADER, SCHEMA

import privfit.datasets.encoding as encoding
from privfit.datasets import DatasetSchema, DatasetValidationError, parse_and_encode
from privfit.datasets.encoding import DatasetTooLargeError

ROW = "7,30,red,1,yes\n"

FILES: dict[str, bytes] = {
    "valid": (HEADER + ROW * 50).encode(),
    "crlf and blank lines": ("\r\n" + HEADER.replace("\n", "\r\n") + (ROW + "\n").replace("\n", "\r\n") * 40).encode(),
    "bom": b"\xef\xbb\xbf" + (HEADER + ROW * 30).encode(),
    "quoted newline": (HEADER + ROW * 20 + '8,"4\n0",red,1,yes\n' + ROW).encode(),
    "unknown category late": (HEADER + ROW * 45 + "8,30,purple,1,yes\n" + ROW * 5).encode(),
    "two errors in one late chunk": (HEADER + ROW * 40 + "8,30,red,x,yes\n" + "9,abc,purple,1,yes\n").encode(),
    "field count late": (HEADER + ROW * 37 + "8,30,red\n" + ROW).encode(),
    "cell error before field count": (HEADER + ROW * 20 + "8,30,red,1,maybe\n" + ROW * 20 + "1,2\n").encode(),
    "bad utf-8 late": (HEADER + ROW * 33).encode() + b"9,30,r\xffd,1,yes\n" + ROW.encode(),
    "nul late": (HEADER + ROW * 33).encode() + b"9,30,red,1\0,yes\n",
    "cell error before bad utf-8": (HEADER + ROW * 3 + "9,30,red,1,maybe\n" + ROW * 30).encode() + b"\xff\n",
    "unterminated quote before bad utf-8": (HEADER + ROW * 25 + '9,"30\n').encode() + b"\xff,red,1,yes\n",
    "header only": HEADER.encode(),
    "empty": b"",
    "bad header": b"id,age,colour,score,y\n" + ROW.encode(),
}


def outcome(data: bytes | io.BytesIO, schema: Any = SCHEMA, columnar: bool = True) -> tuple[Any, ...]:
    try:
        e = parse_and_encode(data, schema, columnar=columnar)
    except DatasetValidationError as error:
        return ("error", error.column, error.line, error.message)
    return ("ok", e.n, e.content_hash)


@pytest.fixture
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 3 bytes, and chunks of the minimum row count, so every boundary is crossed."""
    monkeypatch.setattr(encoding, "_READ_BLOCK", 3)
    monkeypatch.setattr(encoding, "_CHUNK_CELLS", 1)


@pytest.mark.parametrize("name", sorted(FILES))
def test_block_and_chunk_boundaries_do_not_change_results_or_errors(name, monkeypatch):
    whole = outcome(FILES[name])
    monkeypatch.setattr(encoding, "_READ_BLOCK", 3)
    monkeypatch.setattr(encoding, "_CHUNK_CELLS", 1)
    assert outcome(FILES[name]) == whole
    assert outcome(io.BytesIO(FILES[name])) == whole
    assert outcome(FILES[name], columnar=False) == whole  # the columnar path's result or error is the exact one


def test_first_error_in_file_order_is_reported_across_chunks(tiny_chunks):
    assert outcome(FILES["two errors in one late chunk"])[1:3] == ("score", 42)
    assert outcome(FILES["cell error before field count"])[1:3] == ("y", 22)
    assert outcome(FILES["bad utf-8 late"])[1:3] == (None, 35)
    assert outcome(FILES["cell error before bad utf-8"])[1:3] == ("y", 5)


class _Unseekable(io.RawIOBase):
    """A stream that cannot seek (no row bound is known in advance: the matrix grows)."""

    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer: Any) -> int:
        chunk = self._inner.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def test_file_objects_seekable_or_not_encode_like_bytes(tiny_chunks):
    data = (HEADER + ROW * 3000).encode()
    expected = parse_and_encode(data, SCHEMA)
    for source in (io.BytesIO(data), io.BufferedReader(_Unseekable(data))):
        e = parse_and_encode(source, SCHEMA)
        assert e.content_hash == expected.content_hash and e.n == 3000
        np.testing.assert_array_equal(e.X, expected.X)
        assert not e.X.flags.writeable and not e.y.flags.writeable


def test_content_hash_is_unchanged_from_the_previous_encoder():
    """Pinned value computed by the encoder before streaming: stored datasets keep their hashes."""
    data = (HEADER + "1,30,red,1,yes\n2,70,blue,-2,no\n3,100,green,5,yes\n").encode()
    assert parse_and_encode(data, SCHEMA).content_hash == (
        "486bdf9f6274f8b4fa9f1345cfc31f2012f923f3f648a77f870032d8483b71aa"
    )


def test_matrix_over_max_matrix_bytes_is_refused_naming_the_setting(tiny_chunks):
    data = (HEADER + ROW * 100).encode()
    row_bytes = (DatasetSchema.model_validate(SCHEMA).dimension + 1) * 8
    assert parse_and_encode(data, SCHEMA, max_matrix_bytes=100 * row_bytes).n == 100
    with pytest.raises(DatasetTooLargeError) as caught:
        parse_and_encode(data, SCHEMA, max_matrix_bytes=99 * row_bytes)
    assert caught.value.setting == "max_matrix_bytes" and caught.value.limit == 99 * row_bytes
    assert "max_matrix_bytes" in str(caught.value) and "red" not in str(caught.value)


def test_chunk_rows_shrink_with_the_number_of_columns(monkeypatch):
    """The cells parsed into Python strings at a time are bounded: a chunk never holds more than
    max(16 rows, _CHUNK_CELLS cells)."""
    seen: list[int] = []
    original = encoding._encode

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["n"])
        return original(*args, **kwargs)

    monkeypatch.setattr(encoding, "_encode", spy)
    monkeypatch.setattr(encoding, "_CHUNK_CELLS", 100)
    parse_and_encode((HEADER + ROW * 70).encode(), SCHEMA, columnar=False)  # 5 columns: 20 rows per chunk
    assert seen == [20, 20, 20, 10]


# ---- linear-time schema validation ---------------------------------------------------------------------------


def wide(features: int, duplicate: bool = False) -> dict[str, Any]:
    obj = copy.deepcopy(SCHEMA)
    obj["features"] = [{"name": f"f{i}", "type": "numeric", "lower": 0, "upper": 1} for i in range(features)]
    if duplicate:
        obj["features"] += [{"name": "f7", "type": "ignore"}, {"name": "f3", "type": "ignore"}]
    return obj


def test_duplicate_names_are_found_among_100000_features():
    """Correctness of the Counter-based check at the size of the issue (the old ``list.count`` scan took minutes
    here; the real-server test in tests/api/test_api_hostile_input.py checks the event loop stays free)."""
    assert DatasetSchema.model_validate(wide(100_000)).dimension == 100_000
    with pytest.raises(ValidationError, match=r"duplicate feature names: \['f3', 'f7'\]"):
        DatasetSchema.model_validate(wide(100_000, duplicate=True))

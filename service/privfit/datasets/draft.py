"""Draft a dataset's public schema from its CSV or Parquet file, on the data owner's machine (issue 36).

Writing a schema by hand for a 40-column file is the largest first-hour cost of an upload. :func:`draft_schema`
reads the file (pyarrow, in batches) and writes what can be read from it without publishing private values:

* **names and types**: every column's name from the header (CSV) or the file's schema (Parquet); a column of numbers
  is ``numeric``, a column of text ``categorical``; ``--ignore`` columns are ``ignore`` and never read.
* **categorical levels** from the file, in NFC (:mod:`privfit.text`), sorted (integer codes by value, other text by
  code point). Levels are part of the PUBLIC schema: the owner must check that each is a public category (a
  codebook's list), so the draft refuses a text column with more than ``max_levels`` distinct values, or one whose
  values are (nearly) all distinct — an identifier or free text — instead of listing them, and notes columns with
  levels seen in fewer than :data:`RARE_COUNT` rows (a level one person holds identifies them).
* **numeric bounds are never read from the data**: a bound set to the data's minimum or maximum publishes one
  individual's value (the oldest person's age, the largest income) in a public schema, and DESIGN §1.2 allows
  bounds only from the owner's public knowledge or an accounted DP release. So the draft writes either

  - ``bounds="placeholder"`` (the default): ``"lower"``/``"upper"`` are strings starting with
    :data:`PLACEHOLDER_PREFIX` that the owner replaces with numbers from the codebook; the upload refuses a schema
    that still holds one (a 422 naming the field: a bound must be a number); or
  - ``bounds="derive"``: the same wide, data-independent range [−W, W] (``wide_bound``, default
    :data:`DEFAULT_WIDE_BOUND`) for every numeric column and ``"preprocessing": {"share": …}`` declared, so that the
    upload's private preprocessing (:mod:`privfit.datasets.preprocessing`, docs/datasets.md) derives each column's
    clip range and log1p from DP histograms within that range. A coarser start than codebook bounds: the grid's 32
    bins then span the whole range, and a column too small or too flat for the noise keeps [−W, W].

  The budget (``epsilon``, ``delta``) and, under ``missing="impute"``, each numeric feature's ``fill`` are the
  owner's public choices: placeholders too unless given.

Every ambiguity is a :class:`DraftError` naming the column, never a guess: a column that mixes numbers and text,
integer codes with few distinct values (categories or a count? ``categorical``/``numeric`` choose), an empty column,
duplicate, non-NFC or hidden-character names, NaN or infinite numbers, missing cells without ``missing="impute"``,
an unknown label column, a label no model fits (one class, over :data:`~privfit.datasets.schema.MAX_CLASSES`,
missing cells, a type no model reads), a binary label whose positive class is not conventional (``positive``), and
a file that is not a CSV or a Parquet file. The result is checked against :class:`DatasetSchema` with its
placeholders filled, so a draft is an upload away from a valid schema.

The messages and notes go to the owner only, on their machine, and may say how many rows a column has; no value of
a numeric column is ever read into them or into the schema.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from privfit.text import describe_character, nfc, refused_character

from .schema import DEFAULT_PREPROCESSING_SHARE, MAX_CLASSES, CsvOptions, DatasetSchema

__all__ = [
    "CODE_LEVELS",
    "DEFAULT_MAX_LEVELS",
    "DEFAULT_WIDE_BOUND",
    "PLACEHOLDER_PREFIX",
    "RARE_COUNT",
    "Draft",
    "DraftError",
    "draft_schema",
    "unfilled",
]

PLACEHOLDER_PREFIX = "FILL IN:"
"""How every placeholder string of a draft starts (:func:`unfilled` finds them)."""
DEFAULT_MAX_LEVELS = 50
"""A text column with more distinct values than this is refused as an identifier or free text."""
CODE_LEVELS = 10
"""An integer column with at most this many distinct values may be a numeric code of categories: the owner chooses."""
IDENTIFIER_SHARE = 0.9
"""A text column whose distinct values are at least this share of its non-missing cells is (nearly) one per row."""
IDENTIFIER_MIN_ROWS = 20
"""… counted only from this many non-missing cells on (a small file's categories are naturally spread)."""
RARE_COUNT = 5
"""Levels seen in fewer rows than this are pointed out: a level that few people hold can identify them."""
DEFAULT_WIDE_BOUND = 1e6
"""W of ``bounds="derive"``: every numeric column is declared on [−W, W] for private preprocessing to narrow."""
MAX_NAME_LENGTH = 200
"""The schema's limit on a column name (:data:`privfit.datasets.schema.Name`)."""

_BATCH_ROWS = 65_536
_CSV_BLOCK_BYTES = 1 << 20
_PARQUET_MAGIC = b"PAR1"
_CSV_SUFFIXES = frozenset({".csv", ".tsv", ".txt"})
_PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})
# what the upload's CSV encoder counts as a number (privfit.datasets.encoding._NUMBER, anchored for Arrow's RE2)
_NUMBER = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
_INTEGER = r"^[+-]?[0-9]+$"
_NON_FINITE = r"^[+-]*(?:nan|inf|infinity)$"  # the encoder's non-finite words (lower case, signs stripped)
_INTEGER_TEXT = re.compile(_INTEGER)
# two-class labels whose positive class is conventional (compared in lower case), else ``positive`` must say
_CONVENTIONAL_POSITIVE: dict[frozenset[str], str] = {
    frozenset(pair): pair[0]
    for pair in (("yes", "no"), ("y", "n"), ("true", "false"), ("t", "f"), ("1", "0"), ("positive", "negative"))
}

Bounds = Literal["placeholder", "derive"]
Missing = Literal["reject", "impute"]


class DraftError(ValueError):
    """An ambiguity or a problem the owner must resolve before a schema can be drafted: a one-line message naming
    the column (``column``, or None for the file itself)."""

    def __init__(self, message: str, column: str | None = None) -> None:
        super().__init__(message)
        self.column = column


@dataclass(frozen=True)
class Draft:
    """A drafted schema (a JSON document in the upload's format, placeholders included), the notes the owner must
    read before uploading it, and the file's row count n (public metadata, DESIGN §1.1)."""

    schema: dict[str, Any]
    notes: tuple[str, ...]
    rows: int

    @property
    def placeholders(self) -> list[str]:
        """The fields still to fill in (:func:`unfilled`)."""
        return unfilled(self.schema)

    def to_json(self) -> str:
        """The schema as indented JSON text, non-ASCII names and levels as written (UTF-8)."""
        return json.dumps(self.schema, indent=2, ensure_ascii=False) + "\n"


def unfilled(document: Any, path: str = "") -> list[str]:
    """The dotted paths (``features.2.lower``, ``budget.epsilon``) of the placeholders left in a drafted schema."""
    if isinstance(document, str):
        return [path] if document.startswith(PLACEHOLDER_PREFIX) else []
    if isinstance(document, Mapping):
        items: Iterable[tuple[str, Any]] = ((str(k), v) for k, v in document.items())
    elif isinstance(document, list):
        items = ((str(i), v) for i, v in enumerate(document))
    else:
        return []
    return [found for key, value in items for found in unfilled(value, f"{path}.{key}" if path else key)]


# --------------------------------------------------------------------------------------------------
# profiling: what each column holds, batch by batch
# --------------------------------------------------------------------------------------------------


@dataclass
class _Profile:
    """What the draft learns about one column. ``kind`` is the column's physical type: ``"text"`` for every CSV
    column (cells are text; numbers are recognised as the upload's encoder does) and a Parquet string column,
    ``"integer"``/``"floating"`` for a Parquet numeric column, ``"other"`` for any other Parquet type."""

    name: str
    kind: Literal["text", "integer", "floating", "other"]
    type_name: str
    cap: int
    missing: int = 0
    numbers: int = 0
    integers: int = 0
    non_finite: int = 0
    texts: int = 0
    counts: Counter[str] | None = field(default_factory=Counter)  # distinct values → rows; None past ``cap``

    @property
    def present(self) -> int:
        return self.numbers + self.non_finite + self.texts

    def add_values(self, values: Any) -> None:
        """Count the distinct (stripped, NFC) values of an Arrow array of present cells, until there are more than
        ``cap`` of them (then only "many" is known: :attr:`counts` becomes None)."""
        if self.counts is None or len(values) == 0:
            return
        import pyarrow.compute as pc

        distinct = pc.value_counts(values)
        if len(distinct) > 4 * self.cap:  # NFC can merge a few spellings, not that many
            self.counts = None
            return
        for value, count in zip(
            distinct.field("values").to_pylist(), distinct.field("counts").to_pylist(), strict=True
        ):
            self.counts[nfc(str(value).strip())] += count
        if len(self.counts) > self.cap:
            self.counts = None


def _sum(mask: Any) -> int:
    import pyarrow.compute as pc

    return int(pc.sum(mask).as_py() or 0)


def _profile_text(profile: _Profile, column: Any, na: Any, numbers: bool) -> None:
    """Add one batch of a text column: stripped cells in ``na`` (or null) are missing; with ``numbers`` (a CSV) the
    rest are numbers, non-finite words or text by the encoder's rules, else all text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    trimmed = pc.utf8_trim_whitespace(column)
    missing = pc.or_kleene(pc.is_null(trimmed), pc.is_in(trimmed, value_set=na))
    present = pc.filter(trimmed, pc.invert(missing))
    profile.missing += _sum(missing)
    if numbers:
        number = _sum(pc.match_substring_regex(present, _NUMBER))
        non_finite = _sum(pc.match_substring_regex(present, _NON_FINITE, ignore_case=True))
        profile.numbers += number
        profile.integers += _sum(pc.match_substring_regex(present, _INTEGER))
        profile.non_finite += non_finite
        profile.texts += len(present) - number - non_finite
    else:
        profile.texts += len(present)
    profile.add_values(present)


def _profile_numbers(profile: _Profile, column: Any) -> None:
    """Add one batch of a Parquet integer or floating column: nulls are missing, NaN and ±∞ non-finite."""
    import pyarrow.compute as pc

    present = pc.drop_null(column)
    profile.missing += len(column) - len(present)
    if profile.kind == "floating":
        finite = pc.filter(present, pc.is_finite(present))
        profile.non_finite += len(present) - len(finite)
        profile.numbers += len(finite)
        present = finite
    else:
        profile.numbers += len(present)
        profile.integers += len(present)
    profile.add_values(present)


def _check_name(name: str, parquet: bool) -> str:
    """A column name as the upload matches it (a CSV header stripped; a Parquet name as written), or a
    :class:`DraftError` for one the schema cannot declare."""
    if not parquet:
        name = name.strip()
    if name == "":
        raise DraftError("a column has an empty name: give every column a name in the header", "")
    char = refused_character(name)
    if char is not None:
        raise DraftError(
            f"column {name!r}: its name contains {describe_character(char)} (an invisible or control character): "
            "rename it",
            name,
        )
    if nfc(name) != name:
        raise DraftError(
            f"column {name!r}: its name is not in Unicode NFC (an accent written as a separate combining "
            "character): rename it in NFC, e.g. with unicodedata.normalize('NFC', name)",
            name,
        )
    if parquet and name != name.strip():
        raise DraftError(f"column {name!r}: its name has leading or trailing whitespace: rename it", name)
    if len(name) > MAX_NAME_LENGTH:
        raise DraftError(f"column {name[:40]!r}…: its name is longer than {MAX_NAME_LENGTH} characters", name)
    return name


def _check_unique(names: Sequence[str]) -> None:
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    if duplicates:
        raise DraftError(
            f"column {duplicates[0]!r} appears more than once in the file (names are compared after stripping and "
            "NFC): rename the copies",
            duplicates[0],
        )


def _is_parquet(path: Path) -> bool:
    """Parquet by content (the ``PAR1`` magic number); a CSV by its name; anything else is refused."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as error:
        raise DraftError(f"{path}: cannot be read: {error.strerror or error}") from None
    suffix = path.suffix.lower()
    if head == _PARQUET_MAGIC:
        return True
    if suffix in _PARQUET_SUFFIXES:
        raise DraftError(f"{path}: not a Parquet file (it does not start with the Parquet magic number PAR1)")
    if suffix not in _CSV_SUFFIXES:
        raise DraftError(
            f"{path}: not a CSV or Parquet file: the draft reads a CSV (.csv, .tsv, .txt) or a Parquet file "
            "(.parquet); export the table as one of them"
        )
    return False


def _arrow_error(path: Path, error: Exception) -> DraftError:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if "utf8" in text.lower() or "utf-8" in text.lower():
        return DraftError(f"{path}: not a UTF-8 text file, so not a CSV the upload reads ({text})")
    return DraftError(f"{path}: not a CSV or Parquet file the draft can read: {text}")


def _csv_profiles(
    path: Path, delimiter: str, ignored: set[str], cap: int, na: Sequence[str]
) -> tuple[list[str], dict[str, _Profile], int]:
    """Read a CSV as text, cell by cell classified (module docstring); its column names, profiles and row count."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    parse = pa_csv.ParseOptions(delimiter=delimiter, newlines_in_values=True)
    read = pa_csv.ReadOptions(block_size=_CSV_BLOCK_BYTES)
    try:
        with pa_csv.open_csv(path, read_options=read, parse_options=parse) as probe:
            raw = list(probe.schema.names)
    except (pa.ArrowException, OSError) as error:
        raise _arrow_error(path, error) from None
    names = [_check_name(name, parquet=False) for name in raw]
    _check_unique(names)
    if len(names) == 1 and delimiter == ",":
        for other in (";", "\t", "|"):
            if other in raw[0]:
                raise DraftError(
                    f"{path}: the header has a single column {names[0][:60]!r}: is the file separated by "
                    f"{other!r}? Pass --delimiter {other!r}"
                )
    used = [r for r, name in zip(raw, names, strict=True) if name not in ignored] or raw[:1]  # [] would read all
    convert = pa_csv.ConvertOptions(
        column_types={r: pa.string() for r in raw}, include_columns=used, null_values=[],
        strings_can_be_null=False, quoted_strings_can_be_null=False,
    )  # fmt: skip
    profiles = {
        name: _Profile(name, "text", "text", cap) for r, name in zip(raw, names, strict=True) if name not in ignored
    }
    clean = dict(zip(raw, names, strict=True))
    na_array = pa.array(list(na), type=pa.string())
    rows = 0
    try:
        with pa_csv.open_csv(path, read_options=read, parse_options=parse, convert_options=convert) as reader:
            for batch in reader:
                rows += batch.num_rows
                for raw_name, column in zip(batch.schema.names, batch.columns, strict=True):
                    if clean[raw_name] in profiles:  # else the one column read to count the rows
                        _profile_text(profiles[clean[raw_name]], column, na_array, numbers=True)
    except (pa.ArrowException, OSError) as error:
        raise _arrow_error(path, error) from None
    return names, profiles, rows


def _parquet_profiles(
    path: Path, ignored: set[str], cap: int, na: Sequence[str]
) -> tuple[list[str], dict[str, _Profile], int]:
    """Read a Parquet file's used columns in batches; its column names, profiles and row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        arrow_schema = parquet.schema_arrow
    except (pa.ArrowException, OSError) as error:
        raise _arrow_error(path, error) from None
    names = [_check_name(name, parquet=True) for name in arrow_schema.names]
    _check_unique(names)
    profiles: dict[str, _Profile] = {}
    for column in arrow_schema:
        if column.name in ignored:
            continue
        value_type = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        if pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
            kind: Literal["text", "integer", "floating", "other"] = "text"
        elif pa.types.is_integer(value_type):
            kind = "integer"
        elif pa.types.is_floating(value_type):
            kind = "floating"
        else:
            kind = "other"
        profiles[column.name] = _Profile(column.name, kind, str(column.type), cap)
    na_array = pa.array(list(na), type=pa.string())
    readable = [name for name, profile in profiles.items() if profile.kind != "other"]
    rows = parquet.metadata.num_rows
    try:
        for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=readable) if readable else ():
            for name, column in zip(batch.schema.names, batch.columns, strict=True):
                profile = profiles[name]
                if profile.kind == "text":
                    _profile_text(profile, column, na_array, numbers=False)
                else:
                    _profile_numbers(profile, column)
    except (pa.ArrowException, OSError) as error:
        raise _arrow_error(path, error) from None
    return names, profiles, rows


# --------------------------------------------------------------------------------------------------
# deciding each column
# --------------------------------------------------------------------------------------------------


def _placeholder(what: str) -> str:
    return f"{PLACEHOLDER_PREFIX} {what}"


def _level_order(levels: Iterable[str]) -> list[str]:
    """Integer codes by value ("2" before "10"), other levels by code point; NFC throughout."""
    levels = list(levels)
    if levels and all(_INTEGER_TEXT.fullmatch(level) for level in levels):
        return sorted(levels, key=lambda level: (int(level), level))
    return sorted(levels)


@dataclass(frozen=True)
class _Choices:
    categorical: frozenset[str]
    numeric: frozenset[str]
    max_levels: int
    parquet: bool


def _levels(profile: _Profile, choices: _Choices, label: bool = False) -> list[str]:
    """The levels of a text column (the classes of a label), refused if they would publish identifiers or hidden
    text, or if a label has more classes than a model fits."""
    name, counts = profile.name, profile.counts
    role = "label" if label else "column"
    if label and (counts is None or len(counts) > MAX_CLASSES):
        many = "more than " if counts is None else ""
        raise DraftError(
            f"label {name!r} has {many}{MAX_CLASSES if counts is None else len(counts)} classes, over the "
            f"{MAX_CLASSES} a categorical label may have: no model fits it (group the classes, or choose another "
            "label)",
            name,
        )
    if counts is None or len(counts) > choices.max_levels:
        raise DraftError(
            f"column {name!r} has more than {choices.max_levels} distinct values — an identifier or free text? Its "
            f"values would be published as levels: --ignore {name}, or raise --max-levels if they are public "
            "categories (a codebook's list)",
            name,
        )
    if (
        name not in choices.categorical
        and profile.present >= IDENTIFIER_MIN_ROWS
        and len(counts) >= IDENTIFIER_SHARE * profile.present
    ):
        what = "choose another label" if label else f"--ignore {name}"
        raise DraftError(
            f"{role} {name!r} has {len(counts)} distinct values in {profile.present} rows — an identifier or free "
            f"text? Its values would be published as levels: {what}, or --categorical {name} if they are public "
            "categories",
            name,
        )
    for level in counts:
        char = refused_character(level)
        if char is not None:
            raise DraftError(
                f"{role} {name!r}: a value contains {describe_character(char)} (an invisible or control character), "
                "which a level may not: clean the column",
                name,
            )
    return _level_order(counts)


def _kind(profile: _Profile, choices: _Choices, role: str) -> Literal["categorical", "numeric"]:
    """Whether a column is categorical or numeric, from its values and the owner's choices; every ambiguity and
    every column no model reads is a :class:`DraftError` naming it."""
    name = profile.name
    if profile.kind == "other":
        raise DraftError(
            f"{role} {name!r} has the Parquet type {profile.type_name}, which no model reads: the upload takes numbers "
            f"from integer or floating columns and categories from string columns; cast it, or --ignore {name}",
            name,
        )
    if profile.present == 0:
        raise DraftError(
            f"{role} {name!r} is empty (every cell is missing): nothing to draft from; --ignore {name} or fill it", name
        )
    if name in choices.categorical:
        if profile.kind != "text":
            raise DraftError(
                f"{role} {name!r}: --categorical needs a string column in a Parquet file (it is {profile.type_name}): "
                "cast the column to string, or declare it numeric",
                name,
            )
        return "categorical"
    if profile.non_finite and not profile.texts:
        raise DraftError(
            f"{role} {name!r} holds NaN or infinite numbers ({profile.non_finite} cells), which the upload refuses: "
            "write them as missing values",
            name,
        )
    numbers, texts = profile.numbers, profile.texts + profile.non_finite
    if name in choices.numeric and profile.kind == "text" and (texts or choices.parquet):
        where = "a string column in a Parquet file" if choices.parquet else f"{texts} of its cells are not numbers"
        raise DraftError(f"{role} {name!r}: --numeric, but {where}", name)
    if profile.kind == "text" and not choices.parquet and numbers and texts:
        raise DraftError(
            f"{role} {name!r} mixes numbers ({numbers} cells) and text ({texts} cells): --categorical {name} if its "
            "values are categories; else fix the file (a missing value must be one of the NA markers '', 'NA', '?')",
            name,
        )
    if profile.kind == "text" and (texts or choices.parquet):
        return "categorical"
    if name in choices.numeric:
        return "numeric"
    counts = profile.counts
    if profile.integers == numbers and counts is not None and len(counts) <= CODE_LEVELS:
        raise DraftError(
            f"{role} {name!r} holds only {len(counts)} distinct integers: codes of categories or a count? "
            f"--categorical {name} (one-hot; its values become public levels) or --numeric {name} (public bounds)",
            name,
        )
    return "numeric"


def _binary(name: str, classes: list[str], positive: str | None) -> dict[str, Any]:
    if positive is not None:
        positive = nfc(positive)
        if positive not in classes:
            raise DraftError(f"label {name!r}: --positive {positive!r} is not one of its classes {classes}", name)
    else:
        positive = _CONVENTIONAL_POSITIVE.get(frozenset(c.lower() for c in classes))
        positive = next((c for c in classes if c.lower() == positive), None)
        if positive is None:
            raise DraftError(
                f"label {name!r} has the classes {classes}: which is the positive one (+1)? Choose with --positive",
                name,
            )
    negative = next(c for c in classes if c != positive)
    return {"name": name, "type": "binary", "positive": positive, "negative": negative}


def _numeric_bounds(name: str, bounds: Bounds, wide_bound: float) -> dict[str, Any]:
    """A numeric column's bounds: placeholders, or the wide range of ``bounds="derive"`` (module docstring)."""
    if bounds == "derive":
        return {"lower": -wide_bound, "upper": wide_bound}
    return {
        "lower": _placeholder(f"lower bound of {name!r} from the codebook, not the data's minimum"),
        "upper": _placeholder(f"upper bound of {name!r} from the codebook, not the data's maximum"),
    }


def _label(profile: _Profile, choices: _Choices, positive: str | None, bounds: Bounds, wide: float) -> dict[str, Any]:
    name = profile.name
    if profile.missing:
        raise DraftError(
            f"label {name!r} has missing cells ({profile.missing} rows): the upload refuses a row without a label; "
            "remove those rows",
            name,
        )
    if _kind(profile, choices, "label") == "numeric":
        if positive is not None:
            raise DraftError(f"label {name!r} is numeric: --positive applies to a two-class label", name)
        return {"name": name, "type": "numeric", **_numeric_bounds(name, bounds, wide)}
    classes = _levels(profile, choices, label=True)
    if len(classes) == 1:
        raise DraftError(f"label {name!r} has a single class: no model fits a constant label", name)
    if len(classes) == 2:
        return _binary(name, classes, positive)
    if positive is not None:
        raise DraftError(f"label {name!r} has {len(classes)} classes: --positive applies to a two-class label", name)
    return {"name": name, "type": "categorical", "levels": classes}


def _self_check(document: dict[str, Any], rows: int) -> None:
    """Validate the draft with its placeholders filled with valid stand-ins, and its budget's δ against n: a
    draft the upload would refuse for another reason than a placeholder is a :class:`DraftError`."""
    trial = json.loads(json.dumps(document))
    stand_ins = {"lower": 0.0, "upper": 1.0, "fill": 0.0, "epsilon": 1.0, "delta": 1.0 / (rows + 1) ** 2}
    for path in unfilled(trial):
        *parents, key = path.split(".")
        container: Any = trial
        for part in parents:
            container = container[int(part)] if isinstance(container, list) else container[part]
        container[key] = stand_ins[key]
    try:
        schema = DatasetSchema.model_validate(trial)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise DraftError(f"the drafted schema is refused by the upload's rules: {where}: {first['msg']}") from None
    too_large = schema.budget.delta_too_large_for(rows) if rows else None
    if too_large is not None and "delta" not in unfilled(document.get("budget", {})):
        raise DraftError(f"--delta: {too_large}")


def draft_schema(
    path: str | Path,
    *,
    label: str | None,
    categorical: Iterable[str] = (),
    numeric: Iterable[str] = (),
    ignore: Iterable[str] = (),
    positive: str | None = None,
    bounds: Bounds = "placeholder",
    wide_bound: float = DEFAULT_WIDE_BOUND,
    missing: Missing = "reject",
    epsilon: float | None = None,
    delta: float | None = None,
    max_levels: int = DEFAULT_MAX_LEVELS,
    delimiter: str = ",",
) -> Draft:
    """Draft the public schema of the CSV or Parquet file at ``path`` with ``label`` as its label (module
    docstring). ``categorical``/``numeric``/``ignore`` are the owner's choices for named columns; ``positive`` the
    positive class of a two-class label; ``bounds`` placeholders or the wide range ``wide_bound`` for private
    preprocessing; ``missing`` the missing-value policy; ``epsilon``/``delta`` the budget (placeholders if None);
    ``max_levels`` the most distinct values a text column may list; ``delimiter`` a CSV's. Raises
    :class:`DraftError` naming the column for every ambiguity."""
    path = Path(path)
    if not (isinstance(max_levels, int) and max_levels >= 1):
        raise DraftError(f"--max-levels must be a positive integer, got {max_levels!r}")
    if not (math.isfinite(wide_bound) and wide_bound > 0):
        raise DraftError(f"--wide-bound must be a positive finite number, got {wide_bound!r}")
    if len(delimiter) != 1 or delimiter in {'"', "\r", "\n"}:
        raise DraftError(f"--delimiter must be one character other than a quote or a newline, got {delimiter!r}")
    chosen = {"categorical": [nfc(c) for c in categorical], "numeric": [nfc(c) for c in numeric],
              "ignore": [nfc(c) for c in ignore]}  # fmt: skip
    seen: dict[str, str] = {}
    for flag, columns in chosen.items():
        for column in columns:
            if column in seen:
                raise DraftError(f"column {column!r} is given to both --{seen[column]} and --{flag}", column)
            seen[column] = flag
    if label is not None and nfc(label) in chosen["ignore"]:
        raise DraftError(f"label {label!r} cannot be ignored: the label is what models predict", label)
    na = CsvOptions().na_values
    cap = max(max_levels, MAX_CLASSES, CODE_LEVELS)
    parquet = _is_parquet(path)
    ignored = set(chosen["ignore"])
    if parquet:
        names, profiles, rows = _parquet_profiles(path, ignored, cap, na)
    else:
        names, profiles, rows = _csv_profiles(path, delimiter, ignored, cap, na)
    for flag, columns in chosen.items():
        for column in columns:
            if column not in names:
                raise DraftError(f"--{flag} {column!r}: no such column (columns: {', '.join(names)})", column)
    if label is None:
        raise DraftError(f"name the label column with --label (columns: {', '.join(names)})")
    label = nfc(label)
    if label not in names:
        raise DraftError(f"unknown label column {label!r} (columns: {', '.join(names)})", label)
    if rows == 0:
        raise DraftError(f"{path}: no data rows (a header alone): nothing to draft from")
    choices = _Choices(frozenset(chosen["categorical"]), frozenset(chosen["numeric"]), max_levels, parquet)
    label_entry = _label(profiles[label], choices, positive, bounds, wide_bound)

    features: list[dict[str, Any]] = []
    categorical_names: list[str] = []
    rare: list[str] = []
    for name in names:
        if name == label:
            continue
        if name in ignored:
            features.append({"name": name, "type": "ignore"})
            continue
        profile = profiles[name]
        kind = _kind(profile, choices, "column")
        if profile.missing and missing == "reject":
            raise DraftError(
                f"column {name!r} has missing cells ({profile.missing} of {rows} rows): --missing impute (a public "
                "fill value per numeric feature; a missing category becomes an all-zero one-hot) or remove those "
                "rows",
                name,
            )
        if kind == "categorical":
            levels = _levels(profile, choices)
            features.append({"name": name, "type": "categorical", "levels": levels})
            categorical_names.append(name)
            if profile.counts is not None and min(profile.counts.values()) < RARE_COUNT:
                rare.append(name)
            continue
        entry: dict[str, Any] = {
            "name": name,
            "type": "numeric",
            **_numeric_bounds(name, bounds, wide_bound),
        }
        if missing == "impute":
            entry["fill"] = _placeholder(f"public value replacing a missing {name!r}, not the data's mean")
        features.append(entry)
    if all(feature["type"] == "ignore" for feature in features):
        raise DraftError("no feature left: every column other than the label is ignored")

    suggested = min(1e-6, float(rows) ** -1.1)
    document: dict[str, Any] = {
        "label": label_entry,
        "features": features,
        "missing": missing,
        "budget": {
            "epsilon": epsilon if epsilon is not None else _placeholder(
                "the dataset's total privacy budget ε (> 0)"
            ),
            "delta": delta if delta is not None else _placeholder(
                f"δ, well below 1/n = 1/{rows} (e.g. {suggested:.2g})"
            ),
        },
    }  # fmt: skip
    if not parquet and delimiter != ",":
        document["csv"] = {"delimiter": delimiter}
    if bounds == "derive":
        document["preprocessing"] = {"share": DEFAULT_PREPROCESSING_SHARE}
    _self_check(document, rows)
    return Draft(document, tuple(_notes(document, bounds, wide_bound, categorical_names, rare)), rows)


def _notes(
    document: dict[str, Any], bounds: Bounds, wide_bound: float, categorical: list[str], rare: list[str]
) -> Iterator[str]:
    """What the owner must read before uploading the draft (printed by ``privfit schema draft``)."""
    numeric = [entry["name"] for entry in (document["label"], *document["features"]) if entry.get("type") == "numeric"]
    if numeric and bounds == "placeholder":
        yield (
            f"numeric bounds of {', '.join(numeric)} are placeholders: fill each from the codebook or domain "
            "knowledge (what the column can hold by its meaning), never from the data's minimum or maximum — the "
            "schema is public, and a bound read off the rows publishes one person's value"
        )
    elif numeric:
        yield (
            f"numeric columns {', '.join(numeric)} are declared on [-{wide_bound:g}, {wide_bound:g}], a range chosen "
            "without reading their values; the upload's private preprocessing (a share of the budget) derives each "
            "one's clip range from DP histograms within it. Check the upload's clipped_cells (a value beyond the "
            "range is clipped: raise --wide-bound) and its preprocessing (a column it derived nothing for keeps the "
            "wide range, which encodes it poorly: declare its codebook bounds instead)"
        )
    if categorical:
        yield (
            f"levels of {', '.join(categorical)} were read from the file and are part of the public schema: check "
            "each is a public category (e.g. in the codebook) and add the codebook's levels the file lacks"
        )
    if rare:
        yield (
            f"{', '.join(rare)} have levels seen in fewer than {RARE_COUNT} rows: a level few people hold can identify "
            "them once published; merge such levels or declare only the codebook's"
        )
    label = document["label"]
    if label["type"] == "binary":
        yield f"label {label['name']!r}: positive class {label['positive']!r} (+1), negative {label['negative']!r}"
    elif label["type"] == "categorical":
        yield f"label {label['name']!r}: {len(label['levels'])} classes, fitted by multinomial logistic regression"
    left = unfilled(document)
    if left:
        yield (
            f"{len(left)} placeholder(s) to fill before uploading (the upload refuses a schema that holds one): "
            + ", ".join(left)
        )

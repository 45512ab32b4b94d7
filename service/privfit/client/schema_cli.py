"""``privfit schema draft FILE``: draft a dataset's public schema from its CSV or Parquet file.

It runs on the data owner's machine, reads nothing but the file and talks to no server (no URL, no key): the rows
stay where they are, and the schema it prints is what the owner reviews, completes and then uploads with
``privfit datasets upload FILE --schema SCHEMA``. The drafting rules — types and levels from the file, numeric
bounds never from it, an error naming the column for every ambiguity — are :mod:`privfit.datasets.draft`'s.

The schema goes to stdout (or ``--output PATH``), the notes the owner must read to stderr, so
``privfit schema draft data.csv --label y > schema.json`` keeps them apart. Exit status: 0 drafted, 2 a bad command
line or an unreadable file, 7 an ambiguity or a problem in the file (one line naming the column), as the client
commands' :data:`privfit.client.cli.EXIT_CODES` say.

This module imports only the standard library at load: ``privfit`` imports it when the ``schema`` command runs,
and the drafting code (pyarrow, pydantic) only when a draft is made.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_OK = 0
EXIT_USAGE = 2  # privfit.client.cli.EXIT_USAGE: bad command line or unreadable local file
EXIT_INVALID = 7  # privfit.client.cli.EXIT_INVALID: an invalid schema or CSV

_DESCRIPTION = (
    "Draft the public schema of a CSV or Parquet file, locally (no server): column names and types, categorical "
    "levels (check each is a public category), and numeric bounds left as placeholders to fill from the codebook "
    "— never from the data's minimum or maximum, which would publish a person's value — or, with --bounds derive, a "
    "wide range that the upload's private preprocessing narrows. Every ambiguity is an error naming the column."
)


def build_parser() -> argparse.ArgumentParser:
    """The ``privfit schema`` command line (its ``draft`` subcommand)."""
    parser = argparse.ArgumentParser(prog="privfit schema", description="Work with dataset schemas, locally.")
    commands = parser.add_subparsers(dest="schema_command", required=True, metavar="{draft}")
    draft = commands.add_parser("draft", help="draft a schema from a CSV or Parquet file", description=_DESCRIPTION)
    draft.add_argument("file", help="the CSV (.csv, .tsv, .txt) or Parquet (.parquet) file")
    draft.add_argument("--label", metavar="COLUMN", help="the label column (required)")
    draft.add_argument("--output", "-o", metavar="PATH", help="write the schema to PATH instead of stdout")
    draft.add_argument("--force", action="store_true", help="with --output: overwrite an existing file")
    choose = "(repeatable)"
    draft.add_argument("--categorical", action="append", default=[], metavar="COLUMN",
                       help=f"declare COLUMN categorical, e.g. integer codes {choose}")  # fmt: skip
    draft.add_argument("--numeric", action="append", default=[], metavar="COLUMN",
                       help=f"declare COLUMN numeric, e.g. a count with few values {choose}")  # fmt: skip
    draft.add_argument("--ignore", action="append", default=[], metavar="COLUMN",
                       help=f"declare COLUMN ignored (never read), e.g. an identifier {choose}")  # fmt: skip
    draft.add_argument("--positive", metavar="CLASS", help="the positive class of a two-class label")
    draft.add_argument("--bounds", choices=["placeholder", "derive"], default="placeholder",
                       help="numeric bounds: placeholders to fill from the codebook (default), or a wide range "
                       "[-W, W] for the upload's private preprocessing to narrow")  # fmt: skip
    draft.add_argument("--wide-bound", type=float, default=None, metavar="W",
                       help="W for --bounds derive (default 1e6)")  # fmt: skip
    draft.add_argument("--missing", choices=["reject", "impute"], default="reject",
                       help="missing values: reject (default) or impute (a fill per numeric)")  # fmt: skip
    draft.add_argument("--epsilon", type=float, default=None, help="the budget's ε (default: a placeholder)")
    draft.add_argument("--delta", type=float, default=None, help="the budget's δ (default: a placeholder)")
    draft.add_argument("--max-levels", type=int, default=None, metavar="K",
                       help="the most distinct values a text column may list as levels (default 50)")  # fmt: skip
    draft.add_argument("--delimiter", default=",", help="a CSV's delimiter (default ,)")
    draft.set_defaults(handler=_draft)
    return parser


def _draft(args: argparse.Namespace) -> int:
    """Draft, write the schema, print the notes; errors are one line on stderr with their exit status."""
    source = Path(args.file)
    if not source.is_file():
        return _error(f"{args.file}: no such file", EXIT_USAGE)
    output = Path(args.output) if args.output else None
    if output is not None and output.exists() and not args.force:
        return _error(f"{args.output} exists: pass --force to overwrite it", EXIT_USAGE)
    from privfit.datasets.draft import DraftError, draft_schema

    options = {"wide_bound": args.wide_bound, "max_levels": args.max_levels}
    try:
        drafted = draft_schema(
            source, label=args.label, categorical=args.categorical, numeric=args.numeric, ignore=args.ignore,
            positive=args.positive, bounds=args.bounds, missing=args.missing, epsilon=args.epsilon,
            delta=args.delta, delimiter=args.delimiter, **{k: v for k, v in options.items() if v is not None},
        )  # fmt: skip
    except DraftError as error:
        return _error(str(error), EXIT_INVALID)
    text = drafted.to_json()
    if output is None:
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.flush()
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as error:
            return _error(f"{args.output}: cannot be written: {error.strerror or error}", EXIT_USAGE)
        print(f"wrote {output} ({drafted.rows} rows read)", file=sys.stderr)
    for note in drafted.notes:
        print(f"note: {note}", file=sys.stderr)
    return EXIT_OK


def _error(message: str, status: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``privfit schema`` on ``argv`` (the arguments after ``schema``); its exit status."""
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())

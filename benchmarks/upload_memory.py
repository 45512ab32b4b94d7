"""Peak memory of a dataset upload against the size of its encoded matrix, on a real ``privfit serve``.

For CSVs of 8, 64 and 256 MiB (ten numeric features and a binary label; the server's ``max_upload_bytes`` is
raised to admit the largest), the server process's VmHWM is reset (``/proc/<pid>/clear_refs``), the file is
uploaded, and the VmHWM growth is printed with the encoded matrix's size n·(d + 1)·8 and their ratio. The goal
(issue 20) is growth ≤ 3 × encoded + 256 MiB.

With ``--partitioned`` the server has the parquet store, a Dask scheduler setting and ``max_matrix_bytes`` of
64 MiB, so every upload over it is encoded batch by batch into 64 MiB partitions (issue 39,
``privfit.datasets.partitioned_upload``, private preprocessing on: two reads of the file): the goal is then the
same rule with one partition in place of the whole matrix, growth ≤ 3 × partition + 256 MiB whatever the size
(e.g. ``--partitioned --sizes 256 1024``; run one size per fresh server to see the first upload's growth: later
uploads reuse what the allocators kept).

Run: ``.venv/bin/python benchmarks/upload_memory.py [--sizes 8 64 256] [--partitioned]`` (SQLite, a temporary
directory).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx
from services import owner_headers, schema, server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "api"))
from process_helpers import listening_pid, status_kib

MiB = 1024 * 1024


def csv_of(target_bytes: int, columns: int = 10) -> tuple[bytes, int]:
    """About ``target_bytes`` of CSV in the layout of :func:`services.schema` (x0..x9, y); (bytes, rows)."""
    header = ",".join(f"x{i}" for i in range(columns)) + ",y\n"
    row = ",".join("0.123456" if i % 2 else "-0.65432" for i in range(columns)) + ",yes\n"
    rows = max(1, (target_bytes - len(header)) // len(row))
    return (header + row * rows).encode(), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 256], help="CSV sizes in MiB")
    parser.add_argument("--partitioned", action="store_true", help="store uploads over 64 MiB by partitions")
    args = parser.parse_args()
    largest = max(args.sizes) * MiB + MiB
    partition = 64 * MiB
    extra = {"PRIVFIT_STORE": "parquet", "PRIVFIT_DASK_SCHEDULER": "local", "PRIVFIT_MAX_MATRIX_BYTES": str(partition),
             "PRIVFIT_STORE_PARTITION_BYTES": str(partition)} if args.partitioned else {}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        url = f"sqlite:///{workdir / 'privfit.db'}"
        headers = owner_headers(url)
        with server(url, workdir, PRIVFIT_MAX_UPLOAD_BYTES=str(largest), PRIVFIT_WORKERS="1", **extra) as base:
            pid = listening_pid(base)
            print(f"{'CSV MiB':>8} {'rows':>10} {'encoded MiB':>12} {'peak growth MiB':>16} {'ratio':>7} "
                  f"{'goal MiB':>9} {'seconds':>8}")  # fmt: skip
            for size in args.sizes:
                content, rows = csv_of(size * MiB)
                encoded = rows * 11 * 8
                Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := current RSS
                before = status_kib(pid, "VmHWM") * 1024
                started = time.perf_counter()
                response = httpx.post(f"{base}/v1/datasets", headers=headers, files={"file": ("d.csv", content)},
                                      data={"schema": json.dumps(schema())}, timeout=600)  # fmt: skip
                seconds = time.perf_counter() - started
                response.raise_for_status()
                growth = status_kib(pid, "VmHWM") * 1024 - before
                unit = partition if args.partitioned and encoded > partition else encoded  # the rows held at once
                goal = 3 * unit + 256 * MiB
                print(f"{len(content) / MiB:8.1f} {rows:10d} {encoded / MiB:12.1f} {growth / MiB:16.1f} "
                      f"{growth / encoded:7.2f} {goal / MiB:9.0f} {seconds:8.2f}")  # fmt: skip
                del content


if __name__ == "__main__":
    main()

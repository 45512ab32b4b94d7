"""Upload throughput end to end against its peers, ``pyarrow.csv.read_csv`` and ``pyarrow.parquet.read_table`` on the
same files, in the same run.

A seeded CSV of about 64 MiB (ten numeric features in [−1, 1] printed with 17 significant digits, a binary label:
the layout of :func:`services.schema`) and the same table as Parquet are written to a temporary directory. The peers
are ``pyarrow.csv.read_csv`` reading the CSV (type inference, Arrow's threads) and ``pyarrow.parquet.read_table``
reading the Parquet file (Arrow's threads), the median of three runs each. Each upload
is a real ``privfit serve`` (one process, the default local store) on SQLite and on a fresh PostgreSQL database:
``POST /v1/datasets`` from the HTTP request to the 201 (multipart parse, validation, encoding, content hash, store
write with fsync, the registering transaction); the median of three uploads, the dataset deleted after each so
every upload writes its matrix. Printed: MB/s (of the CSV's bytes, also for the Parquet upload: the same table) and
the ratio of each upload's throughput to its peer's (CSV upload to read_csv, Parquet upload to read_table; the
Parquet upload also to read_csv, as issue 23 measured it); the goal (issue 40, target 3) is ≥ 0.5 × for both. The
body is sent schema first, as ``httpx``'s ``data=`` fields precede its ``files=``, so a CSV is encoded while it
arrives (privfit.api.upload_stream). The server's peak RSS growth (VmHWM)
during the largest upload is printed against the issue-20 bound 3 × encoded + 256 MiB.

Run: ``.venv/bin/python benchmarks/upload_throughput.py [--mib 64] [--postgres URL | --no-postgres]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from services import owner_headers, schema, server, temporary_database

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "api"))
from process_helpers import listening_pid, status_kib

MiB = 1024 * 1024
ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
RUNS = 3


def write_table(directory: Path, target_bytes: int) -> tuple[Path, Path, int]:
    """The CSV (about ``target_bytes``) and the Parquet file of one seeded table; (csv, parquet, rows)."""
    rng = np.random.default_rng(0)
    per_row = 10 * 21 + 4  # ten "%.17g" values in [-1, 1] with their commas, and the label
    rows = target_bytes // per_row
    x = rng.uniform(-1, 1, size=(rows, 10))
    columns = {f"x{i}": pa.array(x[:, i]) for i in range(10)}
    columns["y"] = pa.array(np.where(x[:, 0] > 0, "yes", "no"))
    table = pa.table(columns)
    csv_path, parquet_path = directory / "table.csv", directory / "table.parquet"
    pa_csv.write_csv(table, csv_path, write_options=pa_csv.WriteOptions(quoting_style="none"))
    pq.write_table(table, parquet_path)
    return csv_path, parquet_path, rows


def median_seconds(action: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def upload(base: str, headers: dict[str, str], path: Path, content_type: str) -> None:
    with path.open("rb") as handle:
        response = httpx.post(f"{base}/v1/datasets", headers=headers, files={"file": (path.name, handle, content_type)},
                              data={"schema": json.dumps(schema())}, timeout=600)  # fmt: skip
    if response.status_code != 201:
        raise RuntimeError(f"upload: {response.status_code} {response.text[:300]}")
    httpx.delete(f"{base}/v1/datasets/{response.json()['id']}", headers=headers, timeout=60).raise_for_status()


def measure(label: str, url: str, workdir: Path, csv_path: Path, parquet_path: Path, rows: int,
            peer: float, parquet_peer: float) -> None:  # fmt: skip
    headers = owner_headers(url)
    size = csv_path.stat().st_size
    with server(url, workdir, PRIVFIT_WORKERS="1") as base:  # the default limits admit the file
        upload(base, headers, csv_path, "text/csv")  # warm-up: imports, connections, the store's marker
        pid = listening_pid(base)
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := current RSS
        before = status_kib(pid, "VmHWM") * 1024
        csv_seconds = median_seconds(lambda: upload(base, headers, csv_path, "text/csv"))
        growth = status_kib(pid, "VmHWM") * 1024 - before
        parquet_seconds = median_seconds(lambda: upload(base, headers, parquet_path, "application/vnd.apache.parquet"))
    encoded = rows * 11 * 8
    print(f"{label:<11} {'CSV upload':<15} {csv_seconds:8.3f} s {size / csv_seconds / 1e6:8.1f} MB/s  ratio to "
          f"read_csv {peer / csv_seconds:5.2f}")  # fmt: skip
    print(
        f"{label:<11} {'Parquet upload':<15} {parquet_seconds:8.3f} s {size / parquet_seconds / 1e6:8.1f} MB/s  "
        f"ratio to read_table {parquet_peer / parquet_seconds:5.2f} (to read_csv {peer / parquet_seconds:5.2f})"
    )
    print(f"{label:<11} peak RSS growth during the CSV uploads {growth / MiB:7.1f} MiB (bound 3 × encoded + 256 = "
          f"{(3 * encoded + 256 * MiB) / MiB:.0f} MiB)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="CSV size in MiB")
    parser.add_argument("--postgres", default=ADMIN_URL, help="admin URL of the PostgreSQL server")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        csv_path, parquet_path, rows = write_table(workdir, args.mib * MiB)
        size = csv_path.stat().st_size
        pa_csv.read_csv(csv_path)  # warm the page cache and Arrow's thread pool
        peer = median_seconds(lambda: pa_csv.read_csv(csv_path))
        pq.read_table(parquet_path)
        parquet_peer = median_seconds(lambda: pq.read_table(parquet_path))
        print(f"CSV {size / MiB:.1f} MiB, {rows} rows (Parquet {parquet_path.stat().st_size / MiB:.1f} MiB); "
              f"load average {Path('/proc/loadavg').read_text().split()[:3]}")  # fmt: skip
        print(f"{'peer':<11} {'pyarrow.csv.read_csv':<15} {peer:8.3f} s {size / peer / 1e6:8.1f} MB/s")
        print(f"{'peer':<11} {'pyarrow.parquet.read_table':<15} {parquet_peer:8.3f} s "
              f"{size / parquet_peer / 1e6:8.1f} MB/s (of the CSV's bytes: the same table)")  # fmt: skip
        measure("SQLite", f"sqlite:///{workdir / 'privfit.db'}", workdir / "sqlite", csv_path, parquet_path, rows,
                peer, parquet_peer)  # fmt: skip
        if not args.no_postgres:
            with temporary_database(args.postgres) as url:
                measure("PostgreSQL", url, workdir / "postgres", csv_path, parquet_path, rows, peer, parquet_peer)
        print(f"load average at the end {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()

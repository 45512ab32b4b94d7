"""The floor under any upload's time: what every ``POST /v1/datasets`` must do whatever privfit's code, against
``pyarrow.csv.read_csv`` and ``pyarrow.parquet.read_table`` on the same files, in the same run.

Issue 40's target 3 asks an upload end to end through HTTP for ≥ 0.5 × the throughput of reading the same file with
pyarrow, i.e. an upload in at most 2 × the peer's time. This script measures three costs no upload path can avoid,
on the files of ``upload_throughput.py`` (a seeded table of about 64 MiB of CSV, and the same table as Parquet):

* **transfer** — the multipart body sent with ``httpx`` (as the benchmark and the Python client send it) to a
  uvicorn server run in another process with privfit's server settings, whose one route reads the body to its end
  and throws it away (no parsing, no spool, no validation);
* **durable store** — writing the encoded matrix (n · (d + 1) float64 values, what the store keeps) to a file
  and ``fsync``-ing it, as crash-consistent uploads must before the 201 (DESIGN: no acknowledged upload is lost);
* **peer** — the pyarrow read of the same file, from the page cache.

Each is the median of three runs. The floor of a CSV upload is the larger of transfer and store, since an upload
can at best encode and write while the body arrives. A Parquet file's metadata (its schema and where each column
chunk is) is its footer, the last bytes of the file, so nothing of it can be decoded before the whole body has
arrived: the floor of a Parquet upload is the transfer plus the decode, and the decode is at least the peer's own
read. Printed: each time, the floor, and the best ratio any upload could reach against its peer (peer time /
floor); target 3 is out of reach on this stack wherever that bound is below 0.5.

Run: ``.venv/bin/python benchmarks/upload_floor.py [--mib 64]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from services import free_port
from upload_throughput import median_seconds, write_table

MiB = 1024 * 1024


def serve(port: int) -> None:
    """The drain server: one route that reads the request body to its end and answers 204 (run in a subprocess)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def drain(request: Request) -> Response:
        received = 0
        async for chunk in request.stream():
            received += len(chunk)
        return Response(status_code=204, headers={"x-received": str(received)})

    uvicorn.run(Starlette(routes=[Route("/drain", drain, methods=["POST"])]), host="127.0.0.1", port=port,
                log_level="warning")  # fmt: skip


def transfer(base: str, path: Path, content_type: str) -> None:
    with path.open("rb") as handle:
        response = httpx.post(f"{base}/drain", files={"file": (path.name, handle, content_type)},
                              data={"schema": "{}"}, timeout=600)  # fmt: skip
    if response.status_code != 204 or int(response.headers["x-received"]) < path.stat().st_size:
        raise RuntimeError(f"drain: {response.status_code} {response.headers}")


def durable_write(directory: Path, payload: np.ndarray) -> None:
    target = directory / "matrix.bin"
    with target.open("wb") as handle:
        handle.write(memoryview(payload))
        handle.flush()
        os.fsync(handle.fileno())
    target.unlink()


def wait_listening(base: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.post(f"{base}/drain", content=b"", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("the drain server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="CSV size in MiB")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
        workdir = Path(tmp)
        csv_path, parquet_path, rows = write_table(workdir, args.mib * MiB)
        pa_csv.read_csv(csv_path)
        read_csv = median_seconds(lambda: pa_csv.read_csv(csv_path))
        pq.read_table(parquet_path)
        read_table = median_seconds(lambda: pq.read_table(parquet_path))
        matrix = np.random.default_rng(1).uniform(-1, 1, size=(rows, 11))
        store = median_seconds(lambda: durable_write(workdir, matrix))
        port = free_port()
        process = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
        try:
            base = f"http://127.0.0.1:{port}"
            wait_listening(base)
            transfer(base, csv_path, "text/csv")
            csv_transfer = median_seconds(lambda: transfer(base, csv_path, "text/csv"))
            parquet_transfer = median_seconds(lambda: transfer(base, parquet_path, "application/vnd.apache.parquet"))
        finally:
            process.terminate()
            process.wait(30)
        sizes = csv_path.stat().st_size / MiB, parquet_path.stat().st_size / MiB
    print(f"CSV {sizes[0]:.1f} MiB, Parquet {sizes[1]:.1f} MiB, "
          f"{rows} rows, encoded {matrix.nbytes / MiB:.1f} MiB; load average "
          f"{Path('/proc/loadavg').read_text().split()[:3]}")  # fmt: skip
    print(f"{'':<10} {'peer':>10} {'transfer':>10} {'store+fsync':>12} {'floor':>10} {'best ratio':>11}")
    floors = (("CSV", read_csv, csv_transfer, max(csv_transfer, store)),
              ("Parquet", read_table, parquet_transfer, parquet_transfer + read_table))  # fmt: skip
    for label, peer, moved, floor in floors:
        print(f"{label:<10} {peer:9.3f}s {moved:9.3f}s {store:11.3f}s {floor:9.3f}s {peer / floor:11.2f}")
    print("target 3: an upload's ratio to its peer >= 0.5; it is out of reach wherever the best ratio is below 0.5")


if __name__ == "__main__":
    main()

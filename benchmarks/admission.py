"""Request-path throughput and latency under 32 concurrent keep-alive clients, on SQLite and PostgreSQL.

    python benchmarks/admission.py [--requests 3200] [--clients 32] [--api-workers N] [--only sqlite|postgresql]
                                   [--env PRIVFIT_X=V ...] [--postgres postgresql+psycopg://postgres@127.0.0.1/postgres]

Starts a real `privfit serve` (queue 'none': fits stay queued, no worker competes for the CPU) per database,
registers a synthetic dataset with a large budget, then measures three endpoints in turn, each with ``--clients``
concurrent clients on persistent (keep-alive) connections:

* ``GET /v1/me`` — the peer: authentication and a tiny response, the floor of any authenticated request;
* ``POST /v1/fits/estimate`` for dp_gd — the plan (calibration), the filter's dry run, the cost and outlook JSON;
* ``POST /v1/fits`` for dp_gd — the same plan plus the ledger's admission (lock, filter, job and reservation rows).

It prints requests/s, p50/p99 latency, each endpoint's throughput as a ratio to the peer's in the same run, the
load average before and after, and the CPU seconds the load generator itself used. No thresholds: the goal of
issue 23 (≥ 300 req/s, p99 ≤ 100 ms for estimate and admission) is read off the output.

The load generator is a small asyncio HTTP/1.1 client (:class:`Connection`): one request in flight per connection,
the request bytes prepared once, a response parsed by its Content-Length. A client per request would pay TCP setup
per request, and a heavier client library would take CPU from the server on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
from services import create_database, drop_database, owner_headers, register_dataset, server


class Connection:
    """One keep-alive HTTP/1.1 connection that sends prepared requests and reads their responses."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Send ``request``; returns the response's status and body."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        body = await self.reader.readexactly(length) if length else b""
        return status, body

    def close(self) -> None:
        self.writer.close()


def prepare(base: str, method: str, path: str, headers: dict[str, str], body: dict | None = None) -> bytes:
    """The bytes of one request (kept alive)."""
    host = urlsplit(base).netloc
    payload = b"" if body is None else json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: keep-alive", "Accept: application/json"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


@dataclass(frozen=True)
class Measurement:
    rate: float
    latencies: np.ndarray  # seconds

    def pct(self, q: float) -> float:
        return float(np.percentile(self.latencies, q) * 1e3)


async def measure(base: str, request: bytes, requests: int, clients: int) -> Measurement:
    """``requests`` copies of ``request`` from ``clients`` connections, one in flight each; every answer must be
    200 or 202."""
    parts = urlsplit(base)
    connections = [await Connection.open(parts.hostname or "127.0.0.1", parts.port or 80) for _ in range(clients)]
    latencies: list[float] = []
    remaining = requests

    async def client(connection: Connection) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            status, body = await connection.send(request)
            latencies.append(time.perf_counter() - start)
            if status not in (200, 202):
                raise RuntimeError(f"{request.split(b' ', 2)[1].decode()}: {status} {body[:300]!r}")

    start = time.perf_counter()
    try:
        await asyncio.gather(*(client(c) for c in connections))
    finally:
        for connection in connections:
            connection.close()
    return Measurement(requests / (time.perf_counter() - start), np.array(latencies))


def run(label: str, url: str, workdir: Path, requests: int, clients: int, api_workers: int,
        env: dict[str, str]) -> None:  # fmt: skip
    headers = owner_headers(url)
    extra = {"PRIVFIT_QUEUE": "none", "PRIVFIT_API_WORKERS": str(api_workers), **env}
    with server(url, workdir, **extra) as base:
        dataset = register_dataset(base, headers)
        body = {"dataset_id": dataset, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}
        me = prepare(base, "GET", "/v1/me", headers)
        est = prepare(base, "POST", "/v1/fits/estimate", headers, body)
        fit = prepare(base, "POST", "/v1/fits", headers, body)

        async def scenario() -> dict[str, Measurement]:
            for request in (me, est, fit):  # warm-up: every process, every connection
                await measure(base, request, 4 * clients, clients)
            return {
                "GET /v1/me": await measure(base, me, requests, clients),
                "POST /v1/fits/estimate": await measure(base, est, requests, clients),
                "POST /v1/fits": await measure(base, fit, requests, clients),
            }

        load_before = os.getloadavg()
        cpu = time.process_time()
        results = asyncio.run(scenario())
        cpu = time.process_time() - cpu
        load_after = os.getloadavg()
    log = (workdir / "serve.log").read_text(errors="replace")
    retries = log.count("transient database error, retrying")
    peer = results["GET /v1/me"]
    print(f"{label}: {requests} requests per endpoint, {clients} keep-alive clients, api workers "
          f"{api_workers}; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; "
          f"load generator CPU {cpu:.1f} s; database retries in the server log {retries}")  # fmt: skip
    for name, m in results.items():
        print(f"  {name:<24} {m.rate:7.1f} req/s  p50 {m.pct(50):6.1f} ms  p99 {m.pct(99):6.1f} ms"
              f"  throughput / GET /v1/me {m.rate / peer.rate:5.2f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3200)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--api-workers", type=int, default=2, help="PRIVFIT_API_WORKERS (the server's default: 2)")
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--only", choices=["sqlite", "postgresql"], help="run one database only")
    parser.add_argument("--env", action="append", default=[], metavar="PRIVFIT_X=V", help="a server setting")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if args.only != "postgresql":
            run("sqlite", f"sqlite:///{workdir / 'bench.db'}", workdir / "sqlite", args.requests, args.clients,
                args.api_workers, env)  # fmt: skip
        if args.only == "sqlite":
            return
        try:
            url = create_database(args.postgres)
        except Exception as error:
            print(f"postgresql  skipped: {error}")
            return
        try:
            run("postgresql", url, workdir / "pg", args.requests, args.clients, args.api_workers, env)
        finally:
            drop_database(args.postgres, url)


if __name__ == "__main__":
    main()

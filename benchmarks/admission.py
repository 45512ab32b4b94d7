"""Fit-admission throughput and latency under 32 concurrent clients, on SQLite and PostgreSQL.

    python benchmarks/admission.py [--requests 640] [--clients 32] [--postgres postgresql+psycopg://postgres@127.0.0.1/postgres]

Starts a real `privfit serve` (no workers: fits stay queued) per database, registers a synthetic dataset with a
large budget, then fires fit requests (each a ledger admission: calibration, lock, RDP filter, reservation)
from concurrent clients. The same run measures the dry-run estimate endpoint (calibration without the ledger
write) as the in-process baseline, and prints requests/s, p50/p99 latency and the ratios. No thresholds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
from services import create_database, drop_database, owner_headers, register_dataset, server


def measure(base: str, path: str, body: dict, headers: dict, requests: int, clients: int) -> tuple[float, list[float]]:
    def one(_: int) -> float:
        with httpx.Client(timeout=120) as client:
            start = time.perf_counter()
            response = client.post(f"{base}{path}", headers=headers, json=body)
            elapsed = time.perf_counter() - start
            if response.status_code not in (200, 202):
                raise RuntimeError(f"{path}: {response.status_code} {response.text[:200]}")
            return elapsed

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = list(pool.map(one, range(requests)))
    return requests / (time.perf_counter() - start), latencies


def run(label: str, url: str, workdir: Path, requests: int, clients: int) -> None:
    headers = owner_headers(url)
    with server(url, workdir, PRIVFIT_QUEUE="none") as base:
        dataset = register_dataset(base, headers)
        body = {"dataset_id": dataset, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}
        measure(base, "/v1/fits/estimate", body, headers, clients, clients)  # warm-up
        est_rate, est_lat = measure(base, "/v1/fits/estimate", body, headers, requests, clients)
        fit_rate, fit_lat = measure(base, "/v1/fits", body, headers, requests, clients)

    def pct(values: list[float], q: float) -> float:
        return float(np.percentile(values, q) * 1e3)

    print(
        f"{label:<11} admission {fit_rate:7.1f} req/s  p50 {pct(fit_lat, 50):7.1f} ms  p99 {pct(fit_lat, 99):7.1f} ms"
        f" | dry-run estimate {est_rate:7.1f} req/s  p50 {pct(est_lat, 50):7.1f} ms  p99 {pct(est_lat, 99):7.1f} ms"
        f" | admission/estimate throughput {fit_rate / est_rate:5.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=640)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        run("sqlite", f"sqlite:///{workdir / 'bench.db'}", workdir / "sqlite", args.requests, args.clients)
        try:
            url = create_database(args.postgres)
        except Exception as error:
            print(f"postgresql  skipped: {error}")
            return
        try:
            run("postgresql", url, workdir / "pg", args.requests, args.clients)
        finally:
            drop_database(args.postgres, url)


if __name__ == "__main__":
    main()

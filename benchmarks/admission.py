"""Fit-admission throughput and latency under 32 concurrent clients, on SQLite and PostgreSQL.

    python benchmarks/admission.py [--requests 640] [--clients 32] [--postgres postgresql+psycopg://postgres@127.0.0.1/postgres]

Starts a real `privfit serve` (no workers: fits stay queued) per database, registers a synthetic dataset with a
large budget, then fires fit requests (each a ledger admission: calibration, lock, RDP filter, reservation)
from concurrent clients. The same run measures the dry-run estimate endpoint (calibration without the ledger
write) as the in-process baseline, and prints requests/s, p50/p99 latency and the ratios. No thresholds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from privfit.api.auth import create_api_key
from privfit.db import make_database
from privfit.db.migrate import upgrade

SCHEMA = {
    "label": {"name": "y", "type": "binary", "positive": "yes", "negative": "no"},
    "features": [{"name": f"x{i}", "type": "numeric", "lower": -1, "upper": 1} for i in range(10)],
    "missing": "reject",
    "budget": {"epsilon": 1e6, "delta": 1e-6},
}


def csv_bytes(n: int = 2000) -> bytes:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(n, 10))
    y = np.where(x[:, 0] > 0, "yes", "no")
    header = ",".join(f"x{i}" for i in range(10)) + ",y"
    return (
        header
        + "\n"
        + "\n".join(",".join(f"{v:.3f}" for v in row) + f",{label}" for row, label in zip(x, y, strict=True))
    ).encode()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
    upgrade(url)
    db = make_database(url)
    _, owner = create_api_key(db, "owner")
    db.dispose()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVFIT_")}
    env.update(PRIVFIT_DATABASE_URL=url, PRIVFIT_DATA_DIR=str(workdir / "store"), PRIVFIT_QUEUE="none")
    server = subprocess.Popen([sys.executable, "-m", "privfit.cli", "serve", "--port", str(port), "--log-level",
                               "warning"], env=env, start_new_session=True)  # fmt: skip
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {owner}"}
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        dataset = httpx.post(f"{base}/v1/datasets", headers=headers, files={"file": ("d.csv", csv_bytes())},
                             data={"schema": json.dumps(SCHEMA)}, timeout=60).json()["id"]  # fmt: skip
        body = {"dataset_id": dataset, "model": "logistic", "solver": "dp_gd", "privacy": {"epsilon": 0.5}}
        measure(base, "/v1/fits/estimate", body, headers, clients, clients)  # warm-up
        est_rate, est_lat = measure(base, "/v1/fits/estimate", body, headers, requests, clients)
        fit_rate, fit_lat = measure(base, "/v1/fits", body, headers, requests, clients)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)

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
        admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
        name = f"privfit_bench_{uuid.uuid4().hex[:8]}"
        try:
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
        except Exception as error:
            print(f"postgresql  skipped: {error}")
            return
        try:
            url = make_url(args.postgres).set(database=name).render_as_string(hide_password=False)
            run("postgresql", url, workdir / "pg", args.requests, args.clients)
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()


if __name__ == "__main__":
    main()

"""A fresh server's first fit against its second, with and without the kernels compiled at install (issue 40).

``dp_otb``, ``dp_lazy_oco`` and objective and output perturbation run numba kernels, compiled on first call and cached
in numba's cache directory (``NUMBA_CACHE_DIR``). ``privfit compile`` (:mod:`privfit.solvers.warmup`, run by
``scripts/setup-venv.sh`` and ``docker/install.sh``) fills that cache at install, and a starting server loads the
kernels in the background (``PRIVFIT_PRELOAD_KERNELS``). For each case this script points ``NUMBA_CACHE_DIR`` at a
fresh directory — left empty (``without compile``: what a fresh install had before), or filled by ``privfit compile``
(``compiled``; and ``compiled+preload``, the default) —, starts ``privfit serve`` on SQLite with the embedded pool,
uploads a synthetic dataset (uploading takes longer than the preload) and runs each solver's fit twice, in turn, and
prints each fit's run time (the fit's own ``started_at`` → ``finished_at``) and the first/second ratio. Goal (issue
40): the first within 1.5 × the second.

Run: ``.venv/bin/python benchmarks/first_fit.py [--rows 20000] [--solvers dp_otb objective_perturbation]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from services import PRIVFIT, owner_headers, register_dataset, server

TERMINAL = {"succeeded", "failed", "cancelled"}


def run_seconds(base: str, headers: dict[str, str], dataset_id: str, solver: str) -> float:
    """One fit of ``solver`` (logistic, ε = 0.5) to the end; its run time in seconds, from the fit's timestamps."""
    body = {"dataset_id": dataset_id, "model": "logistic", "solver": solver, "privacy": {"epsilon": 0.5}}
    response = httpx.post(f"{base}/v1/fits", headers=headers, json=body, timeout=60)
    if response.status_code != 202:
        raise RuntimeError(f"{solver}: not admitted: {response.status_code} {response.text[:300]}")
    fit_id = response.json()["id"]
    deadline = time.monotonic() + 900
    while True:
        fit = httpx.get(f"{base}/v1/fits/{fit_id}", headers=headers, timeout=60).json()
        if fit["status"] in TERMINAL:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{solver}: not finished after 900 s")
        time.sleep(0.05)
    if fit["status"] != "succeeded":
        raise RuntimeError(f"{solver}: {fit['status']}: {fit.get('error')}")

    def moment(field: str) -> datetime:
        value = datetime.fromisoformat(fit[field])
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

    return (moment("finished_at") - moment("started_at")).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--solvers", nargs="+", default=["dp_otb", "objective_perturbation", "output_perturbation"])
    args = parser.parse_args()
    print(f"{'case':<17} {'solver':<24} {'first s':>8} {'second s':>9} {'first/second':>13}")
    cases = {"without compile": "false", "compiled": "false", "compiled+preload": "true"}  # PRIVFIT_PRELOAD_KERNELS
    for case, preload in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            cache = workdir / "numba-cache"
            environment = {"NUMBA_CACHE_DIR": str(cache)}
            if case != "without compile":
                subprocess.run([*PRIVFIT, "compile"], env={**os.environ, **environment}, check=True,
                               stdout=subprocess.DEVNULL)  # fmt: skip
            url = f"sqlite:///{workdir / 'privfit.db'}"
            headers = owner_headers(url)
            os.environ["NUMBA_CACHE_DIR"] = str(cache)  # the server's environment is this process's
            try:
                with server(url, workdir, PRIVFIT_WORKERS="1", PRIVFIT_NOISE_SAMPLER="float",
                            PRIVFIT_PRELOAD_KERNELS=preload) as base:  # fmt: skip
                    dataset_id = register_dataset(base, headers, rows=args.rows)
                    for solver in args.solvers:
                        first = run_seconds(base, headers, dataset_id, solver)
                        second = run_seconds(base, headers, dataset_id, solver)
                        print(f"{case:<17} {solver:<24} {first:8.2f} {second:9.2f} {first / second:13.2f}",
                              flush=True)  # fmt: skip
            finally:
                del os.environ["NUMBA_CACHE_DIR"]
    sys.stdout.flush()


if __name__ == "__main__":
    main()

"""Shared fixtures: a fresh, migrated database per test on SQLite and on PostgreSQL.

PostgreSQL is the local server (127.0.0.1:5432, user postgres, trust auth; override with
PRIVFIT_TEST_POSTGRES_URL). Without it the PostgreSQL cases are skipped with the reason — except under CI=true,
where a missing server is an error: CI must test both dialects.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from privfit.db import Database, make_database
from privfit.db.migrate import upgrade

# The service's default noise sampler is "exact" (OpenDP); the suite runs on "float", whose draws a seed
# reproduces, and the exact sampler has its own tests (tests/privacy/test_noise*.py, tests/api/test_exact_noise.py).
os.environ.setdefault("PRIVFIT_NOISE_SAMPLER", "float")
# Every app and worker the suite starts would load the solvers' kernels in the background (PRIVFIT_PRELOAD_KERNELS, on
# by default): CPU the tests do not use. tests/solvers/test_warmup.py turns it on where it is tested.
os.environ.setdefault("PRIVFIT_PRELOAD_KERNELS", "false")

POSTGRES_URL = os.environ.get("PRIVFIT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
SHARED_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def _admin_engine():
    return create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT", pool_size=1)


#: Tests that must not run beside each other under pytest-xdist (``scripts/test.sh``: ``-n N --dist loadgroup``): the
#: tests of a group run on one worker, one after another, in collection order. Keyed by node id without parameters.
#: The ``cpu_burst`` group: the cancel tests compare a fit's stop with the API's round trip measured just before it,
#: and test_api_processes.py's four busy processes starting between the two would skew the comparison.
#: (A table, not ``@pytest.mark.xdist_group``: pytest-xdist 3.8 groups by renaming a test's node id, which pytest 9
#: ignores, so the marks group nothing; :func:`pytest_xdist_make_scheduler` reads this table instead.)
XDIST_GROUPS = {
    "tests/api/test_api_processes.py::test_two_processes_start_and_serve_beside_four_busy_processes": "cpu_burst",
    "tests/api/test_api_cancel.py::test_cancel_stops_a_running_fit_at_its_next_step": "cpu_burst",
    "tests/api/test_api_cancel.py::test_cancel_reaches_a_fit_running_in_another_process": "cpu_burst",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under ``--dist loadgroup``: pytest-xdist's load-scope scheduler with :data:`XDIST_GROUPS` as the scopes (every
    other test is its own scope, handed to whichever worker is free, as with ``--dist load``)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return XDIST_GROUPS.get(nodeid.split("[", 1)[0], nodeid)

    return GroupScheduling(config, log)


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A migrated template database; each test clones it (CREATE DATABASE … TEMPLATE …)."""
    try:
        admin = _admin_engine()
        with admin.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is required under CI=true and is not reachable at {POSTGRES_URL}: {error}")
        pytest.skip(f"PostgreSQL not reachable at {POSTGRES_URL}: {error}")
    name = f"privfit_tmpl_{uuid.uuid4().hex[:10]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    upgrade(url)
    yield name
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@contextmanager
def _temporary_database(template: str | None) -> Iterator[str]:
    """A fresh PostgreSQL database (a copy of ``template``, or empty), dropped afterwards; its URL."""
    name = f"privfit_test_{uuid.uuid4().hex[:10]}"
    admin = _admin_engine()
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def postgresql_url(postgres_template: str) -> Iterator[str]:
    with _temporary_database(postgres_template) as url:
        yield url


@pytest.fixture
def empty_postgresql_url(postgres_template: str) -> Iterator[str]:
    """A PostgreSQL database with no migration applied (for migration tests)."""
    with _temporary_database(None) as url:
        yield url


@pytest.fixture
def empty_sqlite_url(tmp_path: Path) -> str:
    """A SQLite database file with no migration applied."""
    return f"sqlite:///{tmp_path / 'empty.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest) -> str:
    """An empty database URL (no migration applied), once per dialect."""
    return request.getfixturevalue(f"empty_{request.param}_url")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated once per test process; :func:`sqlite_url` copies it (0.1 s of migrations saved
    per test)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "privfit.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    """A freshly migrated SQLite database: a copy of :func:`sqlite_template` made with SQLite's online backup (every
    page, the journal mode included, whatever its WAL holds), the same file the migrations would have written."""
    target = tmp_path / "privfit.db"
    with closing(sqlite3.connect(sqlite_template)) as source, closing(sqlite3.connect(target)) as copy:
        source.backup(copy)
    return f"sqlite:///{target}"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str:
    """A freshly migrated database URL, once per dialect."""
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    db = make_database(database_url, pool_size=16)
    yield db
    db.dispose()


@pytest.fixture
def adult_dir() -> Path:
    """The UCI Adult files in ../shared/data/adult, or a skip that says where they were looked for."""
    path = (SHARED_DATA / "adult").resolve()
    if not (path / "adult.data").exists():
        pytest.skip(f"Adult dataset not found at {path} (expected ../shared/data/adult beside the repo)")
    return path


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """An S3-compatible server for this test process: moto's server mode (``python -m moto.server``) on a free
    loopback port, with the AWS environment every S3 client reads (test credentials, ``AWS_ENDPOINT_URL``) set for
    the session; its URL. Skipped without moto, except under CI=true."""
    try:
        import moto.server  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"moto[server] and s3fs are test dependencies: {error}")
        pytest.skip(f"moto[server] and s3fs are test dependencies: {error}")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"moto's S3 server did not start on port {port}")
            time.sleep(0.1)
    saved = {name: os.environ.get(name) for name in AWS_ENVIRONMENT}
    os.environ.update({**AWS_ENVIRONMENT, "AWS_ENDPOINT_URL": endpoint})
    try:
        yield endpoint
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.terminate()
        server.wait(10)


#: What an S3 client of the tests reads (moto accepts any credentials); AWS_ENDPOINT_URL is the server's.
AWS_ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": ""}  # fmt: skip


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A fresh bucket on the test S3 server; its ``s3://`` URL."""
    import s3fs

    name = f"privfit-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(skip_instance_cache=True).mkdir(name)
    return f"s3://{name}"


@pytest.fixture(scope="session")
def dask_client() -> Iterator[object]:
    """A Dask cluster of two worker processes (one thread each, 1 GiB) on this machine, and its client; for the
    partitioned fits (privfit.scaleout). Skipped without dask[distributed], except under CI=true."""
    try:
        import distributed
    except ImportError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"dask[distributed] is a test dependency: {error}")
        pytest.skip(f"dask[distributed] is a test dependency: {error}")
    from privfit.scaleout.cluster import local_cluster

    cluster = local_cluster(2, memory_limit="1GiB")
    with distributed.Client(cluster, set_as_default=False) as client:
        yield client
    cluster.close()


@pytest.fixture
def on_dask(dask_client: object, tmp_path: Path):
    """``on_dask(X, y, meta, fit_intercept, partition_bytes=2048)``: the rows stored as partitioned Parquet under
    ``tmp_path`` and summed by :func:`dask_client`'s workers (a ``DaskPartitionedRows``)."""
    from types import SimpleNamespace

    from privfit.datasets.parquet_store import ParquetDatasetStore
    from privfit.scaleout.dask_rows import DaskPartitionedRows, StoredPartitions

    def make(X, y, meta, fit_intercept: bool, partition_bytes: int = 2048, cache_bytes: int = 256 * 1024**2):
        store = ParquetDatasetStore(str(tmp_path / f"parquet-{uuid.uuid4().hex[:8]}"), partition_bytes=partition_bytes)
        key = store.put(SimpleNamespace(X=np.asarray(X, dtype=np.float64), y=np.asarray(y, dtype=np.float64),
                                        units=None))  # fmt: skip
        return DaskPartitionedRows(dask_client, StoredPartitions.of(store, key), meta, fit_intercept, cache_bytes)

    return make

"""Service configuration, read from ``PRIVFIT_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob of a privfit deployment; docs/configuration.md documents the same fields."""

    model_config = SettingsConfigDict(env_prefix="PRIVFIT_", extra="ignore")

    database_url: str = Field("sqlite:///./privfit.db", description="SQLAlchemy URL (SQLite file or PostgreSQL).")
    data_dir: Path = Field(Path("./privfit-data"), description="Directory of the content-addressed dataset store.")
    store: Literal["local", "database", "parquet"] = Field(
        "local",
        description="'local': files under data_dir (one machine); 'database': blobs in the service database, "
        "reachable by every worker that has PRIVFIT_DATABASE_URL; 'parquet': partitioned Parquet under store_url (a "
        "local or shared directory, or s3://bucket/prefix), each partition checkable on its own.",
    )
    store_url: str | None = Field(
        None,
        description="Store 'parquet': an fsspec URL — a directory (file:///path or a path; default data_dir) or "
        "s3://bucket/prefix (the s3 extra; AWS credentials and AWS_ENDPOINT_URL from the environment).",
    )
    store_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Store 'parquet': options of the fsspec filesystem as a JSON object, e.g. "
        '{"client_kwargs": {"endpoint_url": "http://minio:9000"}} for an S3-compatible server.',
    )
    store_partition_bytes: int = Field(
        64 * 1024**2,
        ge=1024,
        le=2 * 1024**3,
        description="Store 'parquet': the float64 bytes of one partition (its rows: this / (8·(d + 1))).",
    )
    dask_scheduler: str | None = Field(
        None,
        description="Fits on a Dask cluster: a scheduler address (tcp://scheduler:8786), or 'local' for a "
        "LocalCluster of dask_local_workers processes started by each worker process. dp_gd, dp_sgd and "
        "dp_distributed fits of datasets in the parquet store then have their gradient sums computed by the cluster's "
        "workers, partition by partition; dp_otb fits of datasets over max_matrix_bytes stream the partitions, and "
        "such uploads are stored by partitions (max_stored_bytes).",
    )
    dask_local_workers: int = Field(2, ge=1, le=64, description="dask_scheduler 'local': its worker processes.")
    dask_timeout_seconds: float = Field(
        600.0,
        gt=0,
        description="The longest one step's partition sums may take on the Dask cluster; beyond it the fit fails "
        "(a cluster without live workers, or whose workers keep dying, must not hold a fit forever).",
    )
    dask_cache_bytes: int = Field(
        256 * 1024**2,
        ge=0,
        description="Decoded partitions a Dask worker keeps in memory between the steps of a fit (least recently "
        "used first out); partitions beyond it are read from the store again at each step.",
    )
    queue: Literal["embedded", "none", "celery"] = Field(
        "embedded",
        description="'embedded': `privfit serve` runs a worker pool; 'none': run `privfit worker` processes that "
        "poll the database; 'celery': the API publishes job ids to the broker and `privfit worker` runs a Celery "
        "worker (any number of machines).",
    )
    broker_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description="Celery broker (queue 'celery'): redis://host:6379/0 or amqp://user:password@host:5672//.",
    )
    celery_queue: str = Field(
        "privfit", min_length=1, description="Queue 'celery': the broker queue the API publishes to and workers read."
    )
    redispatch_seconds: float = Field(
        30.0,
        gt=0,
        description="Queue 'celery': a job still queued this long after its last publication is published again "
        "(messages lost by a broker restart); duplicates are harmless, the job row is claimed once.",
    )
    upload_grace_seconds: float = Field(
        900.0,
        gt=0,
        description="An upload still pending this long (its process died between recording the upload and "
        "registering the dataset) is abandoned: the orphan sweep deletes it and purges its data, and temporary "
        "files of interrupted writes this old are removed. Must exceed the longest time an upload takes to store "
        "its matrix.",
    )
    orphan_sweep_seconds: float = Field(
        300.0,
        gt=0,
        description="How often `privfit serve` sweeps stored data no dataset or pending upload references (also "
        "once at start-up).",
    )
    workers: int = Field(2, ge=1, le=64, description="Worker threads of the embedded pool / `privfit worker`.")
    preload_kernels: bool = Field(
        True,
        description="A process that runs fits (the embedded pool, `privfit worker`, Celery workers) loads the solvers' "
        "numba kernels from numba's cache in a background thread as it starts, so that its first dp_otb, dp_lazy_oco "
        "or perturbation fit does not (it compiles them where `privfit compile` has not cached them).",
    )
    design_cache_bytes: int = Field(
        1024**3,
        ge=0,
        description="A process that runs fits keeps the float32 design of the datasets it fitted with dp_gd, up to "
        "this many bytes (4·n·d each; least recently used first out), so that the next dp_gd fit of a dataset "
        "reuses it instead of preparing it again (privfit.solvers.design_cache). 0: nothing is kept.",
    )
    max_upload_bytes: int = Field(
        2 * 1024**3,
        ge=1024,
        description="Largest accepted dataset upload body (multipart POST /v1/datasets, CSV or Parquet). The body is "
        "spooled to disk and read in blocks, so memory follows the encoded matrix (capped by max_matrix_bytes), not "
        "the body: the default equals the default max_matrix_bytes, as short numeric text encodes to as many bytes "
        "of float64 matrix as it has characters (docs/datasets.md, Upload size and speed).",
    )
    max_predict_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description="Largest accepted body of POST /v1/fits/{id}/predict (rows as JSON, parsed in memory).",
    )
    max_json_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest accepted body of every other request (JSON bodies), and of the upload's schema part; "
        "enforced while the body streams in, before it is parsed.",
    )
    max_features: int = Field(
        10_000,
        ge=1,
        description="Largest encoded dimension d (numeric features + one-hot levels) and largest number of declared "
        "feature columns of an upload; checked from the schema alone, before any row is read (413).",
    )
    max_matrix_bytes: int = Field(
        2 * 1024**3,
        ge=1024,
        description="Largest encoded matrix of an upload, n·(d + 1)·8 bytes; checked as rows stream in, before the "
        "memory is allocated (413).",
    )
    max_stored_bytes: int = Field(
        1024**4,
        ge=1024,
        description="Largest encoded matrix n·(d + 1)·8 of an upload stored by partitions. With store 'parquet' and "
        "dask_scheduler set, an upload over max_matrix_bytes is not refused: it is encoded batch by batch into the "
        "store's partitions (memory: one partition), and only the solvers that read a dataset by partitions fit it "
        "(dp_gd, dp_sgd, dp_distributed, dp_otb). Its body is still capped by max_upload_bytes.",
    )
    max_cell_bytes: int = Field(
        64 * 1024,
        ge=64,
        description="Longest cell of an upload in bytes: a CSV field as written (quotes included), a string value of "
        "a used Parquet column. A CSV is checked in one pass over its bytes before it is parsed; a Parquet file from "
        "its statistics and dictionary page headers, then each dictionary's values before any is turned into "
        "text (422 naming the column and the line or row).",
    )
    max_parquet_page_bytes: int = Field(
        8 * 1024**2,
        ge=64 * 1024,
        description="Largest footer of a Parquet upload, and largest dictionary page (uncompressed) of a used column "
        "and sum of the dictionary pages of a row group's text columns: Arrow holds them whole, so they are checked "
        "from the file's trailer and page headers before anything is decompressed (413). Data pages are bounded by "
        "the row group rule (docs/datasets.md, Parquet files).",
    )
    max_concurrent_uploads: int = Field(
        2,
        ge=1,
        description="Dataset uploads one API process handles at once; beyond it POST /v1/datasets is answered 429 "
        "with Retry-After at once, before its body is read.",
    )
    max_event_streams: int = Field(
        64,
        ge=1,
        description="Open GET /v1/fits/{id}/events streams one API process serves at once; one more is answered 429 "
        "with Retry-After (clients then poll GET /v1/fits/{id}).",
    )
    event_poll_seconds: float = Field(
        0.5,
        gt=0,
        le=60,
        description="How often an event stream reads its fit's row (a change reaches the client within this).",
    )
    event_stream_seconds: float = Field(
        600.0,
        gt=0,
        description="The longest an event stream stays open; it then ends (reason timeout) and the client reconnects.",
    )
    lease_seconds: float = Field(60.0, gt=0, description="A running job whose lease is older is a lost job.")
    heartbeat_seconds: float = Field(5.0, gt=0, description="How often a worker renews its lease and progress.")
    poll_seconds: float = Field(0.5, gt=0, description="How often idle workers look for queued jobs.")
    stop_grace_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="On SIGTERM a process stops taking requests and jobs; running fits stop at their next step and "
        "go back to the queue with their charge (run again from the start later, docs/privacy.md), and the process "
        "exits 0 within this many seconds (give a supervisor's stop timeout a few seconds more).",
    )
    fit_max_attempts: int = Field(
        3,
        ge=1,
        le=10,
        description="Runs of one fit in all: a fit whose worker died or was stopped after reading rows is run again "
        "from the start with the same charge, at most this many times, then fails with its charge kept.",
    )
    cancel_poll_seconds: float = Field(
        0.2,
        gt=0,
        le=60,
        description="A running fit reads its cancel flag from the database at most this often (from its solver's "
        "step callback), so a cancel sent to another process's API reaches it within this time; a cancel sent to "
        "the API process that runs the fit reaches it at its next step.",
    )
    db_retry_attempts: int = Field(
        5,
        ge=1,
        le=100,
        description="Tries in all of an idempotent database operation that fails with a transient fault (a dropped "
        "connection, a server restart, a serialization failure, SQLite busy): reads, job claims, heartbeats, status "
        "changes, fit admission (keyed by the new fit's id); past them the API answers 503 with Retry-After.",
    )
    db_retry_backoff_seconds: float = Field(
        0.05,
        ge=0,
        le=10,
        description="First pause between two tries; it doubles at each try (jittered ×0.5–1.5, at most 2 s).",
    )
    grid: str = Field("dp-accounting-156/v1", description="RDP order grid of new datasets.")
    noise_sampler: Literal["exact", "float"] = Field(
        "exact",
        description="Sampler of every noise draw that reaches a release (privfit.privacy.noise): 'exact' draws "
        "OpenDP's discrete Gaussian and Laplace on a 2^k lattice, so no floating-point low bit can leak the data; "
        "'float' uses numpy's samplers (reproducible from a seed: tests, audits, synthetic data). Every result's "
        "metadata names the sampler used.",
    )
    enable_experimental_solvers: bool = Field(
        False,
        description="List and accept solvers marked experimental (resque_localized); otherwise they are hidden from "
        "GET /v1/solvers and a fit request naming one is refused.",
    )
    resque_localized_max_steps: float = Field(
        50_000_000,
        gt=0,
        description="Feasibility guard of resque_localized: a request whose planned gradient steps exceed this is "
        "refused (with the number in the message) before anything runs.",
    )
    log_format: Literal["json", "text"] = Field(
        "text", description="'json': one JSON object per log line (containers); 'text': human-readable lines."
    )
    api_workers: int = Field(
        2,
        ge=1,
        le=64,
        description="Processes of `privfit serve` (uvicorn workers under gunicorn when more than one), on SQLite as "
        "on PostgreSQL (an in-memory SQLite database runs one). Every admission is one transaction under the "
        "database's lock on the budget, so processes cannot overspend a budget together.",
    )
    worker_boot_timeout_seconds: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="With several API processes (gunicorn): a process that has not finished its start-up, or not "
        "sent its heartbeat (every half of this, from its event loop, which is never blocked), for this long is "
        "killed (logged 'WORKER TIMEOUT') and replaced. Generous: a loaded machine starts processes slowly.",
    )
    api_threads: int = Field(
        8,
        ge=1,
        le=256,
        description="Threads of one API process that run request handlers (blocking database work, planning); more "
        "concurrent requests wait for a thread. Few threads contend less for the interpreter lock: with 40 (the "
        "framework's default) p99 in the 32-client benchmark was 1.7–4× higher (docs/deployment.md).",
    )

    @field_validator("store_url", "dask_scheduler", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """An empty value (``PRIVFIT_DASK_SCHEDULER=``, as compose passes an unset ``${VAR:-}``) is no value."""
        return None if isinstance(value, str) and not value.strip() else value


@lru_cache
def get_settings() -> Settings:
    return Settings()

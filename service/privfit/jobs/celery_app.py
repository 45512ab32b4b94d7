"""Celery dispatch (``PRIVFIT_QUEUE=celery``): job ids over Redis or RabbitMQ; the job row stays the job of record.

The broker carries only job ids, never data or settings. The API publishes a job's id after the transaction that
created the job row committed (:class:`~privfit.jobs.dispatch.CeleryDispatcher`); ``privfit worker`` consumes them
with :func:`run_worker`, and each message runs :func:`privfit.jobs.runner.run_job`, which first CLAIMS the row by a
conditional UPDATE (queued → running, reservation → charge, in one transaction). So:

* a message delivered twice, or redelivered after a worker died, finds the row no longer queued and runs nothing
  (``run_job`` returns None);
* messages are acknowledged LATE (after the task returns) and rejected back to the queue if the worker process
  is lost (``task_acks_late``, ``task_reject_on_worker_lost``), with a prefetch of one: a worker killed between
  receiving and claiming leaves the message to another worker;
* a worker killed after claiming leaves a running row whose lease expires: the sweeper
  (:class:`~privfit.jobs.sweeper.Sweeper`, in every worker process) re-queues it with its charge (never a second
  one) to run again from the start, and publishes it again, up to ``PRIVFIT_FIT_MAX_ATTEMPTS`` runs
  (``states.recover_lost``);
* a worker told to stop (SIGTERM: Celery's warm shutdown) stops its running fits at their next step: each goes back
  to the queue with its charge and is published again at once (:func:`_run_job_task`), so the warm shutdown ends
  within about one step; past ``PRIVFIT_STOP_GRACE_SECONDS`` the process exits anyway and the leases of fits still
  inside a long step expire into the same re-queue;
* messages lost by the broker (Redis restarted without persistence) are published again by the sweeper for jobs
  still queued after ``redispatch_seconds``.

Cancellation and progress go through the database, as in the embedded backend (the same runner): a running fit
polls its cancel flag every ``cancel_poll_seconds`` from its solver's step callback (:mod:`.cancellation`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from functools import lru_cache
from typing import Any

from celery import Celery

from privfit.privacy.noise import configure_sampler
from privfit.settings import Settings

log = logging.getLogger("privfit.jobs")

RUN_JOB_TASK = "privfit.run_job"


def make_celery(settings: Settings) -> Celery:
    """The Celery application of ``settings.broker_url`` (JSON messages; late ack; prefetch 1; one queue)."""
    app = Celery("privfit", broker=settings.broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=settings.celery_queue,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        # Redis redelivers an unacknowledged message after this; the claim makes a redelivery harmless, and
        # running jobs are protected by their lease, so it only needs to exceed the time to claim a job.
        broker_transport_options={"visibility_timeout": max(60, int(4 * settings.lease_seconds))},
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    app.task(name=RUN_JOB_TASK, ignore_result=True)(_run_job_task)
    return app


@lru_cache(maxsize=1)
def _worker_context(settings_json: str) -> tuple[Any, Any, Settings, Any]:
    """This process's database, dataset store, settings and Dask row source (:mod:`privfit.scaleout.source`; one
    engine and one cluster client per process, created on first use)."""
    from privfit.datasets.store import make_store
    from privfit.db import make_database
    from privfit.scaleout.source import row_source
    from privfit.solvers.design_cache import configure_design_cache

    settings = Settings.model_validate_json(settings_json)
    configure_sampler(settings.noise_sampler)
    configure_design_cache(settings.design_cache_bytes)
    db = make_database(
        settings.database_url,
        retry_attempts=settings.db_retry_attempts,
        retry_backoff=settings.db_retry_backoff_seconds,
    )
    return db, make_store(settings, db), settings, row_source(settings)


#: set by :func:`run_worker` before the worker starts consuming; the task reads it
_CURRENT_SETTINGS: dict[str, str] = {}

#: the worker's Celery application, set by :func:`run_worker` (publishes a fit stopped by a shutdown again)
_CURRENT_APP: dict[str, Celery] = {}

#: set when this worker process begins its shutdown (:func:`_on_shutdown`): running fits stop at their next step
_STOPPING = threading.Event()


def _run_job_task(job_id: str) -> str | None:
    """Claim and run one job (see the module docstring); a duplicate or stale message returns None."""
    from privfit.jobs.runner import run_job

    db, store, settings, rows = _worker_context(_CURRENT_SETTINGS["json"])
    worker = f"{socket.gethostname()}:{os.getpid()}:celery:{uuid.uuid4().hex[:8]}"
    status = run_job(db, store, str(job_id), worker, lease_seconds=settings.lease_seconds,
                     heartbeat_seconds=settings.heartbeat_seconds, cancel_poll_seconds=settings.cancel_poll_seconds,
                     max_attempts=settings.fit_max_attempts, stopping=_STOPPING, rows=rows)  # fmt: skip
    if status is None:
        log.info("job message ignored: not queued", extra={"job_id": str(job_id)})
    elif status == "queued":  # stopped by this worker's shutdown: another worker runs it again now
        from .dispatch import CeleryDispatcher

        CeleryDispatcher(_CURRENT_APP.get("app") or make_celery(settings)).job_created(str(job_id))
    return status


def _on_shutdown(grace_seconds: float) -> None:
    """Celery's warm shutdown began (SIGTERM): running fits stop at their next step and are queued again; if the
    process is still alive ``grace_seconds`` later (a fit inside one long step), it exits 0 and that fit's lease
    expires into the same re-queue (:func:`~privfit.jobs.states.recover_lost`)."""
    _STOPPING.set()

    def leave() -> None:
        log.warning("stop grace period over: exiting with fits left to their leases")
        logging.shutdown()
        os._exit(0)

    timer = threading.Timer(grace_seconds, leave)
    timer.daemon = True
    timer.start()


def broker_problem(url: str, timeout: float = 3.0) -> str | None:
    """None if the broker at ``url`` accepts a connection within ``timeout`` seconds, else why not (type: message)."""
    from kombu import Connection

    try:
        with Connection(url, connect_timeout=timeout) as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout)
        return None
    except Exception as error:
        return f"{type(error).__name__}: {error}"


def delete_queue(url: str, queue: str) -> None:
    """Delete the broker queue ``queue`` and its exchange (Celery names the exchange after the queue): an operator's
    clean-up, used by the tests and benchmarks for their private queues."""
    from kombu import Connection, Exchange, Queue

    with Connection(url, connect_timeout=5) as connection:
        channel = connection.default_channel
        if hasattr(channel, "state"):
            # a virtual transport (Redis) deletes only the bindings this channel declared, so declare them (the
            # same as Celery's) first; Redis keeps no exchange apart from those bindings
            Queue(queue, Exchange(queue), routing_key=queue)(channel).declare()
            channel.queue_delete(queue)
        else:
            channel.queue_delete(queue)
            channel.exchange_delete(queue)


def run_worker(settings: Settings, concurrency: int) -> None:
    """Run a Celery worker (thread pool of ``concurrency``) and this process's sweeper until SIGTERM/SIGINT.

    Celery's warm shutdown on SIGTERM stops consuming; the running fits stop at their next step and go back to the
    queue with their charge (:func:`_on_shutdown`), so a scaled-down worker neither loses nor duplicates work and
    stops within ``PRIVFIT_STOP_GRACE_SECONDS``.
    """
    from celery.signals import worker_shutting_down

    from .dispatch import CeleryDispatcher
    from .sweeper import Sweeper

    _CURRENT_SETTINGS["json"] = settings.model_dump_json()
    db, _, _, _ = _worker_context(_CURRENT_SETTINGS["json"])
    app = _CURRENT_APP["app"] = make_celery(settings)
    worker_shutting_down.connect(lambda **_: _on_shutdown(settings.stop_grace_seconds), weak=False)
    sweeper = Sweeper(db, settings, CeleryDispatcher(app))
    sweeper.start()
    if settings.preload_kernels:
        from privfit.solvers.warmup import preload_in_background

        preload_in_background()
    try:
        app.worker_main([
            "worker", "--pool=threads", f"--concurrency={concurrency}", f"--queues={settings.celery_queue}",
            "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
            f"--hostname=privfit-{socket.gethostname()}-{os.getpid()}@%h",
        ])  # fmt: skip
    finally:
        sweeper.stop()
        db.dispose()

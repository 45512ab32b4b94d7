"""How a newly committed job reaches a worker: the dispatch backends behind ``PRIVFIT_QUEUE``.

The job row is committed first; only then is the job announced (:meth:`Dispatcher.job_created`), so a worker never
hears of a job it cannot read, and an announcement that is lost (a crash between commit and publish, a broker
restart) only delays the job: polling workers find every queued row, and Celery workers' sweeper publishes it
again (:class:`~privfit.jobs.sweeper.Sweeper`).

* ``embedded``: wake the worker pool inside ``privfit serve``;
* ``none``: nothing to do, ``privfit worker`` processes poll the jobs table;
* ``celery``: publish the job id to the broker (:mod:`privfit.jobs.celery_app`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from celery import Celery

    from privfit.settings import Settings

    from .worker import WorkerPool

log = logging.getLogger("privfit.jobs")


class Dispatcher(Protocol):
    """Announces committed jobs to the workers."""

    def job_created(self, job_id: str) -> None:
        """``job_id``'s row is committed and queued: make a worker look at it (never raises)."""


class PollingDispatcher:
    """Workers poll the jobs table (``none``), optionally woken at once (``embedded``: the in-process pool)."""

    def __init__(self, pool: WorkerPool | None = None) -> None:
        self.pool = pool

    def job_created(self, job_id: str) -> None:
        if self.pool is not None:
            self.pool.wake()


class CeleryDispatcher:
    """Publishes job ids to the Celery broker (the message is only a job id; see :mod:`.celery_app`)."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def job_created(self, job_id: str) -> None:
        from .celery_app import RUN_JOB_TASK

        try:
            self.app.send_task(RUN_JOB_TASK, args=[job_id], queue=self.app.conf.task_default_queue,
                               retry=True, retry_policy={"max_retries": 3, "interval_start": 0.2})  # fmt: skip
        except Exception as error:  # the job stays queued; the sweeper publishes it again
            log.warning("job not published", extra={"job_id": job_id, "error_type": type(error).__name__})


def make_dispatcher(settings: Settings) -> Dispatcher:
    """The dispatcher of ``settings.queue`` for an API process (the embedded pool is attached by the app)."""
    if settings.queue == "celery":
        from .celery_app import make_celery

        return CeleryDispatcher(make_celery(settings))
    return PollingDispatcher()

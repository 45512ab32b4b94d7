"""Jobs: the DB state machine, the runner (ledger + solver), and the worker pool."""

from .runner import run_job
from .states import cancel, claim, recover_lost
from .worker import WorkerPool

__all__ = ["WorkerPool", "cancel", "claim", "recover_lost", "run_job"]

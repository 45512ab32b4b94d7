"""Test-only fault injection: ``PRIVFIT_TEST_CRASH_AT=<step>`` makes the process kill itself (SIGKILL) at a named
step, so crash-consistency tests can stop a real ``privfit serve`` exactly there.

Never set it in a deployment. Steps (see ``tests/api/test_api_crash_consistency.py``):

* ``upload:pending`` — the pending upload is committed, nothing written to the store yet;
* ``store:partial`` — half of the local store's temporary file is written (and flushed);
* ``upload:training-stored`` — (an upload with a validation split) the training matrix is stored, the validation
  matrix not yet;
* ``upload:stored`` — the matrix (both matrices, for a split upload) is completely stored, the dataset not yet
  registered.
"""

from __future__ import annotations

import os
import signal
from typing import IO, Any

CRASH_AT = "PRIVFIT_TEST_CRASH_AT"


def crash_point(step: str, handle: IO[Any] | None = None) -> None:
    """SIGKILL this process if ``PRIVFIT_TEST_CRASH_AT`` names ``step`` (``handle`` is flushed to disk first, so
    what a crash leaves behind is really there)."""
    if os.environ.get(CRASH_AT) != step:
        return
    if handle is not None:
        handle.flush()
        os.fsync(handle.fileno())
    os.kill(os.getpid(), signal.SIGKILL)

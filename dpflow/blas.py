"""BLAS threading for dense linear algebra: one thread for the many small calls of a pass's blocks and for the
driver's small matrices between passes (``threadpoolctl``, the ``fast`` extra; nothing without it).  Its own
module, below the nodes, which also run small dense algebra on released matrices."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from functools import cache
from typing import Any


@cache
def blas_controller() -> Any:
    """threadpoolctl's controller of the loaded BLAS libraries (built once), or ``None`` without it."""
    try:
        from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]
    except ImportError:
        return None
    return ThreadpoolController()


def one_blas_thread() -> AbstractContextManager[Any] | None:
    """A context in which BLAS runs on one thread, or ``None`` when ``threadpoolctl`` is not installed.

    Many small BLAS calls each on several threads are slow on a busy machine (OpenBLAS's threads wait for
    each other at every call); blocks spread over threads with one BLAS thread each are not.  The limit is
    process-wide while a pass runs (as in scikit-learn), so BLAS calls made meanwhile by other threads of the
    process also run on one thread.
    """
    ctl = blas_controller()
    return None if ctl is None else ctl.limit(limits=1, user_api="blas")


def serial_blas() -> AbstractContextManager[Any]:
    """A context for the driver's small dense linear algebra on released matrices (d x d eigendecompositions and
    least squares between the passes): BLAS on one thread (:func:`one_blas_thread`; nothing without
    ``threadpoolctl``).  On a busy machine a multi-threaded BLAS makes each small call wait for its threads: a
    50 x 50 ``eigh`` took 10 to 30 ms on two shared cores, 0.2 ms on one thread (the same values up to d = 200;
    above, one thread makes them the same on every machine)."""
    limit = one_blas_thread()
    return nullcontext() if limit is None else limit

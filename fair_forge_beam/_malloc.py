"""glibc's ``malloc`` in a process that runs our pipelines: large blocks are mapped and unmapped on
their own, never kept in the heap. No Beam import here (a command sets it before its imports,
beside :func:`fair_forge_beam._gc.tune_gc`); ``fair_forge_beam._beam`` re-exports the names."""
from __future__ import annotations

import os

#: blocks of at least this many bytes get their own memory mapping, returned to the system when
#: freed (glibc's ``M_MMAP_THRESHOLD``; its default starts at 128 KiB and rises, see
#: :func:`tune_malloc`)
MMAP_THRESHOLD = 256 * 1024

#: free memory at the top of a heap that glibc keeps for the next allocations instead of returning
#: it to the system at once (glibc's ``M_TRIM_THRESHOLD``), fixed beside :data:`MMAP_THRESHOLD`:
#: see :func:`tune_malloc`
TRIM_THRESHOLD = 16 * 2**20


def rows_below_mmap_threshold(row_bytes: int) -> int:
    """How many rows of ``row_bytes`` one temporary array may hold and still be cut from the heap:
    the most that stay below :data:`MMAP_THRESHOLD` (at least 1). A block at or above it is mapped
    for itself, and every page of it faulted in (and zeroed by the kernel) again on each allocation:
    a hot loop allocating one per step pays that every step, where a heap block is reused (glibc
    keeps :data:`TRIM_THRESHOLD` of free memory). Sizes the chunks of the Bayesian statistics'
    per-step temporaries (``fair_forge_beam.statistical``; docs/performance.md, "2026-12-07
    (bayes44)"): how many rows go into a chunk changes no number, each row is computed alone."""
    return max(1, (MMAP_THRESHOLD - 1) // max(1, int(row_bytes)))


_M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3
_done = False


def tune_malloc() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD` in this process, once. Returns whether
    it is set (``False``: not glibc, or the user set the threshold, ``MALLOC_MMAP_THRESHOLD_`` or
    ``GLIBC_TUNABLES=glibc.malloc.mmap_threshold``, which is kept).

    Why: glibc raises its threshold to the size of each mapped block that is freed (up to 32 MiB),
    so after the first buffer of Beam's data plane (a worker's outputs are flushed in messages of
    up to 10 MB) every later buffer of that size is cut out of a heap, in whichever of glibc's
    per-thread arenas the thread (gRPC's reader, Beam's sender, the bundle) uses, and the holes stay
    when they are freed. An SDK worker's resident set then keeps growing with the data a stage
    moves, although its live objects do not (issue 26: the Flink worker's peak 1.40x from 100k to
    1M interactions). Fixed, a block of 256 KiB or more is mapped for itself and unmapped when
    freed. Measured on the keyword audit: on Flink (2 workers) the largest SDK worker 741 -> 635 MB
    at 100k interactions and 992 -> 778 MB at 1M (1.34x -> 1.23x from 100k to 1M), outputs
    identical; in one worker of the FnApiRunner (``multi_processing``, its inputs sent in messages
    of 1 MB as Flink's runner does) glibc's freed but kept memory at the session stage's peak
    184 -> 8 MB; ``docs/performance.md``, "Why the workers grew".

    The trimming threshold is fixed too, at :data:`TRIM_THRESHOLD` (a threshold the user set,
    ``MALLOC_TRIM_THRESHOLD_`` or ``GLIBC_TUNABLES=glibc.malloc.trim_threshold``, is kept): setting
    the mmap threshold stops glibc's own adjustment of both, which raises the trimming threshold to
    twice the mmap threshold it reaches (up to 64 MiB), so the trimming threshold stayed wherever the
    process's history had left it — at glibc's initial 128 KiB in a command, which calls this first,
    higher in a process that had freed a large block before. At 128 KiB the heap's top is given back
    and faulted in again around nearly every temporary array of 128-256 KiB (the Bayesian
    bootstraps' rows of 5,000 draws): a 100k Bayesian audit took 2.34 million page faults and 5.0
    CPU s in the kernel (docs/performance.md, "2026-12-06 (later): in one process or one per run").
    Called where
    :func:`~fair_forge_beam._gc.tune_gc` is: the command's process, the launcher, and the
    ``setup`` of the heavy ``DoFn``\\ s (an SDK worker of Flink, Prism, Dataflow or the
    multi-process runner)."""
    global _done
    if _done:
        return True
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "mmap_threshold" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only (musl, macOS: their own allocators)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _done = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    if _done and "MALLOC_TRIM_THRESHOLD_" not in os.environ \
            and "trim_threshold" not in os.environ.get("GLIBC_TUNABLES", ""):
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    return _done

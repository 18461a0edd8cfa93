"""What this machine can hold. An allocation that a parameter sizes is estimated and refused, naming the parameter,
before the work (``fits_memory``, within ``$MATCOMP_MAX_MEMORY_GB`` where set); one that runs out anyway, of memory
or of disk, and a path longer than the system holds, are recognised (``exhausted``), so that a command says so in
one line naming what asked for it: PyTorch's CPU allocator raises a ``RuntimeError`` (not a ``MemoryError``), CUDA's
an ``OutOfMemoryError``, a full disk an ``OSError`` (ENOSPC, EDQUOT) and a path too long one with ENAMETOOLONG."""

from __future__ import annotations

import errno
import math
import os
import re

GIB = 2 ** 30
ENV_MAX_MEMORY_GB = "MATCOMP_MAX_MEMORY_GB"  # GiB an analysis may allocate; default: this machine's memory
ALLOCATOR_FAILURE = re.compile(r"can't allocate memory|not enough memory|out of memory", re.IGNORECASE)


def ram_bytes() -> int:
    """Bytes of memory this machine has."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def memory_limit() -> int:
    """Bytes an analysis may allocate: ``$MATCOMP_MAX_MEMORY_GB`` GiB where set, else this machine's memory."""
    text = os.environ.get(ENV_MAX_MEMORY_GB, "").strip()
    if not text:
        return ram_bytes()
    try:
        gib = float(text)
    except ValueError:
        gib = math.nan
    if not math.isfinite(gib) or gib <= 0:
        raise ValueError(f"${ENV_MAX_MEMORY_GB} must be a number of GiB > 0; got {text!r}")
    return int(gib * GIB)


def _gib(nbytes: float) -> str:
    return f"{nbytes / GIB:,.1f}" if nbytes >= GIB / 10 else f"{nbytes / GIB:.2g}"


def fits_memory(nbytes: float, name: str, value: int) -> None:
    """ValueError naming ``name`` (= ``value``) when the ``nbytes`` it asks for are beyond ``memory_limit()``."""
    limit = memory_limit()
    if nbytes > limit:
        source = f"${ENV_MAX_MEMORY_GB}" if os.environ.get(ENV_MAX_MEMORY_GB, "").strip() else "this machine's memory"
        raise ValueError(f"{name} = {value:,} would need about {_gib(nbytes)} GiB of memory, beyond the "
                         f"{_gib(limit)} GiB here ({source}); ask for fewer")


def exhausted(err: BaseException) -> str | None:
    """"memory" or "disk" if ``err`` says this machine ran out of it, "path" if it cannot hold a path that long,
    else None (any other error)."""
    if isinstance(err, MemoryError) or (isinstance(err, RuntimeError) and ALLOCATOR_FAILURE.search(str(err))):
        return "memory"
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "disk"
    if isinstance(err, OSError) and err.errno == errno.ENAMETOOLONG:
        return "path"
    return None


def exhausted_text(err: BaseException) -> str:
    """``err`` (one that ``exhausted`` recognises) in a few words naming the file or the allocation at fault."""
    kind, name = exhausted(err), str(getattr(err, "filename", None) or "a file")
    if kind == "disk":
        return f"the disk is full ({getattr(err, 'strerror', err)}) writing {name}"
    if kind == "path":
        return f"a path of {len(name):,} characters is too long for this system ({name[:60]}...)"
    return f"out of memory ({(str(err).splitlines() or [type(err).__name__])[0][:160]})"

"""What this machine can hold. An allocation that a parameter sizes is estimated and refused, naming the parameter,
before the work (``check_fits``); one that runs out anyway, of memory or of disk, and a path longer than the system
holds, are recognised (``exhausted``), so that a command says so in one line naming what asked for it: PyTorch's CPU
allocator raises a ``RuntimeError`` (not a ``MemoryError``), CUDA's an ``OutOfMemoryError``, a full disk an
``OSError`` (ENOSPC, EDQUOT) and a path too long one with ENAMETOOLONG."""

from __future__ import annotations

import errno
import os
import re

GIB = 2 ** 30
ALLOCATOR_FAILURE = re.compile(r"can't allocate memory|not enough memory|out of memory", re.IGNORECASE)


def ram_bytes() -> int:
    """Bytes of this machine's memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(needed: float, what: str) -> None:
    """A ValueError, with both figures, if ``what`` (the parameter that sizes it, by name) needs more than this
    machine's memory (``needed`` bytes, an estimate)."""
    have = ram_bytes()
    if needed > have:
        raise ValueError(f"{what} needs about {needed / GIB:,.1f} GiB of memory; this machine has {have / GIB:,.1f}")


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

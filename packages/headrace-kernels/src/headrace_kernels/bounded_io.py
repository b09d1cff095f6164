"""Reading a file that a pipeline names, within bounds: a regular file only (a device such as /dev/zero would be read
forever, a FIFO would block), at most `limit` bytes, read in chunks so that a lying size allocates nothing."""

from __future__ import annotations

import os
import stat


def reason(exc: BaseException) -> str:
    """An OS error's own words (its strerror), else its message."""
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _size_text(size: int) -> str:
    return f"{size / 2**30:.1f} GiB" if size >= 1 << 30 else f"{size:,} bytes"


def read_bounded(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; otherwise a ValueError saying why, for the caller to put
    in its own error with the file's role and name."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not wait for a writer
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise ValueError(f"cannot read it ({reason(exc)})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a device, FIFO or socket"
            raise ValueError(f"is not a regular file ({kind})")
        if info.st_size > limit:
            raise ValueError(f"is {_size_text(info.st_size)}, more than the limit of {_size_text(limit)}")
        parts, size = [], 0
        while size <= limit:
            part = os.read(fd, min(1 << 20, limit + 1 - size))
            if not part:
                break
            parts.append(part)
            size += len(part)
    except OSError as exc:
        raise ValueError(f"cannot read it ({reason(exc)})") from None
    finally:
        os.close(fd)
    if size > limit:  # it grew since fstat
        raise ValueError(f"grew past the limit of {_size_text(limit)}")
    return b"".join(parts)

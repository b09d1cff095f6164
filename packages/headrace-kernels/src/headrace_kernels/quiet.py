"""Silence what native libraries print on stderr while they load (nvImageCodec's missing-GPU-library notes)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile


@contextlib.contextmanager
def native_stderr_captured():
    """Send file descriptor 2 to a temporary file for the block; yields a callable returning what was written."""
    sys.stderr.flush()
    saved = os.dup(2)
    captured = b""
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lambda: captured.decode(errors="replace")
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured = sink.read()

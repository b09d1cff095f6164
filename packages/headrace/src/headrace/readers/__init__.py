"""Readers: the stateful batch ops at the root of a pipeline (files, external sources)."""

from headrace.readers.external import ExternalSource
from headrace.readers.file import FileReader

BATCH_OPS = {"readers.file": FileReader, "external_source": ExternalSource}

__all__ = ["BATCH_OPS", "ExternalSource", "FileReader"]

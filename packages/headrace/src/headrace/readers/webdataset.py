"""`readers.webdataset`: samples of webdataset tar archives, through DALI's index files or by scanning the archives.

A component's extension is the text after the first dot of its base name; a sample is a run of consecutive regular
files sharing the text before it; names whose base name starts with a dot are left out (as DALI's wds2idx). Each
output takes, per sample, the first component whose extension is in its set. The index (format v1.2, as `headrace
wds2idx` and DALI's wds2idx write it; v1.1 lacks the file names) is a line 'v1.2 <samples>' and then one line per
sample of '<ext> <data offset> <size> <file name>' per component. The components of a sample lie one after the other
in the archive, so a sample is read as one span of it.
"""

from __future__ import annotations

import tarfile
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from headrace.errors import SchemaError
from headrace.ops.record_readers import WDS_TYPES
from headrace.output_specs import numpy_dtype
from headrace.readers.recordio import Record, RecordReader, file_size, read_index
from headrace.schema import short_repr
from headrace_kernels.registry import reader

OP = "readers.webdataset"
TAR_BLOCK = 512
INDEX_VERSIONS = ("v1.1", "v1.2")


class Component(NamedTuple):
    """One file of a sample: its extension, where its data starts in the archive, its size and its name."""

    ext: str
    offset: int
    size: int
    name: str


def split_name(path: str) -> tuple[str, str]:
    """(the sample's key, the component's extension): a name cut at the first dot of its base name."""
    dot = path.find(".", path.rfind("/") + 1)
    return (path, "") if dot < 0 else (path[:dot], path[dot + 1:])


def extension_set(ext: str) -> list[str]:
    """The extensions of one `ext` entry, split at ';' as DALI splits it (a trailing ';' adds none)."""
    parts = ext.split(";")
    return parts[:-1] if parts[-1] == "" else parts


def scan_archive(path: str) -> list[list[Component]]:
    """The samples of a tar archive, read from its headers (tarfile); ValueError if it is not a readable tar."""
    samples: list[list[Component]] = []
    last = None
    try:
        with tarfile.open(path, "r:") as archive:
            for member in archive:
                if not member.isreg():
                    continue
                key, ext = split_name(member.name)
                if not key or key.endswith("/"):
                    continue
                if key != last:
                    samples.append([])
                    last = key
                samples[-1].append(Component(ext, member.offset_data, member.size, member.name))
            end = archive.offset
        with open(path, "rb") as file:  # tarfile stops quietly at a cut header: what follows must be zero blocks
            file.seek(end)
            while chunk := file.read(1 << 16):
                if chunk.count(0) != len(chunk):
                    raise ValueError(f"is cut or damaged after byte {end} (not a tar header, nor the end of the "
                                     "archive)")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ValueError(f"is not a readable tar archive ({exc})") from None
    return samples


def index_text(samples: list[list[Component]]) -> str:
    """The index file (format v1.2) of an archive's samples."""
    lines = [f"{INDEX_VERSIONS[-1]} {len(samples)}"]
    lines += [" ".join(f"{c.ext} {c.offset} {c.size} {c.name}" for c in sample) for sample in samples]
    return "\n".join(lines) + "\n"


def parse_index(text: str, where: str) -> list[tuple[int, list[Component]]]:
    """(line number, components) of each sample of an index file; SchemaError naming `where` and the line."""
    lines = text.splitlines()
    header = lines[0].split() if lines else []
    if len(header) != 2 or header[0] not in INDEX_VERSIONS or not header[1].isdigit() or int(header[1]) < 1:
        raise SchemaError(f"{where}, line 1: expected '<version> <samples>' with version in {list(INDEX_VERSIONS)} "
                          f"and a positive count, got {short_repr(lines[0] if lines else '')}")
    fields_per = 4 if header[0] == "v1.2" else 3
    count = int(header[1])
    if len(lines) - 1 < count:
        raise SchemaError(f"{where}: it declares {count} samples but has {len(lines) - 1} lines after its header")
    samples = []
    for number in range(2, count + 2):
        fields = lines[number - 1].split()
        if not fields or len(fields) % fields_per:
            group = "<ext> <offset> <size>" + (" <file name>" if fields_per == 4 else "")
            raise SchemaError(f"{where}, line {number}: expected groups of {fields_per} fields ('{group}'), got "
                              f"{short_repr(lines[number - 1])}")
        components = []
        for k in range(0, len(fields), fields_per):
            ext, offset, size = fields[k:k + 3]
            if not (offset.isdigit() and size.isdigit()) or int(offset) % TAR_BLOCK:
                raise SchemaError(f"{where}, line {number}: bad offset or size {short_repr(offset)} "
                                  f"{short_repr(size)} (the offset is a multiple of {TAR_BLOCK})")
            name = fields[k + 3] if fields_per == 4 else ext
            components.append(Component(ext, int(offset), int(size), name))
        samples.append((number, components))
    return samples


@reader(OP)
class WebdatasetReader(RecordReader):
    """Reads one shard of the samples of webdataset archives (the format is in the module docstring)."""

    op = OP

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        where = f"{OP} (node '{node}')"
        paths, index_paths = list(args["paths"]), list(args["index_paths"] or [])
        if index_paths and len(index_paths) != len(paths):
            raise SchemaError(f"{where}: {len(paths)} archives in `paths` but {len(index_paths)} index files")
        behavior = args["missing_component_behavior"].lower() or "empty"
        if behavior not in ("empty", "skip", "error"):
            raise SchemaError(f"{where}: argument 'missing_component_behavior': expected '', 'empty', 'skip' or "
                              f"'error', got {short_repr(args['missing_component_behavior'])}")
        case = bool(args["case_sensitive_extensions"])
        self.ext_sets = [{e if case else e.lower() for e in extension_set(ext)} for ext in args["ext"]]
        dtypes = args["dtypes"] or [WDS_TYPES[0]] * len(self.ext_sets)
        if len(dtypes) != len(self.ext_sets) or any(d not in WDS_TYPES for d in dtypes):
            raise SchemaError(f"{where}: argument 'dtypes': one of {[t.name for t in WDS_TYPES]} per `ext` set "
                              f"({len(self.ext_sets)}), got {[d.name for d in dtypes]}")
        self.dtypes = [numpy_dtype(d) for d in dtypes]
        self.num_outputs = len(self.ext_sets)
        self.parts: list[tuple[tuple[int, int] | None, ...]] = []  # per sample: (start, size) per output
        self.first_names: list[str | None] = []  # per sample: its first output's component (DALI's source_info)
        records = []
        for file, path in enumerate(paths):
            size = file_size(OP, node, path, "archive")
            if index_paths:
                source = f"{where}: index file {short_repr(index_paths[file])}"
                samples = parse_index(read_index(OP, node, index_paths[file]), source)
            else:
                source = f"{where}: archive {short_repr(path)}"
                try:
                    samples = list(enumerate(scan_archive(path), 1))
                except ValueError as exc:
                    raise SchemaError(f"{source} {exc}") from None
            for number, components in samples:
                record = self._sample_record(file, number, components, size, source, behavior, case, bool(index_paths))
                if record is not None:
                    records.append(record)
        super().__init__(node, args, batch_size, seed, pool, paths, records)

    def _sample_record(self, file: int, number: int, components: list[Component], archive_size: int, source: str,
                       behavior: str, case: bool, indexed: bool) -> Record | None:
        """The record of one sample (None if it is skipped), and its outputs' places in it (self.parts)."""
        what = f"line {number}" if indexed else f"sample {number} of the archive"
        chosen: list[Component | None] = [None] * len(self.ext_sets)
        for component in components:
            if component.offset + component.size > archive_size:
                raise SchemaError(f"{source}, {what}: {short_repr(component.name)} ({component.size} bytes at "
                                  f"{component.offset}) runs past the end of the archive ({archive_size} bytes): "
                                  "a stale index?")
            ext = component.ext if case else component.ext.lower()
            for output, exts in enumerate(self.ext_sets):
                if chosen[output] is None and ext in exts:
                    if component.size % self.dtypes[output].itemsize:
                        raise SchemaError(f"{source}, {what}: {short_repr(component.name)} has {component.size} "
                                          f"bytes, not a whole number of {self.dtypes[output].name} values")
                    chosen[output] = component
        if None in chosen:
            if behavior == "skip":
                return None
            if behavior == "error":
                missing = [i for i, c in enumerate(chosen) if c is None]
                raise SchemaError(f"{source}, {what}: the sample ({short_repr(split_name(components[0].name)[0])}) "
                                  f"has no component for output(s) {missing} (missing_component_behavior='error')")
        used = [c for c in chosen if c is not None]
        start = min((c.offset for c in used), default=0)
        end = max((c.offset + c.size for c in used), default=0)
        self.parts.append(tuple(None if c is None else (c.offset - start, c.size) for c in chosen))
        self.first_names.append(None if chosen[0] is None else chosen[0].name)
        key = split_name(components[0].name)[0]
        return Record(file, start, end - start, f"sample {short_repr(key)} ({what})")

    def source_info_of(self, index: int) -> str:
        """DALI's source_info of the first output's component: '<archive>:<offset>:<name>' ('' when the sample has
        none). DALI gives each output its component's; the engine keeps one source per sample."""
        name, part = self.first_names[index], self.parts[index][0]
        if name is None or part is None:
            return ""
        record = self.records[index]
        return f"{self.files[record.file]}:{record.offset + part[0]}:{name}"

    def parse(self, index: int, data: bytes) -> tuple:
        return tuple(np.empty(0, dtype) if part is None else np.frombuffer(data, dtype, part[1] // dtype.itemsize,
                                                                            part[0])
                     for part, dtype in zip(self.parts[index], self.dtypes, strict=True))


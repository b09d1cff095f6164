"""DALI's own documented pipelines, each written once as a function of the library namespace, so that the same body
builds against `nvidia.dali` and `headrace` (only the import changes: see `library`). The theme modules register their
pipelines into CASES with `@case`; tests/test_dali_suite.py runs each in both libraries and compares the outputs."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

# One batch output as the runner records it: (samples, layout, dtype name).
Output = tuple[list[np.ndarray], str, str]
# The library namespace a pipeline function gets (see `library`), and the pipeline it returns (either library's).
Lib = SimpleNamespace
Pipe = Any


@dataclass(frozen=True)
class Case:
    """One documented pipeline: `build(lib, data)` returns the pipeline, `source` says where it is from. Outputs are
    compared exactly, or within `atol` (one per output where a tuple) / `rtol`; a `random` case compares no values, and
    shapes only where `same_shapes`; `check(outputs)`, where given, runs on each library's outputs. `xfail` is the
    finding while headrace fails the pipeline."""

    name: str
    build: Callable
    source: str
    atol: float | tuple[float, ...] = 0.0
    random: bool = False
    same_shapes: bool = True
    check: Callable[[list[list[Output]]], None] | None = None
    iterations: int = 1
    xfail: str = ""
    rtol: float = 0.0


CASES: dict[str, Case] = {}


def case(source: str, **options) -> Callable[[Callable], Callable]:
    """Registers the decorated pipeline function under its name."""

    def register(build: Callable) -> Callable:
        name = build.__name__
        assert name not in CASES, name
        CASES[name] = Case(name=name, build=build, source=source, **options)
        return build

    return register


def library(name: str) -> SimpleNamespace:
    """What a DALI script imports (`fn`, `types`, `math`, `ops`, `tfrecord`, `pipeline_def`, `Pipeline`, the numba
    plugin's `numba_function`), from
    `nvidia.dali` or from `headrace`; a module the library lacks is None (a pipeline using it fails there)."""
    root = "nvidia.dali" if name == "dali" else "headrace"
    package = importlib.import_module(root)

    def module(sub: str):
        """As `from <root> import <sub>` gives it: the package's attribute, else the submodule."""
        try:
            imported = importlib.import_module(f"{root}.{sub}")
        except ImportError:
            imported = None
        return getattr(package, sub, imported)

    try:  # `from <root>.plugin.numba.fn.experimental import numba_function`, as DALI's numba example imports it
        numba_function = importlib.import_module(f"{root}.plugin.numba.fn.experimental").numba_function
    except ImportError:
        numba_function = None
    return SimpleNamespace(name=name, fn=module("fn"), types=module("types"), math=module("math"), ops=module("ops"),
                           tfrecord=module("tfrecord"), pipeline_def=package.pipeline_def, Pipeline=package.Pipeline,
                           numba_function=numba_function)


@dataclass
class SuiteData:
    """The generated inputs every pipeline reads: paths and in-memory arrays (see data.py)."""

    images: str  # a folder of 12 JPEGs in 3 class folders
    file_list: str  # "path label" lines for those JPEGs
    jpegs: list[np.ndarray]  # 4 encoded JPEGs (uint8 arrays)
    audio: str  # a folder (one class) of 4 WAV files, 16 kHz, silence at both ends
    numpy_dir: str  # 5 .npy files
    tfrecord: list[str]
    tfrecord_index: list[str]
    coco_images: str
    coco_annotations: str


def load_all() -> dict[str, Case]:
    """Imports every theme module (registering their cases) and returns CASES."""
    import pkgutil

    for module in pkgutil.iter_modules(__path__):
        if module.name != "data":
            importlib.import_module(f"{__name__}.{module.name}")
    return CASES


def batch_source(samples: list[np.ndarray]) -> Callable[[], list[np.ndarray]]:
    """An external_source callable giving the same batch every iteration (no parameter: DALI would pass one)."""
    return lambda: [np.array(s) for s in samples]


def samples_of(outputs: list[list[Output]], index: int) -> list[np.ndarray]:
    """Every sample of output `index`, over all iterations."""
    return [s for iteration in outputs for s in iteration[index][0]]


def expect(condition: bool, message: str) -> None:
    """An assertion for `check` functions (a plain assert, named so a check reads as a statement)."""
    assert condition, message

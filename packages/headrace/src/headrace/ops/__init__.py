"""The schemas of every op headrace has; importing this package registers them."""

from headrace.ops import (  # noqa: F401
    color,
    conditional,
    decoders,
    filters,
    geometry,
    math,
    random,
    readers,
    reductions,
    regions,
    tensors,
    transfer,
    warp,
)

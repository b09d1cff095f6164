"""The schemas of every op headrace has; importing this package registers them."""

from headrace.ops import decoders, geometry, math, random, readers, transfer  # noqa: F401

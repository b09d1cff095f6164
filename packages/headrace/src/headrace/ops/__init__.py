"""The schemas of every op headrace has; importing this package registers them."""

from headrace.ops import conditional, decoders, geometry, math, random, readers, transfer  # noqa: F401

"""Readers: the stateful batch ops at the root of a pipeline (files, external sources). Every module of this package
is imported here, and each registers its reader class against its op (`headrace_kernels.registry.reader`)."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

"""The schemas of every op headrace has; importing this package registers them. Every module of the package is an
op family and is imported here, so a new family needs no list to edit."""

import importlib
import pkgutil

for _family in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_family.name}")

"""Names a package exports but imports on first use (PEP 562), so that importing the package stays cheap."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str], listed: Iterable[str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``: ``exports`` maps a name to the module
    (absolute, or relative to ``package``) it comes from, imported when the name is first used and then kept in
    the package's namespace (later uses do not come here); ``__dir__`` lists the namespace and ``listed``
    (the package's ``__all__``)."""
    names = frozenset(listed)

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | names)

    return __getattr__, __dir__

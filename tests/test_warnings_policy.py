"""The suite's warnings policy goes by origin, not wording (pyproject.toml, filterwarnings).

A warning is filed under the module of the frame it points at. The probes below are plain
functions whose globals name the module a warning would come from, so each test raises a
warning exactly as code in that module would, with a message no filter has ever seen.
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable

import pytest


def _warn(category: type[Warning]) -> None:
    warnings.warn(f"a notice worded as no release has worded one yet ({category.__name__})", category, stacklevel=1)


def _from_module(module: str) -> Callable[[type[Warning]], None]:
    """``_warn`` as if defined in ``module`` (its globals' ``__name__`` is what the filters see)."""
    return types.FunctionType(_warn.__code__, {"__name__": module, "warnings": warnings}, "_warn")


THIRD_PARTY = ["litellm", "litellm.types.utils", "pydantic", "pydantic._internal._generate_schema", "openai._models"]
OURS = ["promptgrid", "promptgrid.matrix.clients._router", "promptgrid.translate._llm"]


@pytest.mark.parametrize("category", [UserWarning, DeprecationWarning, FutureWarning, RuntimeWarning])
@pytest.mark.parametrize("module", THIRD_PARTY)
def test_a_new_warning_from_inside_a_dependency_cannot_fail_the_suite(module: str, category: type[Warning]) -> None:
    _from_module(module)(category)  # the suite's filters are in force: raising here would fail the test


@pytest.mark.parametrize("category", [UserWarning, DeprecationWarning])
@pytest.mark.parametrize("module", OURS)
def test_a_warning_from_promptgrid_fails_the_suite(module: str, category: type[Warning]) -> None:
    with pytest.raises(category, match="no release has worded"):
        _from_module(module)(category)


def _deprecated_api() -> None:
    warnings.warn("use the new API", DeprecationWarning, stacklevel=2)


def _call_library() -> None:
    library_api()  # noqa: F821 - bound in the globals the probe is given


def test_a_dependency_deprecation_about_our_call_fails_the_suite() -> None:
    """A library warning with ``stacklevel=2`` points at its caller: when that is our code, it is ours."""
    library_api = types.FunctionType(_deprecated_api.__code__, {"__name__": "litellm.router", "warnings": warnings})
    ours = types.FunctionType(_call_library.__code__, {"__name__": "promptgrid.matrix.clients._router",
                                                       "library_api": library_api})
    with pytest.raises(DeprecationWarning, match="new API"):
        ours()
    theirs = types.FunctionType(_call_library.__code__, {"__name__": "litellm.main", "library_api": library_api})
    theirs()  # the same notice about a library's call of its own API: not ours


def test_look_alike_module_names_are_not_ours() -> None:
    _from_module("promptgrid_plugins.extra")(UserWarning)

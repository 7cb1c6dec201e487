"""The request pieces a native or constrained prompt sends beside its messages (``Prompt.request``).

The templates layer renders the messages (without function docs in native
mode) and cannot import this package, so the pieces are attached here, on the
way from the renderer to a run or to ``pg.render``: :class:`RequestRenderer`
wraps a ``promptgrid.templates.Renderer`` and adds :func:`call_request` to
every prompt whose variant is not in ``prompt`` call mode. The pieces are
built from the function docs as the prompt shows them (descriptions in the
variant's description language), from names and types only, never from a
ground truth.

Native: ``{"call_mode": "native", "tools": [...], "tool_choice": "auto",
"tool_names": {sent name: case's function name}}`` (``tools`` as
:func:`tool_schemas` writes them).

Constrained: ``{"call_mode": "constrained", "return_format", "tool_call_tag",
"json_schema", "response_format", "grammar", "unavailable"}``. ``json_schema``
is the plain answer schema (llama.cpp / vLLM) and ``response_format`` the
OpenAI strict form, both only for the json return format without the tool-call
tag (a JSON schema cannot write ``<TOOLCALL>``); ``grammar`` is the GBNF
grammar of the return format (tag included). A piece that cannot be built is
``None`` and ``unavailable`` maps its name to the reason (``{}`` when all
were built); a client sends what it can and records the rest ``unsupported``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from promptgrid.records import Case, Prompt
from promptgrid.variants import CallMode, ReturnFormat, Variant

from ._grammar import gbnf_grammar
from ._schema import ConstraintError, json_schema, response_format
from ._tools import tool_schemas

__all__ = ["RequestRenderer", "call_request"]


def call_request(variant: Variant, functions: Sequence[Mapping[str, Any]], *, min_calls: int = 1
                 ) -> dict[str, Any] | None:
    """The request pieces of ``variant`` for a case with these (localized) ``functions``; ``None`` in prompt mode.

    ``min_calls=0`` (conversations) lets a constrained answer be the format's empty call list, with which the
    model ends its turn; single-turn cases constrain to at least one call.

    Never raises for functions a constraint cannot express: the piece is
    ``None`` and ``unavailable`` says why (see the module docstring).
    """
    if variant.call_mode is CallMode.PROMPT:
        return None
    if variant.call_mode is CallMode.NATIVE:
        schemas = tool_schemas(functions)
        return {"call_mode": CallMode.NATIVE.value, "tools": list(schemas.tools), "tool_choice": "auto",
                "tool_names": dict(schemas.name_map)}
    unavailable: dict[str, str] = {}
    pieces: dict[str, Any] = {"json_schema": None, "response_format": None, "grammar": None}
    if variant.return_format is not ReturnFormat.JSON:
        reason = f"the {variant.return_format} return format is not JSON"
        unavailable.update(json_schema=reason, response_format=reason)
    elif variant.tool_call_tag:
        reason = "a JSON schema cannot write the <TOOLCALL> tag"
        unavailable.update(json_schema=reason, response_format=reason)
    else:
        for name, build in (("json_schema", lambda: json_schema(functions, min_calls=min_calls)),
                            ("response_format", lambda: response_format(functions, provider="openai",
                                                                        min_calls=min_calls))):
            try:
                pieces[name] = build()
            except ConstraintError as exc:
                unavailable[name] = str(exc)
    try:
        pieces["grammar"] = gbnf_grammar(functions, variant.return_format, variant.tool_call_tag,
                                         min_calls=min_calls)
    except ConstraintError as exc:
        unavailable["grammar"] = str(exc)
    return {"call_mode": CallMode.CONSTRAINED.value, "return_format": variant.return_format.value,
            "tool_call_tag": variant.tool_call_tag, **pieces, "unavailable": unavailable}


class _Renders(Protocol):
    def render(self, variant: Variant, case: Case) -> Prompt: ...

    def functions(self, variant: Variant, case: Case) -> tuple[Any, ...]: ...


class RequestRenderer:
    """A template renderer whose native and constrained prompts carry their request (``Prompt.request``).

    Prompt-mode prompts pass through unchanged (same object, same sha256).
    """

    def __init__(self, renderer: _Renders) -> None:
        self._renderer = renderer

    def render(self, variant: Variant, case: Case) -> Prompt:
        """The prompt of ``variant`` x ``case``, with ``request`` set unless the variant is in prompt mode."""
        prompt = self._renderer.render(variant, case)
        if variant.call_mode is CallMode.PROMPT:
            return prompt
        return replace(prompt, request=call_request(variant, self._renderer.functions(variant, case)))

    def functions(self, variant: Variant, case: Case) -> tuple[Any, ...]:
        """The case's function docs in ``variant``'s description language (``Renderer.functions``)."""
        return self._renderer.functions(variant, case)

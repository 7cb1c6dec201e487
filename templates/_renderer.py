"""Render a (Variant, Case) into the chat messages to send.

One Jinja environment per :class:`Renderer` (``StrictUndefined``,
``keep_trailing_newline=True``, autoescape off: prompts are not HTML); each
template is compiled once. Every template renders in Jinja's immutable
sandbox (user templates come with shared grids): reaching for ``_``
attributes or modifying a dict/list raises ``TemplateError`` naming the
file and line. Built-in templates are ``templates/prompts/*.j2``;
a user template directory adds ``<dir>/<name>.j2`` and style catalogs
``<dir>/styles/<name>.yaml`` (a user file may not reuse a built-in name: the
bfcl_v4 grid must keep meaning bfcl-eval's prompts).

How a template becomes messages (bfcl-eval's
``system_prompt_pre_processing_chat_model`` behaviour):

* A template without blocks renders the system prompt. If the case's first
  turn is a system message, its content is appended to the generated prompt
  after a blank line (``"\\n\\n"``); the case's other turns follow unchanged.
* A template may instead define ``{% block system %}`` and/or
  ``{% block user %}``: ``system`` is the system prompt as above (none when it
  renders empty); ``user`` replaces the content of the case's last user turn
  (the MASSIVE-Agents templates are single completion-style prompts that embed
  the question, so they put everything in ``user``).

A template's first line may carry options in a comment::

    {#- promptgrid: doc_flavour=bfcl catalog=massive_one_shot -#}

``doc_flavour`` (bfcl | clean; default clean) picks the function-doc renderer;
``catalog`` names the catalog bound to ``text`` (default: the variant's
prompt_style); ``answer_prefix`` is a label the prompt tells the model to put
before its calls (``Action:`` in the MASSIVE-Agents one-shot prompt), which
scoring removes before parsing. The variables a template sees are listed in templates/README.md.

The ``call_mode`` variable tells a template how the functions travel: in
``native`` mode they go as provider tools, so the built-in templates leave out
the function docs and the output-format / tool-call instructions (a user
template decides for itself; ``functions`` is rendered in every mode). The
request pieces beside the messages (tools, grammar, schema) are not built
here: ``promptgrid.matrix`` attaches them (``Prompt.request``) from
:meth:`Renderer.functions`, the docs localized as the prompt's are.

Per case, function docs are cached per (doc format, flavour, description
language) in a weak-keyed map, so the 26 variants of a case render its docs
three times, not 26; localized catalogs are cached per (catalog, language).
"""

from __future__ import annotations

import math
import os
import re
import traceback
import weakref
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox

from promptgrid.errors import TemplateError, closest
from promptgrid.records import Case, Prompt
from promptgrid.variants import BUILTIN_STYLES, QUERY_LANGUAGE, XML_RETURN_FORMATS, Variant

from ._catalogs import BFCL_STYLE, StyleCatalog, complete_style, load_bfcl_style, load_catalog_file
from ._docs import DocFlavour, render_function_docs
from ._fill import CatalogText, split_placeholders
from ._localization import Localization, MissingUnits, is_english, localize_functions
from ._sandbox import (
    MAX_PROMPT_CHARS,
    MAX_RENDER_SECONDS,
    MAX_TEMPLATE_BYTES,
    BoundedSandbox,
    TemplateLimitError,
    _BoundedLoader,
)

__all__ = ["Renderer", "answer_prefix", "render"]

_OPTIONS = re.compile(r"^\s*\{#-?\s*promptgrid:(?P<opts>[^#]*?)-?#\}")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class _Compiled:
    name: str
    filename: str
    template: jinja2.Template
    flavour: DocFlavour
    catalog: str | None
    answer_prefix: str
    has_system_block: bool
    has_user_block: bool


@dataclass(frozen=True)
class _Plan:
    """The case-independent part of rendering one variant."""

    variant_id: str
    compiled: _Compiled
    catalog: StyleCatalog
    xml_return: bool
    instruction_language: str
    description_language: str
    base: dict[str, Any]
    instructions: dict[str, tuple[CatalogText, str]] = field(default_factory=dict)  # per language


class _Sandbox(BoundedSandbox):
    """The bounded sandbox (``_sandbox.py``: sizes, loops and time) with a fast path for catalog strings.

    ``text.persona`` is the most frequent lookup in every template; a catalog
    entry is a plain string, safe by construction, so it skips the sandbox's
    per-access safety checks (which would cost about a third of render time).
    Everything else goes through the sandbox unchanged.
    """

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is CatalogText:
            value = dict.get(obj, attribute)
            if type(value) is str:
                return value
        return super().getattr(obj, attribute)


def _builtin_dir(sub: str) -> Path:
    return Path(str(resources.files("promptgrid.templates").joinpath(sub)))


class Renderer:
    """Renders prompts; holds the Jinja environment and the caches.

    ``template_dir``: a user template directory (``<name>.j2``,
    ``styles/<name>.yaml``). ``localization``: where translations come from
    (``promptgrid.translate`` implements it); without one, any non-English
    instruction or description language raises ``MissingTranslationError``.
    ``bfcl_data``: where to read bfcl-eval from for the ``experimental_bfcl``
    style (else ``$PROMPTGRID_BFCL_DATA``, else the installed package).

    Bounds (``TemplateError`` naming the template and the limit past them):
    ``max_template_bytes`` per template file (``MAX_TEMPLATE_BYTES``, 1 MiB),
    ``max_prompt_chars`` per rendered prompt part and per string a template
    builds (``MAX_PROMPT_CHARS``, 2,000,000) and ``max_render_seconds`` per
    render (``MAX_RENDER_SECONDS``, 10 s); see ``templates/_sandbox.py``.
    """

    def __init__(
        self,
        template_dir: str | os.PathLike[str] | None = None,
        localization: Localization | None = None,
        *,
        bfcl_data: str | os.PathLike[str] | None = None,
        max_template_bytes: int = MAX_TEMPLATE_BYTES,
        max_prompt_chars: int = MAX_PROMPT_CHARS,
        max_render_seconds: float = MAX_RENDER_SECONDS,
    ) -> None:
        _check_limit("max_template_bytes", max_template_bytes, integer=True)
        _check_limit("max_prompt_chars", max_prompt_chars, integer=True)
        _check_limit("max_render_seconds", max_render_seconds, integer=False)
        self._builtin_templates = _builtin_dir("prompts")
        self._template_dir = Path(template_dir).expanduser().resolve() if template_dir is not None else None
        if self._template_dir is not None and not self._template_dir.is_dir():
            raise TemplateError(f"template_dir {self._template_dir} is not a directory.")
        self._localization = localization
        self._bfcl_data = bfcl_data
        loaders: list[jinja2.BaseLoader] = [_BoundedLoader(str(self._builtin_templates), max_template_bytes)]
        if self._template_dir is not None:
            self._check_shadowing(self._template_dir)
            loaders.append(_BoundedLoader(str(self._template_dir), max_template_bytes))
        # Sandboxed for every template: user templates come from shared grids (a template must not
        # reach Python internals, files or processes); built-ins render identically and as fast.
        self._env = _Sandbox(
            loader=jinja2.ChoiceLoader(loaders),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
            auto_reload=False,
            max_chars=max_prompt_chars,
            max_seconds=max_render_seconds,
        )
        self._env.filters["fill"] = self._fill
        self._fill_parts: dict[str, tuple[tuple[str, str | None, str], ...]] = {}
        self._templates: dict[str, _Compiled] = {}
        self._catalogs: dict[tuple[str, bool], StyleCatalog] = {}
        self._texts: dict[tuple[str, str, str], CatalogText] = {}
        self._docs: weakref.WeakKeyDictionary[Case, dict[tuple[str, DocFlavour, str], str]] = (
            weakref.WeakKeyDictionary()
        )
        self._plans: dict[Variant, _Plan] = {}
        self._last_case: Case | None = None  # strong ref to one case only; the map below is weak
        self._last_docs: dict[tuple[str, DocFlavour, str], str] = {}
        self._formats = load_catalog_file("formats").strings

    # ------------------------------------------------------------------ names

    def _check_shadowing(self, folder: Path) -> None:
        builtin_templates = {p.stem for p in self._builtin_templates.glob("*.j2")}
        for path in sorted(folder.glob("*.j2")):
            if path.stem in builtin_templates:
                raise TemplateError(f"{path}: a user template may not reuse the built-in name {path.stem!r}; "
                                    "rename the file (built-in templates keep their meaning in every grid).")
        builtin_styles = set(BUILTIN_STYLES) | set(_builtin_catalog_stems())
        for path in sorted((folder / "styles").glob("*.yaml")):
            if path.stem in builtin_styles:
                raise TemplateError(f"{path}: a user style may not reuse the built-in name {path.stem!r}; "
                                    "rename the file.")

    def template_names(self) -> list[str]:
        """Built-in and user template names."""
        names = {p.stem for p in self._builtin_templates.glob("*.j2")}
        if self._template_dir is not None:
            names |= {p.stem for p in self._template_dir.glob("*.j2")}
        return sorted(names)

    def answer_prefix(self, template: str) -> str:
        """The label ``template`` asks the model to put before its calls ("" for none)."""
        return self._template(template).answer_prefix

    def style_names(self) -> list[str]:
        names = set(BUILTIN_STYLES)
        if self._template_dir is not None:
            names |= {p.stem for p in (self._template_dir / "styles").glob("*.yaml")}
        return sorted(names)

    def _fill(self, text: str, tidy: bool = False, **values: Any) -> str:
        """:func:`fill` with each catalog string parsed once (the Jinja filter ``fill``)."""
        parts = self._fill_parts.get(text)
        if parts is None:
            parts = self._fill_parts[text] = split_placeholders(text)
        out = []
        grown = len(text)  # the output is at most the text and each value put in (a placeholder may repeat)
        for literal, name, space in parts:
            out.append(literal)
            if name is None:
                continue
            if name not in values:
                out.append("{" + name + "}" + space)
                continue
            value = str(values[name])
            grown += len(value)
            out.append(value if tidy and not value else value + space)
        if grown > self._env.max_chars:
            raise TemplateLimitError(f"the result of the fill filter would be up to {grown:,} characters, over the "
                                     f"template limit of {self._env.max_chars:,} (Renderer(max_prompt_chars=N) "
                                     "raises it).")
        return "".join(out)

    # ------------------------------------------------------------------ templates

    def _template(self, name: str) -> _Compiled:
        compiled = self._templates.get(name)
        if compiled is not None:
            return compiled
        if not _NAME.match(name):
            raise TemplateError(f"invalid template name {name!r}: use letters, digits, '_', '.', '-'.")
        file = f"{name}.j2"
        try:
            template = self._env.get_template(file)
            source, filename, _ = self._env.loader.get_source(self._env, file)  # type: ignore[union-attr]
        except jinja2.TemplateNotFound:
            where = f"{self._template_dir} or the built-ins" if self._template_dir else "the built-ins"
            raise TemplateError(
                f"template {name!r} not found: no {file} in {where}.{closest(name, self.template_names())} "
                f"Templates: {', '.join(self.template_names())}."
            ) from None
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"{exc.filename or file}:{exc.lineno}: template syntax error: {exc.message}") from None
        options = _parse_options(source, filename or file)
        compiled = _Compiled(
            name=name,
            filename=filename or file,
            template=template,
            flavour=options["doc_flavour"],
            catalog=options.get("catalog"),
            answer_prefix=options.get("answer_prefix", ""),
            has_system_block="system" in template.blocks,
            has_user_block="user" in template.blocks,
        )
        self._templates[name] = compiled
        return compiled

    # ------------------------------------------------------------------ catalogs

    def _catalog(self, name: str, as_style: bool) -> StyleCatalog:
        cached = self._catalogs.get((name, as_style))
        if cached is not None:
            return cached
        if name == BFCL_STYLE:
            catalog = load_bfcl_style(self._bfcl_data)
        else:
            user = self._template_dir / "styles" / f"{name}.yaml" if self._template_dir else None
            if user is not None and user.is_file():
                catalog = load_catalog_file(name, user)
            elif name in _builtin_catalog_stems():
                catalog = load_catalog_file(name)
            else:
                known = (self.style_names() if as_style
                         else sorted(set(self.style_names()) | set(_builtin_catalog_stems())))
                raise TemplateError(
                    f"unknown {'prompt style' if as_style else 'catalog'} {name!r}.{closest(name, known)} "
                    f"Known: {', '.join(known)} (user styles go in <template_dir>/styles/<name>.yaml)."
                )
        if as_style:
            catalog = complete_style(catalog, self._catalog("classic", False))
        self._catalogs[(name, as_style)] = catalog
        return catalog

    def _text(self, catalog: StyleCatalog, lang: str, missing: MissingUnits) -> CatalogText:
        english = is_english(lang)
        key = (catalog.name, catalog.where, "en" if english else lang)
        cached = self._texts.get(key)
        if cached is not None:
            return cached
        if english:
            out = self._texts[key] = CatalogText(catalog.strings)
            return out
        before = len(missing.instructions)
        loc = self._localization
        strings: dict[str, str] = {}
        for k, source in catalog.strings.items():
            translated = loc.instruction(source, lang, catalog.keys[k]) if loc is not None else None
            if translated is None:
                missing.instructions.append((lang, catalog.keys[k]))
                translated = source
            strings[k] = translated
        out = CatalogText(strings)
        if len(missing.instructions) == before:
            self._texts[key] = out
        return out

    # ------------------------------------------------------------------ docs

    def _function_docs(self, case: Case, doc_format: str, flavour: DocFlavour, lang: str,
                       missing: MissingUnits) -> str:
        # the variants of one case usually come one after another: remember the last case
        if case is self._last_case:
            per_case = self._last_docs
        else:
            found = self._docs.get(case)
            per_case = found if found is not None else self._docs.setdefault(case, {})
            self._last_case, self._last_docs = case, per_case
        key = (doc_format, flavour, lang)
        docs = per_case.get(key)
        if docs is not None:
            return docs
        functions: Any = case.functions
        before = len(missing.descriptions)
        if not is_english(lang):
            lookup = self._localization.description if self._localization is not None else None
            functions = localize_functions(case.functions, lang, lookup, missing)
        try:
            docs = render_function_docs(functions, doc_format, flavour)
        except ValueError as exc:
            raise TemplateError(f"case {case.id}: {exc}.") from None
        if len(missing.descriptions) == before:
            per_case[key] = docs
        return docs

    # ------------------------------------------------------------------ render

    def _plan(self, variant: Variant) -> _Plan:
        """Everything about a variant that does not depend on the case, computed once."""
        compiled = self._template(variant.template)
        if compiled.catalog is None:
            catalog = self._catalog(variant.prompt_style, True)
        else:
            catalog = self._catalog(compiled.catalog, False)
        formats = self._formats
        output_format = formats[f"output_format_{variant.return_format}"]
        example_call = formats[f"example_call_{variant.return_format}"]
        tagged = output_format
        if variant.tool_call_tag:
            tag_open, tag_close = formats["tool_call_tag_open"], formats["tool_call_tag_close"]
            tagged, example_call = f"{tag_open}{output_format}{tag_close}", f"{tag_open}{example_call}{tag_close}"
        # shared=True contexts skip Jinja's per-render merge of globals, so they go in here
        base: dict[str, Any] = dict(self._env.globals)
        base.update({
            "doc_format": variant.doc_format,
            "return_format": variant.return_format,
            "tool_call_tag": variant.tool_call_tag,
            "prompt_format": variant.prompt_format,
            "prompt_style": variant.prompt_style,
            "call_mode": variant.call_mode,
            "output_format": output_format,
            "tagged_output_format": tagged,
            "example_call": example_call,
            "formats": formats,
            "variant": variant,
        })
        plan = _Plan(variant.id, compiled, catalog, variant.return_format in XML_RETURN_FORMATS,
                     variant.instruction_language, variant.description_language, base)
        self._plans[variant] = plan
        return plan

    def _instructions(self, plan: _Plan, lang: str, missing: MissingUnits) -> tuple[CatalogText, str]:
        """The (localized) catalog and parameter-type sentence of a plan, cached per language."""
        cached = plan.instructions.get(lang)
        if cached is not None:
            return cached
        text = self._text(plan.catalog, lang, missing)
        param_types = ""
        if plan.xml_return:
            if "param_types" in text:
                param_types = text["param_types"]
            else:
                param_types = self._text(self._catalog("classic", False), lang, missing)["param_types"]
        if not missing:
            plan.instructions[lang] = (text, param_types)
        return text, param_types

    def render(self, variant: Variant, case: Case) -> Prompt:
        """The messages to send for ``variant`` x ``case``.

        Raises ``TemplateError`` (template or catalog missing/invalid, naming
        file and line) and ``MissingTranslationError`` (listing every missing unit).
        """
        plan = self._plans.get(variant) or self._plan(variant)
        instr_lang = case.language if plan.instruction_language == QUERY_LANGUAGE else plan.instruction_language
        desc_lang = case.language if plan.description_language == QUERY_LANGUAGE else plan.description_language
        missing = MissingUnits()
        text, param_types = self._instructions(plan, instr_lang, missing)
        docs = self._function_docs(case, plan.base["doc_format"], plan.compiled.flavour, desc_lang, missing)
        if missing:
            missing.raise_if_any(f"variant {plan.variant_id}, case {case.id}")
        context = plan.base.copy()
        context["text"] = text
        context["functions"] = docs
        context["param_types"] = param_types
        context["instruction_language"] = instr_lang
        context["description_language"] = desc_lang
        context["question"] = case.query
        context["case"] = case
        system, user = self._run(plan.compiled, context)
        return Prompt(plan.variant_id, case.id, _messages(case, system, user))

    def functions(self, variant: Variant, case: Case) -> tuple[Any, ...]:
        """The case's function docs with descriptions in ``variant``'s description language.

        What native tool schemas and constraints are built from: localized exactly
        as the docs in the prompt are (same units, same ``MissingTranslationError``).
        English returns ``case.functions`` itself.
        """
        lang = case.language if variant.description_language == QUERY_LANGUAGE else variant.description_language
        if is_english(lang):
            return tuple(case.functions)
        missing = MissingUnits()
        lookup = self._localization.description if self._localization is not None else None
        functions = localize_functions(case.functions, lang, lookup, missing)
        missing.raise_if_any(f"variant {variant.id}, case {case.id}")
        return tuple(functions)

    def _run(self, compiled: _Compiled, context: dict[str, Any]) -> tuple[str, str | None]:
        template = compiled.template
        env = self._env
        env.start()  # the render's deadline
        try:
            try:
                # what Template.new_context(context, shared=True) builds, minus a copy of the
                # globals ChainMap per render (the globals are already in ``context``);
                # env.concat joins the pieces as they come and stops past the prompt cap
                ctx = env.context_class(env, context, template.name, template.blocks)
                if not compiled.has_user_block and not compiled.has_system_block:
                    return env.concat(template.root_render_func(ctx)), None
                system = env.concat(template.blocks["system"](ctx)) if compiled.has_system_block else ""
                user = env.concat(template.blocks["user"](ctx)) if compiled.has_user_block else None
                return system, user
            except Exception:  # noqa: BLE001 - any error inside a template is reported with its line
                env.handle_exception()  # re-raises with the template's file and line in the traceback
        except Exception as exc:  # noqa: BLE001 - converted to TemplateError naming file and line
            file, line = compiled.filename, 0
            for frame in traceback.extract_tb(exc.__traceback__):
                if frame.filename.endswith(".j2"):
                    file, line = frame.filename, frame.lineno or 0
            if isinstance(exc, TemplateLimitError):  # line 0: the limit was met joining the output
                raise TemplateError(f"{file}:{line}: {exc}" if line else f"{file}: {exc}") from None
            if isinstance(exc, (MemoryError, RecursionError)):
                what = "memory" if isinstance(exc, MemoryError) else "stack (recursion too deep)"
                raise TemplateError(f"{file}:{line}: the template ran out of {what}.") from None
            if isinstance(exc, jinja2.sandbox.SecurityError):
                raise TemplateError(
                    f"{file}:{line}: unsafe access blocked by the template sandbox: {exc} Templates may only "
                    "read the documented variables (no attributes starting with '_', no modifying calls)."
                ) from None
            kind = "undefined variable" if isinstance(exc, jinja2.UndefinedError) else type(exc).__name__
            shown = sorted(k for k in context if k not in self._env.globals)
            raise TemplateError(
                f"{file}:{line}: {kind}: {exc}. Variables a template can use: {', '.join(shown)} "
                "(see the templates section of the README)."
            ) from None
        finally:
            env.stop()
        raise AssertionError("unreachable")  # pragma: no cover


def _check_limit(name: str, value: Any, *, integer: bool) -> None:
    """A render bound must be a positive (integer or finite) number: nan, inf, bools and 0 are refused."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or value <= 0:
        raise TemplateError(f"{name} must be a positive {'integer' if integer else 'number of seconds'}, "
                            f"not {value!r}.")


def _messages(case: Case, system: str, user: str | None) -> tuple[dict[str, str], ...]:
    turns = case.turns
    out: list[dict[str, str]] = []
    start = 0
    if system:
        if turns and turns[0].get("role") == "system":
            out.append({"role": "system", "content": system + "\n\n" + turns[0]["content"]})
            start = 1
        else:
            out.append({"role": "system", "content": system})
    out.extend(dict(t) for t in turns[start:])
    if user is not None:
        for message in reversed(out):
            if message.get("role") == "user":
                message["content"] = user
                break
        else:
            out.append({"role": "user", "content": user})
    return tuple(out)


def _parse_options(source: str, filename: str) -> dict[str, Any]:
    options: dict[str, Any] = {"doc_flavour": DocFlavour.CLEAN}
    match = _OPTIONS.match(source)
    if not match:
        return options
    for item in match.group("opts").split():
        key, sep, value = item.partition("=")
        if not sep or key not in ("doc_flavour", "catalog", "answer_prefix"):
            raise TemplateError(f"{filename}:1: promptgrid option {item!r}: expected doc_flavour=bfcl|clean, "
                                "catalog=<name> or answer_prefix=<label>.")
        if key == "doc_flavour":
            if value not in ("bfcl", "clean"):
                raise TemplateError(f"{filename}:1: doc_flavour must be bfcl or clean, not {value!r}.")
            options[key] = DocFlavour(value)
        else:
            options[key] = value
    return options


_CATALOG_STEMS: list[str] | None = None


def _builtin_catalog_stems() -> list[str]:
    global _CATALOG_STEMS
    if _CATALOG_STEMS is None:
        _CATALOG_STEMS = sorted(p.stem for p in _builtin_dir("catalogs").glob("*.yaml"))
    return _CATALOG_STEMS


_DEFAULT: Renderer | None = None


def answer_prefix(template: str, template_dir: Path | str | None = None) -> str:
    """The label a template asks the model to write before its calls ("" for none).

    Built-in templates are read once through the shared default renderer.
    """
    global _DEFAULT
    if template_dir is not None:
        return Renderer(template_dir).answer_prefix(template)
    if _DEFAULT is None:
        _DEFAULT = Renderer()
    return _DEFAULT.answer_prefix(template)


def render(
    variant: Variant,
    case: Case,
    *,
    template_dir: Path | str | None = None,
    localization: Localization | None = None,
    bfcl_data: str | os.PathLike[str] | None = None,
) -> Prompt:
    """Render one prompt. Without options, a shared default :class:`Renderer` (and its caches) is used."""
    global _DEFAULT
    if template_dir is None and localization is None and bfcl_data is None:
        if _DEFAULT is None:
            _DEFAULT = Renderer()
        return _DEFAULT.render(variant, case)
    return Renderer(template_dir, localization, bfcl_data=bfcl_data).render(variant, case)

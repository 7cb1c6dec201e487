"""Options declared once: ``Option``, and what is built from a ``TypedDict`` whose fields carry one.

A command's options are a ``TypedDict`` (``total=False``) whose fields are
``Annotated[T, Option(...)]``, each with a docstring under it: the run's are
``config.RunOptions`` (and its part ``config.PlanOptions``, the ones
``export-batch`` takes too). Everything that lists them is made from that one
declaration:

- ``declared``: field name -> ``Option``, in declaration order; ``docs``: field name -> its docstring;
- ``add_flags`` / ``from_args``: a command's argparse flags, and the options its parsed arguments give;
- ``check_keywords``: a keyword that is no option is refused, naming the closest one;
- ``takes_options``: a function's ``inspect.signature`` lists the options as keywords, and its docstring
  ends with them (the flag and the field's docstring of each);
- the run config YAML's top-level keys and their checks (``config.load_run_config``) and the merge of
  options into a ``RunConfig`` (``session.build_config``) read ``declared`` too.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar, get_type_hints

from promptgrid.errors import RunError, closest

__all__ = ["Option", "add_flags", "check_keywords", "declared", "docs", "from_args", "takes_options"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Option:
    """How one option is given: its flag, its bounds, where else it may be written."""

    flag: str | None = None
    """The command-line flag (``--limit``); None: no flag of its own."""
    metavar: str | None = None
    help: str | None = None
    """The flag's help (``--help``)."""
    help_for: Mapping[str, str] = field(default_factory=dict)
    """A command's own help for the flag, where the option means something narrower there
    (``{"export-batch": ...}``)."""
    bounds: Mapping[str, Any] | None = None
    """A number option: the keywords of ``config.number_problem`` (``integer``, ``minimum``, ``strict``) that
    every value is checked with; its flag parses an int when ``integer``, else a float."""
    choices: tuple[str, ...] | None = None
    many: bool = False
    """Several values: a repeatable flag, a list in Python and in the run config."""
    path: bool = False
    """A path (in a run config, relative to the file)."""
    file: bool = False
    """A top-level key of the run config YAML too."""
    model: bool = False
    """Applies to every model (over the ``ModelSpec`` field of that name); in a run config, a key of each model."""
    keys: Mapping[str, Option] = field(default_factory=dict)
    """A mapping option (``params``): the keys with a flag of their own (``--max-tokens``)."""
    switch: bool = False
    """A yes/no option: its flag takes no value (given: True); in a run config, ``true`` or ``false``."""

    def argparse_kwargs(self, command: str) -> dict[str, Any]:
        """What ``ArgumentParser.add_argument`` takes for this option's flag in ``command``."""
        kwargs: dict[str, Any] = {"default": None, "metavar": self.metavar,
                                  "help": self.help_for.get(command, self.help)}
        if self.switch:
            return {"default": None, "action": "store_true", "help": kwargs["help"]}
        if self.bounds is not None:
            kwargs["type"] = int if self.bounds.get("integer") else float
        if self.choices is not None:
            kwargs["choices"] = self.choices
        if self.many:
            kwargs.update(action="append", default=[])
        return kwargs


@cache
def declared(options: type) -> dict[str, Option]:
    """The fields of a ``TypedDict`` of options, each with its ``Option``, in declaration order (a base class's
    fields first)."""
    hints = get_type_hints(options, include_extras=True)
    out: dict[str, Option] = {}
    for name, hint in hints.items():
        found = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Option)]
        if len(found) != 1:
            raise TypeError(f"{options.__name__}.{name}: declare it as Annotated[T, Option(...)]")
        out[name] = found[0]
    return out


@cache
def docs(options: type) -> dict[str, str]:
    """The docstring under each field of a ``TypedDict`` of options (its base classes' fields included), read
    from their source; ``""`` for a field without one, or where the source is not there."""
    found: dict[str, str] = {}
    for cls in _typed_dict_chain(options):
        node = _module_classes(cls.__module__).get(cls.__qualname__)
        if node is None:  # not a module-level class (one made in a function): its own source
            try:
                node = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
            except (OSError, TypeError, SyntaxError):  # no source (a byte-code-only install): no docs
                continue
        body = node.body if isinstance(node, ast.ClassDef) else []
        for item, after in zip(body, [*body[1:], None], strict=True):
            if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                found.setdefault(item.target.id, inspect.cleandoc(after.value.value))
    return {name: found.get(name, "") for name in declared(options)}


@cache
def _module_classes(module: str) -> dict[str, ast.stmt]:
    """The module-level classes of ``module``'s source by name (one parse for all its declarations)."""
    try:
        source = inspect.getsource(sys.modules[module])
    except (KeyError, OSError, TypeError):
        return {}
    return {node.name: node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)}


def _typed_dict_chain(options: type) -> list[type]:
    """``options`` and the ``TypedDict`` classes it extends."""
    out = [options]
    for base in getattr(options, "__orig_bases__", ()):
        if isinstance(base, type) and hasattr(base, "__required_keys__"):
            out += _typed_dict_chain(base)
    return out


def add_flags(parser: argparse.ArgumentParser, options: type, command: str = "",
              only: Iterable[str] | None = None) -> None:
    """Add the flags of ``options`` (of those named in ``only``) to ``command``'s parser, each with its field
    name as ``dest`` (a mapping option's keys: their own names)."""
    chosen = None if only is None else set(only)
    for name, option in declared(options).items():
        if chosen is not None and name not in chosen:
            continue
        if option.flag is not None:
            parser.add_argument(option.flag, dest=name, **option.argparse_kwargs(command))
        for key, sub in option.keys.items():
            if sub.flag is not None:
                parser.add_argument(sub.flag, dest=key, **sub.argparse_kwargs(command))


def from_args(args: argparse.Namespace, options: type) -> dict[str, Any]:
    """The options that parsed flags (``add_flags``) give: those not left out (None, an empty list)."""
    out: dict[str, Any] = {}
    for name, option in declared(options).items():
        if option.keys:
            value: Any = {k: getattr(args, k) for k in option.keys if getattr(args, k, None) is not None} or None
        else:
            value = getattr(args, name, None) if option.flag is not None else None
        if value is not None and value != []:
            out[name] = value
    return out


def check_keywords(given: Iterable[str], options: type, where: str, *, also: Iterable[str] = (),
                   wider: tuple[type, str] | None = None) -> None:
    """``RunError`` for the first of ``given`` that is not a field of ``options``, naming the closest of them
    and of ``also`` (the function's other keywords). ``wider``: (options, function) where a field of those,
    not of ``options``, applies (say so instead)."""
    fields = declared(options)
    for key in given:
        if key in fields:
            continue
        if wider is not None and key in declared(wider[0]):
            raise RunError(f"{where} does not take {key!r}: it is an option of {wider[1]} only.")
        raise RunError(f"{where} got an unknown option {key!r}.{closest(key, [*fields, *also])}")


def takes_options(options: type, heading: str) -> Callable[[F], F]:
    """Decorate a function that takes ``**options: Unpack[options]``: its ``inspect.signature`` shows every
    option as a keyword (default None), and its docstring ends with ``heading`` and a line per option (the
    flag, and the field's docstring)."""

    def decorate(function: F) -> F:
        signature = inspect.signature(function)
        types = get_type_hints(options)
        params = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=types[name])
                   for name in declared(options)]
        setattr(function, "__signature__", signature.replace(parameters=params))  # noqa: B010 - not typed
        function.__doc__ = (function.__doc__ or "").rstrip() + "\n\n" + textwrap.indent(
            options_doc(options, heading), "    ")
        return function

    return decorate


def options_doc(options: type, heading: str) -> str:
    """``heading``, then a ``- ``name`` (flag; run config key): docstring`` item per option, wrapped."""
    lines = [heading, ""]
    described = docs(options)
    for name, option in declared(options).items():
        flags = [f"``{f}``" for f in (option.flag, *(k.flag for k in option.keys.values())) if f]
        where = ", ".join(flags) + (f"; ``{name}:`` in a run config" if option.file else "")
        text = " ".join(described[name].split()) or "(undocumented)"
        lines += textwrap.wrap(f"- ``{name}`` ({where}): {text}" if where else f"- ``{name}``: {text}", width=112,
                               subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(lines)

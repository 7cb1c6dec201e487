"""The bounded Jinja sandbox every template renders in.

Jinja's immutable sandbox keeps a template away from Python internals, but
not from memory or time: ``{{ 'a'|center(2000000000) }}``, a list of 100,000
strings of 100,000 characters joined, or two nested ``range(100000)`` loops
run until the machine gives out. This environment adds bounds, each checked
before the large value is built where the size can be known in advance:

* **Template files** are read at most ``MAX_TEMPLATE_BYTES`` + 1 bytes
  (``_BoundedLoader``), so a 100 MiB file is refused without being read.
* **Values**: no string a template builds may pass ``max_chars`` characters
  (the prompt cap), no list ``MAX_ITEMS`` items. Repetition (``*``), padding
  (``center``, ``ljust``, ``rjust``, ``zfill``, ``indent``, ``format``, ``%``,
  ``expandtabs``), ``replace``, ``translate`` and ``join`` are checked before
  they run; other filters, calls and ``+`` are checked on their result, which
  is at most a few times the size of bounded inputs. The size of a list counts
  its items' sizes (a list of 100,000 references to one long string is as big
  as its text), so printing it cannot blow up either.
* **Output**: the prompt, and every block, macro or ``{% set %}`` capture, is
  joined piece by piece and refused once it passes ``max_chars``; ``~``
  goes through the same join.
* **Time**: a render has ``max_seconds``; the deadline is checked at every
  call, every loop start and every 256th iteration of every ``for`` loop, so
  nested loops and recursive macros stop.

A refusal raises ``TemplateLimitError`` (a ``SecurityError``); the renderer
turns it into a one-line ``TemplateError`` naming the template, its line and
the limit. Built-in templates stay within every bound by far, and render as
fast: the non-growing filters they use (``trim``, ...) are not wrapped.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import posixpath
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import jinja2
import jinja2.compiler
import jinja2.filters
import jinja2.nodes
import jinja2.sandbox
import jinja2.utils

__all__ = [
    "MAX_EXPONENT_BITS",
    "MAX_ITEMS",
    "MAX_PROMPT_CHARS",
    "MAX_RENDER_SECONDS",
    "MAX_TEMPLATE_BYTES",
    "BoundedSandbox",
    "TemplateLimitError",
]

MAX_TEMPLATE_BYTES = 1024 * 1024
"""Largest template file read (the built-in templates are under 2 KB); ``Renderer(max_template_bytes=N)``."""

MAX_PROMPT_CHARS = 2_000_000
"""Most characters one rendered prompt (system or user part) or any string built inside a template may have:
about 500,000 tokens, more than any model's context. ``Renderer(max_prompt_chars=N)`` changes it."""

MAX_ITEMS = 1_000_000
"""Most items a list or tuple built inside a template may have."""

MAX_RENDER_SECONDS = 10.0
"""Longest one render may take (a built-in prompt takes well under a millisecond);
``Renderer(max_render_seconds=S)`` changes it."""

MAX_EXPONENT_BITS = 100_000
"""Largest integer (in bits) ``*`` and ``**`` may produce in a template."""

_RAISE = {
    "chars": "Renderer(max_prompt_chars=N) raises it",
    "seconds": "Renderer(max_render_seconds=S) raises it",
}


class TemplateLimitError(jinja2.sandbox.SecurityError):
    """A template passed a size or time bound (the message names the limit)."""


def _too_big(what: str, size: int, limit: int, unit: str = "characters") -> TemplateLimitError:
    how = f" ({_RAISE['chars']})" if unit == "characters" else ""
    return TemplateLimitError(f"{what} would be {size:,} {unit}, over the template limit of {limit:,}{how}.")


class _BoundedLoader(jinja2.FileSystemLoader):
    """A ``FileSystemLoader`` that reads at most ``limit`` + 1 bytes of a file and refuses a larger one."""

    def __init__(self, searchpath: str, limit: int) -> None:
        super().__init__(searchpath)
        self.limit = limit

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        pieces = jinja2.loaders.split_template_path(template)
        for searchpath in self.searchpath:
            filename = posixpath.join(searchpath, *pieces)
            if os.path.isfile(filename):
                break
        else:
            raise jinja2.TemplateNotFound(template)
        with open(filename, "rb") as f:
            data = f.read(self.limit + 1)
        if len(data) > self.limit:
            from promptgrid.errors import TemplateError

            raise TemplateError(f"{os.path.normpath(filename)}: the template is over the limit of {self.limit:,} "
                                "bytes (MAX_TEMPLATE_BYTES; Renderer(max_template_bytes=N) raises it). "
                                "Check that it is the file you meant.")
        try:
            contents = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            from promptgrid.errors import TemplateError

            raise TemplateError(f"{os.path.normpath(filename)}: not UTF-8 text (byte {exc.start}). "
                                "Save the template as UTF-8.") from None
        mtime = os.path.getmtime(filename)

        def uptodate() -> bool:
            try:
                return os.path.getmtime(filename) == mtime
            except OSError:
                return False

        return contents, os.path.normpath(filename), uptodate


class _CodeGenerator(jinja2.compiler.CodeGenerator):
    """Jinja's code generator with every ``for`` loop's iterable passed through the ``_pg_loop`` filter
    (the deadline check) and ``~`` joined through the environment's bounded ``concat``."""

    def visit_Template(self, node: jinja2.nodes.Template, frame: Any = None) -> None:
        for loop in node.find_all(jinja2.nodes.For):
            loop.iter = jinja2.nodes.Filter(loop.iter, "_pg_loop", [], [], None, None, lineno=loop.iter.lineno)
        super().visit_Template(node, frame)

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: Any) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:  # pragma: no cover - autoescape is off
            super().visit_Concat(node, frame)
            return
        self.write("concat(map(str, (")  # the module's ``concat`` is ``environment.concat``
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(")))")


# Filters that never make their value bigger than their input: not wrapped (the built-in templates use them).
_NON_GROWING = frozenset({
    "abs", "attr", "capitalize", "count", "d", "default", "first", "float", "int", "last", "length", "lower",
    "map", "max", "min", "random", "reject", "rejectattr", "reverse", "round", "safe", "select", "selectattr",
    "sort", "striptags", "title", "trim", "truncate", "unique", "upper", "wordcount",
})
_FIELD_DIGITS = re.compile(r"\d+")
# the parts of a format string that can ask for padding: %-conversions and {...} fields (one nesting level)
_FORMAT_FIELDS = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(?:\d+|\*)?(?:\.(?:\d+|\*))?|\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")
_PAD_METHODS = frozenset({"center", "ljust", "rjust", "zfill"})


class BoundedSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with the size and time bounds of this module (see its docstring)."""

    code_generator_class = _CodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, *, max_chars: int = MAX_PROMPT_CHARS, max_seconds: float = MAX_RENDER_SECONDS,
                 **options: Any) -> None:
        super().__init__(**options)
        self.max_chars = max_chars
        self.max_seconds = max_seconds
        # The render's deadline: a plain attribute (a thread-local costs a microsecond per render). Renders on
        # several threads at once share it; each start() moves it later, so no render is cut short by another.
        self._deadline = math.inf
        for name, func in list(self.filters.items()):
            if name not in _NON_GROWING:
                self.filters[name] = self._checked_filter(func)
        self.filters.update({
            "center": self._center, "indent": self._indent, "join": self._join, "format": self._format,
            "replace": self._replace, "batch": self._batch, "slice": self._slice, "sum": self._sum,
            "_pg_loop": self._loop,
        })

    # ------------------------------------------------------------------ time

    def start(self) -> None:
        """Start the clock of one render."""
        self._deadline = time.monotonic() + self.max_seconds

    def stop(self) -> None:
        self._deadline = math.inf

    def check_time(self) -> None:
        if time.monotonic() > self._deadline:
            raise TemplateLimitError(f"the render took longer than the template limit of {self.max_seconds:g} s "
                                     f"({_RAISE['seconds']}); a loop or macro runs too long.")

    def _loop(self, iterable: Any) -> Iterator[Any]:
        self.check_time()
        deadline = self._deadline
        n = 0
        for item in iterable:
            n += 1
            if not n & 255 and time.monotonic() > deadline:
                self.check_time()
            yield item

    # ------------------------------------------------------------------ sizes

    def size(self, value: Any, budget: int) -> int:
        """How big ``value`` prints, roughly (characters; items count too), stopping once past ``budget``."""
        try:
            return _size(value, budget)
        except RecursionError:
            return budget + 1

    def check_value(self, value: Any, what: str) -> Any:
        if isinstance(value, (str, bytes)):
            if len(value) > self.max_chars:
                raise _too_big(what, len(value), self.max_chars)
        elif isinstance(value, (list, tuple, dict)):
            if len(value) > MAX_ITEMS:
                raise _too_big(what, len(value), MAX_ITEMS, "items")
            size = self.size(value, self.max_chars)
            if size > self.max_chars:
                raise _too_big(f"{what} (printed)", size, self.max_chars)
        elif type(value) is int and value.bit_length() > MAX_EXPONENT_BITS:
            raise _too_big(what, value.bit_length(), MAX_EXPONENT_BITS, "bits")
        return value

    def concat(self, parts: Iterable[str]) -> str:
        """Join output pieces (the prompt, blocks, macros, captures, ``~``), refusing past ``max_chars``.

        A list is measured before it is joined; a generator (a render's output) is taken 32 pieces at a
        time, so it stops soon after the limit without holding more than a few pieces past it.
        """
        limit = self.max_chars
        if type(parts) is not list:
            it = iter(parts)
            parts = list(itertools.islice(it, 64))
            if len(parts) == 64:  # a long output (built-in prompts have about 10 pieces): keep measuring
                total = sum(map(len, parts))
                while total <= limit:
                    batch = list(itertools.islice(it, 64))
                    if not batch:
                        break
                    total += sum(map(len, batch))
                    parts += batch
        if sum(map(len, parts)) > limit:
            raise self._output_limit()
        return "".join(parts)

    def _output_limit(self) -> TemplateLimitError:
        return TemplateLimitError(f"the rendered text passed the template limit of {self.max_chars:,} characters "
                                  f"({_RAISE['chars']}).")

    def _checked_filter(self, func: Callable[..., Any]) -> Callable[..., Any]:
        name = getattr(func, "__name__", "filter").removeprefix("do_")

        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            return self.check_value(func(*args, **kwargs), f"the result of the {name} filter")

        return checked

    def _width(self, width: Any, what: str, base: int = 0, times: int = 1) -> None:
        if type(width) is int and base + max(width, 0) * times > self.max_chars:
            raise _too_big(what, base + width * times, self.max_chars)

    def _fields(self, fmt: Any, args: Iterable[Any], what: str) -> None:
        """Refuse a format string whose widths/precisions (literal, or ints passed for ``*``) pass the cap."""
        if isinstance(fmt, (str, bytes)):
            text = fmt if isinstance(fmt, str) else fmt.decode("latin-1")
            for digits in (d for field in _FORMAT_FIELDS.findall(text) for d in _FIELD_DIGITS.findall(field)):
                if len(digits) > 12 or int(digits) > self.max_chars:
                    raise TemplateLimitError(f"{what}: a width or precision of {digits[:20]} is over the template "
                                             f"limit of {self.max_chars:,} characters ({_RAISE['chars']}).")
        for arg in args:
            if type(arg) is int:
                self._width(arg, what)

    # ------------------------------------------------------------------ operators and calls

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and isinstance(right, (int, float)) and abs(right) > _MAX_EXPONENT:
            raise TemplateLimitError(f"exponent {right} is over the template limit of {_MAX_EXPONENT}.")
        if operator == "**" and type(left) is int and type(right) is int and right > 0 \
                and left.bit_length() * right > MAX_EXPONENT_BITS:
            raise _too_big("the power", left.bit_length() * right, MAX_EXPONENT_BITS, "bits")
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, bytes, list, tuple)) and type(times) is int and times > 1:
                    if len(seq) * times > _MAX_REPEAT:
                        raise TemplateLimitError(
                            f"repeating a sequence to {len(seq) * times:,} items is over the template limit of "
                            f"{_MAX_REPEAT:,}.")
                    size = self.size(seq, self.max_chars) * times
                    if size > self.max_chars:
                        raise _too_big("the repeated sequence", size, self.max_chars)
        if operator == "%" and isinstance(left, (str, bytes)):
            self._fields(left, right if isinstance(right, tuple) else (right,), "the % format")
        result = super().call_binop(context, operator, left, right)
        if operator != "%" or isinstance(left, (str, bytes)):
            self.check_value(result, f"the result of {operator}")
        return result

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        __self.check_time()
        owner = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)  # str.format comes wrapped
        if isinstance(owner, (str, bytes)):
            __self._check_method(owner, getattr(__obj, "__name__", ""), args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        return __self.check_value(result, f"the result of {getattr(__obj, '__name__', 'the call')}()")

    def _check_method(self, s: str | bytes, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        what = f"the result of {name}()"
        if name in _PAD_METHODS and args:
            self._width(args[0], what)
        elif name == "expandtabs":
            tab = args[0] if args else kwargs.get("tabsize", 8)
            self._width(tab, what, len(s), s.count("\t") if isinstance(s, str) else s.count(b"\t"))
        elif name == "replace" and len(args) >= 2:
            self._check_replace(s, args[0], args[1], args[2] if len(args) > 2 else -1, what)
        elif name == "join" and args:
            self._join_size(s, args[0], what)
        elif name in ("format", "format_map"):
            self._fields(s, [*args, *kwargs.values()], what)
        elif name == "translate" and args and isinstance(args[0], Mapping):
            longest = max((len(v) for v in args[0].values() if isinstance(v, (str, bytes))), default=1)
            self._width(longest, what, 0, len(s))

    def _check_replace(self, s: Any, old: Any, new: Any, count: Any, what: str) -> None:
        # old and new must be of s's own type; one branch per type, so that the types of count() line up
        if isinstance(s, str) and isinstance(old, type(s)) and isinstance(new, type(s)):
            n = len(s) + 1 if not old else s.count(old)
        elif isinstance(s, bytes) and isinstance(old, type(s)) and isinstance(new, type(s)):
            n = len(s) + 1 if not old else s.count(old)
        else:
            return
        if type(count) is int and count >= 0:
            n = min(n, count)
        size = len(s) + n * (len(new) - len(old))
        if size > self.max_chars:
            raise _too_big(what, size, self.max_chars)

    def _join_size(self, sep: Any, items: Any, what: str) -> None:
        if isinstance(items, (list, tuple)):
            size = self.size(items, self.max_chars) + len(sep) * max(len(items) - 1, 0)
            if size > self.max_chars:
                raise _too_big(what, size, self.max_chars)

    # ------------------------------------------------------------------ filters that grow

    @jinja2.pass_eval_context
    def _join(self, eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> str:
        if attribute is not None:
            value = map(jinja2.filters.make_attrgetter(eval_ctx.environment, attribute), value)
        parts: list[str] = []
        total = 0
        sep = str(d)
        for item in value:
            text = str(item)
            total += len(text) + (len(sep) if parts else 0)
            if total > self.max_chars:
                raise TemplateLimitError(f"the result of the join filter passed the template limit of "
                                         f"{self.max_chars:,} characters ({_RAISE['chars']}).")
            parts.append(text)
        return sep.join(parts)

    def _center(self, value: Any, width: int = 80) -> str:
        self._width(width, "the result of the center filter")
        return jinja2.filters.do_center(value, width)

    def _indent(self, s: Any, width: Any = 4, first: bool = False, blank: bool = False) -> str:
        text = str(s)
        lines = text.count("\n") + 1
        pad = len(width) if isinstance(width, str) else width
        self._width(pad, "the result of the indent filter", len(text), lines)
        return jinja2.filters.do_indent(s, width, first, blank)

    def _format(self, value: Any, *args: Any, **kwargs: Any) -> str:
        self._fields(value, [*args, *kwargs.values()], "the format filter")
        return self.check_value(jinja2.filters.do_format(value, *args, **kwargs), "the result of the format filter")

    @jinja2.pass_eval_context
    def _replace(self, eval_ctx: Any, s: Any, old: Any, new: Any, count: Any = None) -> str:
        self._check_replace(str(s), str(old), str(new), count if count is not None else -1,
                            "the result of the replace filter")
        return jinja2.filters.do_replace(eval_ctx, s, old, new, count)

    def _batch(self, value: Any, linecount: int, fill_with: Any = None) -> Iterator[list[Any]]:
        if type(linecount) is int and linecount > MAX_ITEMS:
            raise _too_big("a batch", linecount, MAX_ITEMS, "items")
        return jinja2.filters.do_batch(value, linecount, fill_with)

    def _slice(self, value: Any, slices: int, fill_with: Any = None) -> Iterator[list[Any]]:
        if type(slices) is int and slices > MAX_ITEMS:
            raise _too_big("slices", slices, MAX_ITEMS, "items")
        return jinja2.filters.do_slice(value, slices, fill_with)

    @jinja2.pass_environment
    def _sum(self, environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
        if attribute is not None:
            iterable = map(jinja2.filters.make_attrgetter(environment, attribute), iterable)
        total = list(start) if type(start) is list else start  # lists are extended in place: linear, not quadratic
        for item in self._loop(iterable):
            if type(total) is list and type(item) is list:
                total.extend(item)
            else:
                total = total + item
            if isinstance(total, (str, bytes, list, tuple)) and len(total) > MAX_ITEMS:
                self.check_value(total, "the result of the sum filter")
        return self.check_value(total, "the result of the sum filter")


_MAX_EXPONENT = 1024
_MAX_REPEAT = MAX_ITEMS


def _size(value: Any, budget: int, seen: dict[int, int] | None = None) -> int:
    """See ``BoundedSandbox.size``: strings count their length, containers their items' sizes (+1 each),
    other objects the length of their ``repr`` (worked out once per object)."""
    if seen is None:
        seen = {}
    if isinstance(value, (str, bytes)):
        return len(value)
    if value is None or isinstance(value, (bool, int, float)):
        return 1
    if isinstance(value, (list, tuple, set, frozenset)):
        return _items_size(value, budget, seen)
    if isinstance(value, Mapping):
        total = len(value)
        for k, v in value.items():
            if total > budget:
                break
            total += _size(k, budget - total, seen) + _size(v, budget - total, seen)
        return total
    if isinstance(value, jinja2.utils.Namespace):
        return _size(dict(value._Namespace__attrs), budget, seen)
    return _repr_size(value, seen)


def _items_size(value: list[Any] | tuple[Any, ...] | set[Any] | frozenset[Any], budget: int,
                seen: dict[int, int]) -> int:
    """``_size`` of a list, tuple or set: its length plus its items' sizes, stopped once over ``budget``."""
    total = len(value)
    for item in value:
        if total > budget:
            break
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif not (item is None or isinstance(item, (bool, int, float))):
            total += _size(item, budget - total, seen)
    return total


def _repr_size(value: Any, seen: dict[int, int]) -> int:
    """``_size`` of any other object: the length of its ``repr``, worked out once per object (1 if it has none)."""
    ident = id(value)
    if ident not in seen:
        try:
            seen[ident] = len(repr(value))
        except Exception:  # noqa: BLE001 - an object that cannot be printed costs nothing to print
            seen[ident] = 1
    return seen[ident]

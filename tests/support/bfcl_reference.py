"""bfcl-eval as a reference scorer, and the agreement corpus (shared by the tests and benchmarks/score.py).

Not a test module. It loads bfcl-eval 2026.3.23's own ``default_decode_ast_prompting``
and ``ast_checker`` and calls them as ``format_sensitivity_runner`` does
(``_evaluate_single_ast_entry``: decode, ``is_function_calling_format_output``,
then ``ast_checker`` with the entry id as the category and Python rules).

bfcl-eval is installed ``--no-deps``: importing its checker pulls the model
registry (provider SDKs), tenacity and tree-sitter. ``load_reference`` runs the
two bfcl-eval modules with stand-ins for exactly those modules
(``support.bfcl``), which are in ``sys.modules`` only while they run;
the two modules themselves are loaded under private names, so nothing else in
the test session sees a stand-in or a half-stubbed module.

The corpus: for every (config, entry) of bfcl:format_sensitivity, a correct
response written in the config's format from the ground truth (first
acceptable value of each parameter; parameters whose first value is ``""``
left out), plus corrupted variants of it (``KINDS``).
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from support.bfcl import load_bfcl_modules

# --------------------------------------------------------------------------- bfcl-eval reference

@dataclass(frozen=True)
class Reference:
    """The bfcl-eval functions the format-sensitivity runner calls."""

    decode_ast: Callable[..., Any]
    ast_checker: Callable[..., Any]
    is_function_calling_format_output: Callable[[Any], bool]
    parse_prompt_variation_params: Callable[[str], tuple[str, bool, str, str, str]]
    ReturnFormat: Any
    Language: Any

    def verdict(
        self, text: str, config: str, entry_id: str, functions: Any, ground_truth: Any
    ) -> tuple[bool, str | None]:
        """(valid, error_type) exactly as ``_evaluate_single_ast_entry`` would record them."""
        return_format, tag, *_ = self.parse_prompt_variation_params(config)
        try:
            decoded = self.decode_ast(text, self.ReturnFormat(return_format), tag)
        except Exception:  # noqa: BLE001 - bfcl-eval catches everything here too
            return False, "ast_decoder:decoder_failed"
        if not self.is_function_calling_format_output(decoded):
            return False, "ast_decoder:decoder_wrong_output_format"
        result = self.ast_checker(functions, decoded, ground_truth, self.Language.PYTHON, entry_id, "reference-model")
        return bool(result["valid"]), None if result["valid"] else result["error_type"]


def load_reference() -> Reference | None:
    """bfcl-eval's decoder and checker, or ``None`` when bfcl-eval is not installed."""
    loaded = load_bfcl_modules("bfcl_eval.eval_checker.ast_eval.ast_checker", "bfcl_eval.model_handler.utils")
    if loaded is None:
        return None
    checker, utils = loaded
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.utils import is_function_calling_format_output

    return Reference(
        decode_ast=utils.default_decode_ast_prompting,
        ast_checker=checker.ast_checker,
        is_function_calling_format_output=is_function_calling_format_output,
        parse_prompt_variation_params=utils.parse_prompt_variation_params,
        ReturnFormat=ReturnFormat,
        Language=Language,
    )


@dataclass(frozen=True)
class Entry:
    """One format-sensitivity entry as bfcl-eval's evaluator sees it."""

    id: str
    functions: list[dict[str, Any]]
    ground_truth: list[dict[str, Any]]


def load_entries() -> tuple[list[str], list[Entry]]:
    """bfcl-eval's 26 configs and its 200 format-sensitivity entries (functions as the checker gets them)."""
    from bfcl_eval.constants.eval_config import FORMAT_SENSITIVITY_IDS_PATH
    from bfcl_eval.utils import (
        get_all_format_sensitivity_configs,
        load_ground_truth_entry,
        load_test_entries_from_id_file,
    )

    categories, entries = load_test_entries_from_id_file(FORMAT_SENSITIVITY_IDS_PATH)
    answers: dict[str, Any] = {}
    for category in categories:
        for item in load_ground_truth_entry(category):
            answers[item["id"]] = item["ground_truth"]
    out = [Entry(e["id"], e["function"], answers[e["id"]]) for e in entries]
    return list(get_all_format_sensitivity_configs()), out


# --------------------------------------------------------------------------- corpus

Call = tuple[str, dict[str, Any]]

KINDS = (
    "correct",
    "wrong_func_name",
    "missing_required",
    "wrong_type",
    "unknown_param",
    "wrong_value",
    "swapped_order",
    "missing_tag",
    "per_call_functions",
    "per_call_toolcall",
    "xml_type_names",
    "prose_before",
    "prose_only",
    "other_format",
    "unclosed",
    "empty",
)


@dataclass(frozen=True)
class Item:
    """One response of the corpus."""

    config: str
    entry_id: str
    kind: str
    text: str


def _schema(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for f in functions:
        if f["name"] == name:
            return f
    return {"parameters": {"properties": {}, "required": []}}


def _first(values: Sequence[Any]) -> Any:
    return values[0] if values else ""


def _concrete_dict(answer: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, values in answer.items():
        v = _first(values) if isinstance(values, list) else values
        if not (isinstance(v, str) and v == ""):
            out[key] = v
    return out


def correct_calls(entry: Entry) -> list[Call]:
    """The ground truth as concrete calls: first acceptable value, ``""``-first parameters left out."""
    calls: list[Call] = []
    for gt in entry.ground_truth:
        ((name, answer),) = gt.items()
        props = _schema(entry.functions, name)["parameters"].get("properties", {})
        params: dict[str, Any] = {}
        for key, values in answer.items():
            v = _first(values)
            if isinstance(v, str) and v == "":
                continue
            spec = props.get(key, {})
            if spec.get("type") == "dict" and isinstance(v, dict):
                v = _concrete_dict(v)
            elif spec.get("type") == "array" and spec.get("items", {}).get("type") == "dict" and isinstance(v, list):
                v = [_concrete_dict(d) if isinstance(d, dict) else d for d in v]
            params[key] = v
        calls.append((name, params))
    return calls


def _xml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "dict"
    if value is None:
        return "null"
    return "string"


def _xml_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return repr(value)
    if value is None:
        return ""
    return str(value)


def _attr(text: str) -> str:
    return escape(text, {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})


def render(calls: Sequence[Call], fmt: str, *, type_names: Mapping[str, str] | None = None) -> str:
    """The calls in one return format (no tag), as a model following the prompt would write them."""
    rename = type_names or {}
    if fmt == "python":
        parts = [f"{name}({', '.join(f'{k}={v!r}' for k, v in params.items())})" for name, params in calls]
        return "[" + ", ".join(parts) + "]"
    if fmt == "json":
        body = json.dumps([{"function": name, "parameters": params} for name, params in calls], ensure_ascii=False)
        return f"```json\n{body}\n```"
    out = ["<functions>"]
    for name, params in calls:
        out.append(f'<function name="{_attr(name)}">')
        if fmt == "verbose_xml":
            out.append("<params>")
            for k, v in params.items():
                t = rename.get(_xml_type(v), _xml_type(v))
                out.append(f'<param name="{_attr(k)}" value="{_attr(_xml_text(v))}" type="{t}"/>')
            out.append("</params>")
        else:
            for k, v in params.items():
                t = rename.get(_xml_type(v), _xml_type(v))
                out.append(f'<param name="{_attr(k)}" type="{t}">{escape(_xml_text(v))}</param>')
        out.append("</function>")
    out.append("</functions>")
    return "".join(out)


def _tag(body: str, tag: bool) -> str:
    return f"<TOOLCALL>{body}</TOOLCALL>" if tag else body


_OTHER = {"python": "json", "json": "python", "verbose_xml": "concise_xml", "concise_xml": "python"}
_WRONG_TYPE_NAMES = {"integer": "int", "string": "str", "boolean": "bool"}


def _wrong_type(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return 12345
    if isinstance(value, list):
        return "not a list"
    if isinstance(value, dict):
        return "not a dict"
    return None


def _corrupt(kind: str, calls: list[Call], entry: Entry, fmt: str, tag: bool) -> str | None:
    """The corrupted response of one kind, or None where the kind does not apply."""
    calls = copy.deepcopy(calls)
    if kind == "correct":
        return _tag(render(calls, fmt), tag)
    if kind == "wrong_func_name":
        name, params = calls[0]
        calls[0] = (name + "_v2", params)
        return _tag(render(calls, fmt), tag)
    if kind == "missing_required":
        name, params = calls[0]
        required = _schema(entry.functions, name)["parameters"].get("required", [])
        present = [p for p in required if p in params]
        if not present:
            return None
        del params[present[0]]
        return _tag(render(calls, fmt), tag)
    if kind == "wrong_type":
        name, params = calls[0]
        for k, v in params.items():
            if v is not None:
                params[k] = _wrong_type(v)
                return _tag(render(calls, fmt), tag)
        return None
    if kind == "unknown_param":
        calls[0][1]["unexpected_param_zz"] = 1
        return _tag(render(calls, fmt), tag)
    if kind == "wrong_value":
        for _name, params in calls:
            for k, v in params.items():
                if isinstance(v, str) and not isinstance(v, bool):
                    params[k] = "zzqx completely wrong value"
                    return _tag(render(calls, fmt), tag)
                if isinstance(v, int) and not isinstance(v, bool):
                    params[k] = v + 7919
                    return _tag(render(calls, fmt), tag)
        return None
    if kind == "swapped_order":
        if len(calls) < 2:
            return None
        return _tag(render(list(reversed(calls)), fmt), tag)
    if kind == "missing_tag":
        return render(calls, fmt) if tag else None
    if kind == "per_call_functions":
        if fmt not in ("verbose_xml", "concise_xml") or len(calls) < 2:
            return None
        return _tag("\n".join(render([c], fmt) for c in calls), tag)
    if kind == "per_call_toolcall":
        if not tag or len(calls) < 2:
            return None
        return "\n".join(_tag(render([c], fmt), True) for c in calls)
    if kind == "xml_type_names":
        if fmt not in ("verbose_xml", "concise_xml"):
            return None
        text = render(calls, fmt, type_names=_WRONG_TYPE_NAMES)
        return _tag(text, tag) if text != render(calls, fmt) else None
    if kind == "prose_before":
        return "Sure! Here are the function calls you asked for:\n" + _tag(render(calls, fmt), tag)
    if kind == "prose_only":
        return "I am sorry, but I cannot help with that request without more information."
    if kind == "other_format":
        return _tag(render(calls, _OTHER[fmt]), tag)
    if kind == "unclosed":
        text = _tag(render(calls, fmt), tag)
        closer = {"python": ")", "json": "}", "verbose_xml": "</params>", "concise_xml": "</param>"}[fmt]
        cut = text.rfind(closer)
        return text[:cut] + text[cut + len(closer):] if cut >= 0 else None
    if kind == "empty":
        return ""
    raise ValueError(f"unknown corpus kind {kind!r}")


def build_corpus(configs: Sequence[str], entries: Sequence[Entry], reference: Reference | None = None, *,
                 kinds: Sequence[str] = KINDS, corrupt_fraction: float = 1.0, seed: int = 0) -> list[Item]:
    """The agreement corpus: correct responses for every (config, entry); corruptions for a seeded share.

    ``corrupt_fraction`` < 1 keeps corruptions for that share of the
    (config, entry) pairs only, chosen with ``random.Random(seed)``.
    """
    rng = random.Random(seed)
    items: list[Item] = []
    parsed = {c: _parse_config(c) for c in configs}
    for entry in entries:
        calls = correct_calls(entry)
        for config in configs:
            fmt, tag = parsed[config]
            keep = corrupt_fraction >= 1.0 or rng.random() < corrupt_fraction
            for kind in kinds:
                if kind != "correct" and not keep:
                    continue
                text = _corrupt(kind, calls, entry, fmt, tag)
                if text is not None:
                    items.append(Item(config, entry.id, kind, text))
    return items


_CONFIG = re.compile(r"ret_fmt=(\w+)&tool_call_tag=(True|False)&")


def _parse_config(config: str) -> tuple[str, bool]:
    match = _CONFIG.match(config)
    if match is None:
        raise ValueError(f"not a bfcl-eval format-sensitivity config: {config!r}")
    return match.group(1), match.group(2) == "True"


def iter_reference(reference: Reference, items: Sequence[Item], entries: Mapping[str, Entry]
                   ) -> Iterator[tuple[bool, str | None]]:
    """bfcl-eval's (valid, error_type) for each item; ``(False, "crash:...")`` where bfcl-eval raises."""
    for item in items:
        entry = entries[item.entry_id]
        try:
            yield reference.verdict(item.text, item.config, item.entry_id, entry.functions, entry.ground_truth)
        except Exception as exc:  # noqa: BLE001 - a crash of the reference is a finding, not a test error
            yield False, f"crash:{type(exc).__name__}"

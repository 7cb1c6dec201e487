"""Synthetic result rows (``ResultRow``): realistic, seeded, for tests, benchmarks and a report preview.

The generator follows the trends the BFCL V4 blog reports (section 4: XML
return formats and Python function docs hurt, tool-call tags cost a little,
markdown and paraphrase change little) and the MASSIVE-Agents ones (lower
accuracy on non-Latin scripts, translation helping strong models and hurting
weak ones), so a report of synthetic rows looks like a report of a real run.
The rows are what a run's store would yield; nothing here is a measurement.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from promptgrid.matrix.running.results import ResultRow
from promptgrid.variants import DocFormat, PromptFormat, ReturnFormat, Variant, load_grid

__all__ = ["synthetic_rows"]

_RETURN = {ReturnFormat.PYTHON: 0.0, ReturnFormat.JSON: -0.1, ReturnFormat.VERBOSE_XML: -0.9,
           ReturnFormat.CONCISE_XML: -0.7}
_DOC = {DocFormat.JSON: 0.0, DocFormat.XML: -0.25, DocFormat.PYTHON: -0.45}
_LANG = {"en": 0.0, "de": -0.2, "es": -0.15, "it": -0.2, "fr": -0.15, "ja": -0.6, "hi": -0.8, "zh": -0.5}
_MODES = (
    "wrong_format",
    "missing_tool_call_tag",
    "wrong_function",
    "wrong_arguments",
    "missing_required",
    "unparseable",
)
_RESPONSES = {
    ReturnFormat.PYTHON: "[get_weather(city='{city}', unit='celsius')]",
    ReturnFormat.JSON: '[{{"function": "get_weather", "parameters": {{"city": "{city}", "unit": "celsius"}}}}]',
    ReturnFormat.VERBOSE_XML: (
        '<functions><function name="get_weather"><params><param name="city" value="{city}" type="string"/>'
        "</params></function></functions>"
    ),
    ReturnFormat.CONCISE_XML: (
        '<functions><function name="get_weather"><param name="city" type="string">{city}</param></function></functions>'
    ),
}
_CITIES = ("Paris", "Berlin", "Tōkyō", "São Paulo", "Zürich", "Mumbai", "Nairobi", "Lima")


def _effect(v: Variant, model_skill: float, lang: str) -> float:
    e = _RETURN.get(v.return_format, -0.3) + _DOC.get(v.doc_format, -0.2)
    if v.tool_call_tag:
        e -= 0.15 if model_skill > 0.5 else 0.6
    if v.prompt_format is PromptFormat.MARKDOWN:
        e += 0.05
    if v.prompt_style != "classic":
        e -= 0.05
    e += _LANG.get(lang, -0.4) * (1.5 - model_skill)
    translated = v.description_language != "en" or v.instruction_language != "en"
    if translated and lang != "en":
        e += 0.25 if model_skill > 0.5 else -0.35
        if v.instruction_language != "en":
            e -= 0.1
    return e


def synthetic_rows(
    *,
    models: Sequence[str] = ("acme/large-2", "acme/small-1"),
    grid: str = "bfcl_v4",
    n_cases: int = 40,
    languages: Sequence[str] = ("en",),
    repeats: int = 1,
    error_rate: float = 0.01,
    seed: int = 0,
) -> list[ResultRow]:
    """Rows for models x grid variants x cases (per language) x repeats, deterministic for a seed."""
    rng = random.Random(seed)
    variants = load_grid(grid).variants
    difficulty = [rng.gauss(0.0, 1.2) for _ in range(n_cases)]
    rows: list[ResultRow] = []
    for mi, model in enumerate(models):
        skill = 1.0 - 0.6 * mi / max(1, len(models) - 1) if len(models) > 1 else 0.8
        speed = 60.0 + 90.0 * mi
        for v in variants:
            for ci in range(n_cases):
                for lang in languages:
                    case_id = f"case_{ci:03d}" + ("" if len(languages) == 1 else f"_{lang}")
                    for r in range(repeats):
                        logit = 1.2 + 2.0 * skill - difficulty[ci] + _effect(v, skill, lang) + rng.gauss(0, 0.3)
                        p = 1 / (1 + math.exp(-logit))
                        failed_call = rng.random() < error_rate
                        ok = (not failed_call) and rng.random() < p
                        out_tokens = rng.randint(12, 80)
                        latency = out_tokens / speed + rng.uniform(0.2, 0.6)
                        city = _CITIES[ci % len(_CITIES)]
                        response = _RESPONSES[v.return_format].format(city=city)
                        if v.tool_call_tag:
                            response = f"<TOOLCALL>{response}</TOOLCALL>"
                        mode = None if ok or failed_call else _MODES[(ci + r + len(v.id)) % len(_MODES)]
                        if mode == "wrong_format":
                            response = "Sure! Here is the call: " + _RESPONSES[ReturnFormat.PYTHON].format(city=city)
                        elif mode == "unparseable":
                            response = "I cannot <help> with that & more"
                        rows.append(
                            ResultRow(
                                model=model,
                                variant_id=v.id,
                                case_id=case_id,
                                repeat=r,
                                status="error" if failed_call else "done",
                                response=None if failed_call else response,
                                error="RateLimitError: 429 Too Many Requests" if failed_call else None,
                                error_kind="rate_limit" if failed_call else None,
                                valid=False if failed_call else ok,  # a failed call is stored as invalid
                                error_code=None if failed_call else ("VALID" if ok else mode.upper()),  # type: ignore[union-attr]
                                failure_mode=mode,
                                format_agnostic_valid=None if failed_call else (ok or mode == "wrong_format"),
                                format_match=None
                                if failed_call
                                else mode not in ("wrong_format", "missing_tool_call_tag"),
                                function_selection_correct=None
                                if failed_call
                                else mode not in ("wrong_function", "unparseable"),
                                tool_tp=0 if failed_call or mode in ("wrong_function", "unparseable") else 1,
                                tool_fp=1 if mode == "wrong_function" else 0,
                                tool_fn=0 if ok else 1 if mode in ("wrong_function", "unparseable") else 0,
                                arg_tp=2 if ok else 1 if mode == "wrong_arguments" else 0,
                                arg_fp=1 if mode == "wrong_arguments" else 0,
                                arg_fn=0 if ok else 1,
                                # The one free-text answer (no call) is English: ITC language match is
                                # measured on it alone, against the case's language.
                                response_language="en" if mode == "unparseable" else None,
                                language_match=lang == "en" if mode == "unparseable" else None,
                                latency_s=None if failed_call else round(latency, 4),
                                input_tokens=0 if failed_call else 350 + 7 * ci,
                                output_tokens=0 if failed_call else out_tokens,
                                cost_usd=0.0
                                if failed_call
                                else round((350 + 7 * ci) * 1e-7 * (3 - mi) + out_tokens * 4e-7, 8),
                                dimensions=v.dimensions(),
                                label=v.label,
                                case_language=lang,
                                case_category=("simple", "multiple", "parallel", "parallel_multiple")[ci % 4],
                                case_group=f"case_{ci:03d}",
                            )
                        )
    return rows

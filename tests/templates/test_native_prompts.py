"""Native call mode: the templates send their task text without function docs or answer-format rules.

Constrained prompts are the prompt-mode messages unchanged (the model is told the format and forced into it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import promptgrid as pg
from promptgrid.records import Case
from promptgrid.templates import Renderer, load_catalog_file
from promptgrid.variants import BUILTIN_TEMPLATES, CallMode, PromptFormat, ReturnFormat, Variant
from support.builders import make_case

LANGUAGES = ("en", "de", "es", "fr", "it", "ja", "zh", "hi", "pt")  # every language of mini


@pytest.fixture(scope="module")
def mini() -> dict[str, list[Case]]:
    cases = pg.load_dataset("mini")
    by_lang = {lang: [c for c in cases if c.language == lang] for lang in LANGUAGES}
    assert all(by_lang.values()) and set(by_lang) == {c.language for c in cases}
    return by_lang


def _descriptions(function: object) -> list[str]:
    """Every description inside a function doc (function, parameters, nested)."""
    out = []
    stack = [function]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("description"), str) and len(node["description"]) > 12:
                out.append(node["description"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


@pytest.mark.parametrize("template", BUILTIN_TEMPLATES[:1] + BUILTIN_TEMPLATES[2:] + ("bfcl_v4_clean",))
@pytest.mark.parametrize("lang", LANGUAGES)
def test_native_messages_have_no_function_docs(mini: dict[str, list[Case]], template: str, lang: str) -> None:
    native = Variant(template=template, call_mode=CallMode.NATIVE, instruction_language="query",
                     description_language="query")
    prompt_mode = Variant(template=template, instruction_language="query", description_language="query")
    cases = mini[lang]
    natives = list(pg.render([native], cases))
    prompts = list(pg.render([prompt_mode], cases))
    formats = load_catalog_file("formats").strings
    for case, n, p in zip(cases, natives, prompts, strict=True):
        text = "\n".join(m["content"] for m in n.messages)
        functions = n.request["tools"] if n.request else []
        assert functions, case.id
        for name in n.request["tool_names"].values() if n.request else ():
            assert name not in text, (case.id, name)
        for tool in functions:
            for description in _descriptions(tool):
                assert description not in text, (case.id, description)
        assert formats["output_format_python"] not in text and "<TOOLCALL>" not in text
        assert "Action:" not in text and "ActionOne" not in text
        # the question is asked, and the task text is the prompt-mode one (a shorter prompt, same opening)
        assert case.query in text
        assert len(text) < len("\n".join(m["content"] for m in p.messages))
        assert n.messages[0]["content"][:40] == p.messages[0]["content"][:40]


@pytest.mark.parametrize("template", ["bfcl_v4", "bfcl_v4_clean"])
@pytest.mark.parametrize("layout", list(PromptFormat))
def test_native_bfcl_layouts_keep_persona_task_and_multiturn(template: str, layout: PromptFormat) -> None:
    text = load_catalog_file("classic").strings
    prompt = Renderer().render(Variant(template=template, prompt_format=layout, call_mode=CallMode.NATIVE),
                               make_case())
    system = prompt.messages[0]["content"]
    for key in ("persona", "task", "multiturn_behavior"):
        assert text[key].strip() in system
    for key in ("tool_call_no_tag", "available_tools", "heading_tool_call_format", "heading_available_tools"):
        assert text[key].split("{")[0].strip() not in system
    if layout is PromptFormat.MARKDOWN:
        assert f"## {text['heading_task']}" in system and f"## {text['heading_multiturn_behavior']}" in system
    assert prompt.request is None  # the templates layer renders messages; matrix attaches the request


@pytest.mark.parametrize("template", BUILTIN_TEMPLATES[:1] + BUILTIN_TEMPLATES[2:])
@pytest.mark.parametrize("fmt", list(ReturnFormat))
def test_constrained_messages_are_the_prompt_mode_messages(template: str, fmt: ReturnFormat) -> None:
    renderer = Renderer()
    case = make_case()
    base = Variant(template=template, return_format=fmt)
    constrained = Variant(template=template, return_format=fmt, call_mode=CallMode.CONSTRAINED)
    assert renderer.render(constrained, case).messages == renderer.render(base, case).messages


def test_user_template_sees_call_mode(tmp_path: Path) -> None:
    (tmp_path / "mine.j2").write_text("mode={{ call_mode }} docs={{ functions | length > 0 }}", encoding="utf-8")
    renderer = Renderer(tmp_path)
    for mode in CallMode:
        prompt = renderer.render(Variant(template="mine", call_mode=mode), make_case())
        assert prompt.messages[0]["content"] == f"mode={mode.value} docs=True"


def test_functions_are_localized_like_the_docs(mini: dict[str, list[Case]]) -> None:
    from promptgrid.translate import default_localization

    renderer = Renderer(localization=default_localization())
    case = mini["de"][0]
    english = Variant(call_mode=CallMode.NATIVE)
    german = Variant(call_mode=CallMode.NATIVE, description_language="query")
    assert renderer.functions(english, case) == tuple(case.functions)
    localized = renderer.functions(german, case)
    docs = renderer.render(Variant(template="bfcl_v4_clean", description_language="query"), case).messages[0]["content"]
    assert localized[0]["description"] != case.functions[0]["description"]
    assert localized[0]["description"] in docs

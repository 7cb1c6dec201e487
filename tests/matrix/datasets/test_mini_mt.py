"""The built-in ``mini-mt`` conversation set: its generator (``scripts/build_mini_mt.py``, loaded from the
repository as ``build``) and what the package reads at run time (``promptgrid.matrix.datasets._mini_mt``).

The acceptance checks: the shipped file is the generator's output, byte for
byte; every record's ground truth runs without refusal in ``Environment``;
the ground-truth fake scores every conversation valid in prompt, native and
constrained mode in every language, the prose fake none; a trajectory that
makes the forbidden state-changing call in a no-solution turn is scored
invalid. The run-based checks take a subset that covers every template and
every language (``PROMPTGRID_MINI_MT_FULL=1`` runs the ground truth of all
216 records, about 35 s on 2 shared cores).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import DatasetError
from promptgrid.matrix.conversations import (
    Conversation,
    ToolCall,
    is_conversation_dataset,
    load_conversations,
)
from promptgrid.matrix.datasets._conversations import SPEC_FORMS
from promptgrid.matrix.episodes._environment import _argument_problem
from promptgrid.matrix.scoring.state_check import check_conversation, run_ground_truth
from promptgrid.variants import CallMode, Variant
from support.scripts import ROOT, load_script

pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")

from promptgrid.matrix.datasets import _mini_mt  # noqa: E402  (after the skip: building needs bfcl-eval)
from support.episodes import run_conversations

build = load_script("scripts/build_mini_mt.py")
LANGS = _mini_mt.MINI_MT_LANGUAGES
TEMPLATES = 24


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return build.build_records()


@pytest.fixture(scope="module")
def conversations() -> list[Conversation]:
    return load_conversations("mini-mt")


def _covering(conversations: list[Conversation], per_template: int = 1) -> list[Conversation]:
    """Template n in languages n, n+4, ... (mod 9): every template and every language, few conversations."""
    by_id = {c.id: c for c in conversations}
    return [by_id[f"mini_mt_{n}_{LANGS[(n + 4 * k) % len(LANGS)]}"]
            for n in range(1, TEMPLATES + 1) for k in range(per_template)]


# --------------------------------------------------------------------------- the file and the loader

def test_committed_file_is_the_builders_output(records: list[dict]) -> None:
    assert _mini_mt.DATA_FILE.read_bytes() == build.render(records).encode("utf-8"), \
        "run: .venv/bin/python scripts/build_mini_mt.py --write"


def test_the_script_checks_and_writes_the_file_byte_for_byte(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``scripts/build_mini_mt.py``, run as a script, finds the shipped file up to date; ``--write --file``
    writes the same bytes; ``--check`` names the first line that differs, and a missing file, and exits 1."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_mini_mt.py"), "--check"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done
    assert "is up to date (216 conversations)" in done.stdout
    out = tmp_path / "new" / "mini_mt.jsonl"
    assert build.main(["--write", "--file", str(out)]) == 0
    assert out.read_bytes() == _mini_mt.DATA_FILE.read_bytes()
    assert build.main(["--check", "--file", str(out)]) == 0
    lines = out.read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b"Ciao", b"Salve", 1)  # mini_mt_1_it, its first turn
    out.write_bytes(b"\n".join(lines))
    capsys.readouterr()
    assert build.main(["--check", "--file", str(out)]) == 1
    assert "out of date (first difference: line 5 (mini_mt_1_it)): run with --write" in capsys.readouterr().out
    out.write_bytes(_mini_mt.DATA_FILE.read_bytes().replace(b"\n", b"\r\n"))  # what a text-mode write gives on Windows
    assert build.main(["--check", "--file", str(out)]) == 1
    assert build.main(["--check", "--file", str(tmp_path / "absent.jsonl")]) == 1
    assert "absent.jsonl does not exist: run with --write" in capsys.readouterr().out


def test_the_script_without_bfcl_eval_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(build, "_BACKEND", "bfcl_eval.not_a_module_here")
    assert build.main(["--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: building mini-mt needs bfcl-eval's API classes") and "pip install" in err


def test_the_runtime_module_reads_the_set_from_the_shipped_file(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """The package holds no generator: the template count ``promptgrid datasets`` shows comes from the file, and
    a missing file is a ``DatasetError`` naming the script that makes it."""
    from promptgrid.matrix.datasets._conversations import list_conversation_datasets

    assert not hasattr(_mini_mt, "build_records") and not hasattr(_mini_mt, "_TEMPLATES")
    assert _mini_mt.template_ids() == tuple(f"mini_mt_{n}" for n in range(1, TEMPLATES + 1))
    assert list_conversation_datasets()["mini-mt"].startswith(f"built-in: {TEMPLATES} conversations")
    assert f"({TEMPLATES * len(LANGS)} in all)" in list_conversation_datasets()["mini-mt"]
    monkeypatch.setattr(_mini_mt, "DATA_FILE", tmp_path / "gone.jsonl")
    for call in (lambda: load_conversations("mini-mt:de"), _mini_mt.template_ids):
        with pytest.raises(DatasetError, match=r"gone\.jsonl is missing; .*scripts/build_mini_mt\.py --write"):
            call()
    (tmp_path / "gone.jsonl").write_text('{"id": "x"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"gone\.jsonl:1: not a mini-mt record with a template id"):
        _mini_mt.template_ids()


def test_shape_languages_and_annotations(records: list[dict]) -> None:
    assert len(records) == TEMPLATES * len(LANGS)
    assert Counter(r["language"] for r in records) == {lang: TEMPLATES for lang in LANGS}
    assert len({r["id"] for r in records}) == len(records)
    for record in records:
        number = record["template"].removeprefix("mini_mt_")
        assert record["id"] == f"mini_mt_{number}_{record['language']}"
        assert record["category"] == f"mini_mt:{record['language']}"
        assert 2 <= len(record["question"]) <= 5 and len(record["ground_truth"]) == len(record["question"])
        for turn in record["no_solution_turns"]:
            assert all(call.split("(")[0] in build.READ_ONLY for call in record["ground_truth"][turn])
        for turn in record["clarify_turns"]:
            assert record["ground_truth"][turn] == [] and turn + 1 < len(record["question"])
    per_language = {lang: [r for r in records if r["language"] == lang] for lang in LANGS}
    for lang, rows in per_language.items():
        assert sum(bool(r["no_solution_turns"]) for r in rows) >= 4, lang
        assert sum(bool(r["clarify_turns"]) for r in rows) >= 4, lang
    # Same template, same shape in every language: turns, classes, the functions called per turn.
    for number in range(1, TEMPLATES + 1):
        rows = [r for r in records if r["template"] == f"mini_mt_{number}"]
        shapes = {(len(r["question"]), tuple(r["involved_classes"]), tuple(r["no_solution_turns"]),
                   tuple(r["clarify_turns"]),
                   tuple(tuple(c.split("(")[0] for c in turn if not c.startswith("compute_exchange_rate"))
                         for turn in r["ground_truth"])) for r in rows}
        assert len(shapes) == 1, number


def test_entities_are_localized(records: list[dict]) -> None:
    by_id = {r["id"]: r for r in records}
    ja = by_id["mini_mt_6_ja"]
    assert "鈴木健太" in ja["question"][0][0]["content"]
    assert "鈴木健太" in ja["initial_config"]["MessageAPI"]["user_map"]
    assert ja["ground_truth"][0][0] == "get_user_id(user='鈴木健太')"
    de = by_id["mini_mt_2_de"]  # a budget in euros is converted to the API's USD first
    assert "1.600 €" in de["question"][0][0]["content"]
    assert de["ground_truth"][0] == ["compute_exchange_rate(base_currency='EUR', target_currency='USD', value=1600)",
                                     "set_budget_limit(access_token='tk-de-7315', budget_limit=2000.0)"]
    assert by_id["mini_mt_2_en"]["ground_truth"][0] == ["set_budget_limit(access_token='tk-en-4821', "
                                                        "budget_limit=2000.0)"]
    hi = by_id["mini_mt_12_hi"]
    holders = {card["cardholder_name"] for card in hi["initial_config"]["TravelAPI"]["credit_card_list"].values()}
    assert holders == {"प्रिया शर्मा", "अर्जुन शर्मा"}
    assert "14 मई 2026" in by_id["mini_mt_1_hi"]["question"][0][0]["content"]
    assert "2026年5月14日" in by_id["mini_mt_1_zh"]["question"][0][0]["content"]
    assert by_id["mini_mt_10_fr"]["ground_truth"][0] == ["get_nearest_airport_by_city(location='London')"]
    assert "Londres" in by_id["mini_mt_10_fr"]["question"][0][0]["content"]


def test_load_all_or_some_languages() -> None:
    everything = load_conversations("mini-mt")
    assert len(everything) == TEMPLATES * len(LANGS)
    assert {c.category for c in everything} == {f"mini_mt:{lang}" for lang in LANGS}
    some = load_conversations("mini-mt:de, ja")
    assert len(some) == 2 * TEMPLATES and {c.category for c in some} == {"mini_mt:de", "mini_mt:ja"}
    assert [c.id for c in load_conversations("mini-mt:ja", limit=2)] == ["mini_mt_1_ja", "mini_mt_2_ja"]
    assert "mini-mt" in SPEC_FORMS
    assert is_conversation_dataset("mini-mt") and is_conversation_dataset("mini-mt:de,ja")
    assert not is_conversation_dataset("mini")


def test_limit_takes_distinct_templates_the_language_taking_turns_as_on_mini() -> None:
    """Before: --limit 3 on mini-mt was mini_mt_1 in en, de and es (file order: template by template). Now, as
    ``--limit`` on ``mini``, N distinct templates while there are enough, the language rotating; then more
    languages of each; one language: the first N."""
    from promptgrid.matrix.datasets import load_dataset
    from promptgrid.matrix.datasets._conversations import select_conversations

    assert [c.id for c in load_conversations("mini-mt", limit=3)] == ["mini_mt_1_en", "mini_mt_2_de", "mini_mt_3_es"]
    mini = [case.language for case in load_dataset("mini").select(limit=9)]
    assert [c.language for c in load_conversations("mini-mt", limit=9)] == mini == list(LANGS)
    assert [c.id for c in load_conversations("mini-mt:de,ja", limit=3)] == ["mini_mt_1_de", "mini_mt_2_ja",
                                                                            "mini_mt_3_de"]
    taken = load_conversations("mini-mt", limit=TEMPLATES + 1)
    assert len({c.template for c in taken}) == TEMPLATES and len(taken) == TEMPLATES + 1
    assert [c.id for c in taken][:2] == ["mini_mt_1_en", "mini_mt_1_de"]  # file order; template 1 twice
    assert len(load_conversations("mini-mt", limit=10_000)) == TEMPLATES * len(LANGS)
    assert load_conversations("mini-mt", limit=0) == []
    # --case with --limit (run, render): the same rule over the picked conversations
    picked = ["mini_mt_1_en", "mini_mt_1_de", "mini_mt_2_en", "mini_mt_2_de"]
    assert [c.id for c in select_conversations("mini-mt", cases=picked, limit=2)] == ["mini_mt_1_en", "mini_mt_2_de"]
    assert [c.id for c in select_conversations("mini-mt:en", limit=2)] == ["mini_mt_1_en", "mini_mt_2_en"]
    with pytest.raises(DatasetError, match="limit=-1 must be a whole number"):
        select_conversations("mini-mt", cases=picked, limit=-1)


@pytest.mark.parametrize("spec, words", [
    ("mini-mt:xx", ["'xx'", "en, de, es, fr, it, ja, zh, hi, pt"]),
    ("mini-mt:de,jp", ["'jp' (did you mean 'ja'?)", "en, de, es, fr, it, ja, zh, hi, pt"]),
    ("mini-mt:", ["''", "en, de, es"]),
    ("minimt", ["Did you mean 'mini-mt'?"]),
])
def test_unknown_language_names_the_valid_ones(spec: str, words: list[str]) -> None:
    with pytest.raises(DatasetError) as caught:
        load_conversations(spec)
    for word in words:
        assert word in str(caught.value)


def test_the_annotation_fields_are_accepted_in_any_jsonl(tmp_path: Path, records: list[dict]) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(build.render(records[:1]), encoding="utf-8")
    (conversation,) = load_conversations(f"jsonl:{path}")
    assert conversation.id == "mini_mt_1_en" and conversation.category == "mini_mt:en"


# --------------------------------------------------------------------------- validity

def test_every_ground_truth_call_validates_against_its_docs(conversations: list[Conversation]) -> None:
    """The check ``Environment`` makes before a call runs, for all 216 records (no worker: fast)."""
    for conversation in conversations:
        docs = {doc["name"]: doc for doc in conversation.functions}
        for turn in conversation.ground_truth:
            for call in turn:
                assert call.name in docs, (conversation.id, call)
                also = {"ticket_id": "string"} if "TicketAPI" in conversation.involved_classes else {}
                assert _argument_problem(call.name, dict(call.arguments), docs[call.name]["parameters"], also) \
                    is None, (conversation.id, call)


def test_ground_truth_runs_without_refusal(conversations: list[Conversation]) -> None:
    chosen = conversations if os.environ.get("PROMPTGRID_MINI_MT_FULL") else _covering(conversations, 2)
    for conversation in chosen:
        truth = run_ground_truth(conversation)
        assert truth.refused == (), (conversation.id, truth.refused)
        outputs = [text for turn in truth.outputs for text in turn]
        assert not any("error" in text.lower() for text in outputs), (conversation.id, outputs)


def test_ground_truth_fake_scores_everything_prose_nothing(tmp_path: Path,
                                                           conversations: list[Conversation]) -> None:
    chosen = _covering(conversations)
    variants = [Variant(), Variant(call_mode=CallMode.NATIVE), Variant(call_mode=CallMode.CONSTRAINED)]
    truth = run_conversations(variants, chosen, models=["fake/ground-truth"], run_dir=tmp_path / "truth")
    assert (truth.episodes, truth.errors) == (len(variants) * len(chosen), 0)
    assert truth.valid == truth.episodes, [(r.conversation_id, r.variant_id, r.failure_mode)
                                           for r in truth.results if not r.valid]
    per_language = Counter(r.category for r in truth.results if r.valid)
    assert per_language == Counter(c.category for c in chosen for _ in variants)
    assert set(per_language) == {f"mini_mt:{lang}" for lang in LANGS}  # every language, every mode
    prose = run_conversations(variants[:1], chosen, models=["fake/prose"], run_dir=tmp_path / "prose")
    assert prose.episodes == len(chosen) and prose.valid == 0


def test_doing_the_forbidden_call_in_a_no_solution_turn_is_invalid(conversations: list[Conversation]) -> None:
    forbidden = build.forbidden_calls()
    by_id = {c.id: c for c in conversations}
    templates = sorted({key.rsplit("_", 1)[0] for key in forbidden})
    assert len(templates) >= 4
    chosen = [f"{template}_{LANGS[(n * 2 + k) % len(LANGS)]}" for n, template in enumerate(templates)
              for k in range(2)]
    assert {key.rsplit("_", 1)[1] for key in chosen} == set(LANGS)
    for conversation_id in chosen:
        conversation = by_id[conversation_id]
        truth = run_ground_truth(conversation)
        honest = [[list(turn)] for turn in conversation.ground_truth]
        assert check_conversation(conversation, honest, ground_truth=truth).valid, conversation_id
        greedy = [[list(turn)] for turn in conversation.ground_truth]
        for turn, calls in forbidden[conversation_id].items():
            greedy[turn] = [list(conversation.ground_truth[turn]) +
                            [ToolCall(call["name"], call["arguments"]) for call in calls]]
        verdict = check_conversation(conversation, greedy, ground_truth=truth)
        assert not verdict.valid, conversation_id
        assert verdict.failure_mode is not None


# --------------------------------------------------------------------------- translation checks and catalogs

def test_every_language_passes_the_conversation_translation_checks(conversations: list[Conversation]) -> None:
    """What ``promptgrid check-translations --dataset mini-mt`` checks: each turn against its English one."""
    from promptgrid.matrix.datasets._translate_conversations import check_conversation_set, conversation_language

    by_language: dict[str, list[Conversation]] = {}
    for conversation in conversations:
        by_language.setdefault(conversation_language(conversation), []).append(conversation)
    results = check_conversation_set(by_language)
    assert set(results) == set(LANGS) - {"en"}
    assert {lang: [(f.conversation_id, f.turn, f.message) for f in findings]
            for lang, findings in results.items() if findings} == {}


def _stated_values(conversation: Conversation, turn: int) -> list[str]:
    """The string values the ground truth of ``turn`` or a later turn uses that ``turn``'s text states: ids,
    cards, tokens (a digit) and dictated texts (three words or more; four characters of Japanese/Chinese)."""
    def leaves(value: object) -> list[str]:
        if isinstance(value, dict):
            return [leaf for v in value.values() for leaf in leaves(v)]
        if isinstance(value, (list, tuple)):
            return [leaf for v in value for leaf in leaves(v)]
        return [value] if isinstance(value, str) else []

    text = "\n".join(m["content"] for m in conversation.turns[turn])
    found = [leaf for calls in conversation.ground_truth[turn:] for call in calls
             for leaf in leaves(dict(call.arguments))]
    return [v for v in dict.fromkeys(found) if v in text and (
        any(ch.isdigit() for ch in v) or len(v.split()) >= 3 or sum("\u3040" <= ch <= "\u9fff" for ch in v) >= 4)]


def _altered(value: str) -> str:
    """``value`` with one character changed: its last digit, else its middle character."""
    digits = [i for i, ch in enumerate(value) if ch.isdigit()]
    i = digits[-1] if digits else len(value) // 2
    return value[:i] + (str((int(value[i]) + 3) % 10) if digits else ("X" if value[i] != "X" else "Y")) + value[i + 1:]


def test_a_changed_value_is_a_finding_of_the_turn_that_states_it(conversations: list[Conversation]) -> None:
    """Held out: in de, ja and hi, change one ground-truth value in each turn that states it (a token stated in
    turn 0 and used by turn 1's calls included: template 22); ``check_conversation_set`` (``check-translations
    --dataset mini-mt``, compared with English) names that turn."""
    from promptgrid.matrix.datasets._translate_conversations import check_conversation_set

    english = [c for c in conversations if c.language == "en"]
    changed_at: list[tuple[str, int]] = []
    missed = []
    for lang in ("de", "ja", "hi"):
        own = [c for c in conversations if c.language == lang]
        assert check_conversation_set({"en": english, lang: own})[lang] == []  # unchanged: no finding
        for conversation in own:
            for turn, messages in enumerate(conversation.turns):
                for value in _stated_values(conversation, turn):
                    new_turn = tuple({**m, "content": m["content"].replace(value, _altered(value))}
                                     for m in messages)
                    turns = (*conversation.turns[:turn], new_turn, *conversation.turns[turn + 1:])
                    altered = dataclasses.replace(conversation, turns=turns)
                    findings = check_conversation_set({"en": english, lang: [altered]})[lang]
                    changed_at.append((conversation.template, turn))
                    if not any(f.turn == turn and f.code == "protected_changed" and repr(value) in f.message
                               for f in findings):
                        missed.append((conversation.id, turn, value, [(f.turn, f.code) for f in findings]))
    assert missed == []
    assert ("mini_mt_22", 0) in changed_at and len(changed_at) == 152  # 1 to 6 values in each of 38 turns
    assert len(set(changed_at)) == 38
    assert len({template for template, _turn in changed_at}) == 23  # every template but 19 (no value stated)


def test_description_catalogs_cover_every_description_in_every_language() -> None:
    """``description_language: query`` renders every mini-mt language from the shipped reviewed catalogs
    (``translate/catalogs/descriptions/mini-mt``), the Python 3 hint included, with no translation store."""
    from promptgrid.templates import description_units
    from promptgrid.translate._catalogs import CatalogIndex, shipped_catalogs
    from promptgrid.translate._units import UnitKind

    catalogs = [c for c in shipped_catalogs() if c.dataset == "mini-mt"]
    assert sorted(c.language for c in catalogs) == sorted(set(LANGS) - {"en"})
    assert all(c.reviewed and c.kind is UnitKind.DESCRIPTIONS for c in catalogs)
    units = {(key, text) for conversation in load_conversations("mini-mt:en")
             for key, text in description_units(conversation.functions_at(len(conversation.turns) - 1))}
    assert len(units) >= 100 and any(text.endswith(" Note that the provided function is in Python 3 syntax.")
                                     for _key, text in units)
    index = CatalogIndex(catalogs)
    missing = sorted((lang, key) for lang in set(LANGS) - {"en"} for key, text in units
                     if not index.lookup(UnitKind.DESCRIPTIONS, text, lang, key))
    assert missing == []
    assert {e.source for c in catalogs for e in c.entries.values()} == {text for _key, text in units}  # none stale


# --------------------------------------------------------------------------- how tool results reach the model

class _Recorder:
    """A conversation client that answers as ``fake/ground-truth`` and keeps every message list it is sent."""

    takes_episode = True
    name = "fake/ground-truth"

    def __init__(self) -> None:
        from promptgrid.matrix.conversations import ScriptedClient

        self.inner = ScriptedClient(self.name)
        self.sent: list[tuple[str, list[dict]]] = []

    async def complete(self, messages: Any, params: Any, *, request: Any = None, episode: Any = None) -> Any:
        self.sent.append((episode.variant.id, [dict(m) for m in messages]))
        return await self.inner.complete(messages, params, request=request, episode=episode)

    async def aclose(self) -> None:
        pass


def test_tool_results_reach_the_model_as_text_under_utf8_and_escaped_under_ascii(
        tmp_path: Path, conversations: list[Conversation]) -> None:
    """mini-mt template 8 in Hindi: ``create_ticket`` returns a dict holding the Hindi title. ``tool_results:
    utf8`` (and ``auto``, mini-mt's default) gives it to the model as text; ``ascii`` as bfcl-eval does,
    ``\\u0936...``. The verdict does not depend on it (scoring runs on environments of its own)."""
    from promptgrid.matrix.datasets._mini_mt import ascii_results_for

    (hindi,) = [c for c in conversations if c.id == "mini_mt_8_hi"]
    title = "शेयर्ड ड्राइव नहीं खुल रही"
    escaped = json.dumps(title)[1:-1]
    assert escaped.startswith("\\u0936")
    variants = {name: Variant(tool_results=name) for name in ("auto", "ascii", "utf8")}  # type: ignore[arg-type]
    assert [ascii_results_for(v, hindi) for v in variants.values()] == [False, True, False]
    (english_bfcl,) = load_conversations("bfcl:multi_turn_base", limit=1)
    assert ascii_results_for(variants["auto"], english_bfcl) and not ascii_results_for(variants["utf8"], english_bfcl)
    recorder = _Recorder()
    summary = run_conversations(list(variants.values()), [hindi], models=[recorder.name], run_dir=tmp_path,
                                clients={recorder.name: recorder})
    assert summary.valid == 3
    for name, variant in variants.items():
        # prompt mode: the results come back as bfcl-eval's user message, a list of {'role': 'tool', 'name':
        # <the call>, 'content': <the result's text>}
        shown = [entry["content"] for variant_id, messages in recorder.sent if variant_id == variant.id
                 for m in messages if m["role"] == "user" and str(m["content"]).startswith("[{'role': 'tool'")
                 for entry in ast.literal_eval(m["content"]) if entry["name"].startswith("create_ticket(")]
        assert shown and '"id": 12' in shown[-1], (name, shown)
        if name == "ascii":
            assert escaped in shown[-1] and title not in shown[-1], shown
        else:
            assert title in shown[-1] and "\\u" not in shown[-1], shown

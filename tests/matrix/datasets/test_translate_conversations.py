"""Translating conversations and checking them turn by turn (``_translate``)."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

import pytest

# Imported before any test patches promptgrid.translate._backends.make_backend: the command module binds the name
# when it is first imported, and a fake bound there would outlive the test.
import promptgrid.matrix.cli.translate  # noqa: F401
from promptgrid.errors import TranslationError
from promptgrid.matrix.datasets._conversations import Conversation, conversation_to_record, load_conversations
from promptgrid.matrix.datasets._translate_conversations import (
    PROTECTED_CHANGED,
    TURN_COUNT,
    check_conversation_set,
    check_conversation_translation,
    conversation_language,
    protected_values,
    template_id,
    translate_conversation,
    translate_conversations,
)

TOKEN = re.compile(r"⟦\s*\d+\s*⟧")

# German words a fake translator strings together (real German, so that the language check passes), drawn
# pseudo-randomly so that long texts do not repeat a chunk (the length check flags a looping translator).
_OPENING = "Bitte erledige das für mich"
_WORDS = ("und", "die", "der", "das", "mit", "für", "nicht", "auch", "dabei", "genau", "richtige", "Reihenfolge",
          "einzelnen", "Schritte", "damit", "alles", "sauber", "ordentlich", "gewünschten", "Zustand", "später",
          "noch", "einmal", "diese", "Sache", "kümmern", "muss", "Datei", "Verzeichnis", "werden", "wird", "eine",
          "einem", "Wert", "Angabe", "zurück", "gibt", "Benutzer", "aktuellen", "Inhalt", "Namen", "wenn", "oder")


def _letters(text: str) -> int:
    return sum(ch.isalpha() for ch in TOKEN.sub("", text))


class FakeGerman:
    """A deterministic "translator": a German sentence as long as the source, with every token kept in order."""

    name = "fake-german"

    def __init__(self, drop: str | None = None) -> None:
        self.drop = drop  # a text containing this keeps all tokens but its first
        self.calls: list[list[str]] = []

    def translate(self, texts: list[str], source: str, target: str) -> list[str]:
        assert (source, target) == ("en", "de")
        self.calls.append(list(texts))
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> str:
        tokens = TOKEN.findall(text)
        if self.drop is not None and self.drop in text and tokens:
            tokens = tokens[1:]
        words = _OPENING.split()
        goal = max(4, int(_letters(text) * 1.15))
        pick = random.Random(text)
        order: list[str] = []
        while sum(len(w) for w in words) < goal:
            if not order:  # a fresh order each round: no chunk comes back right after itself
                order = list(_WORDS)
                pick.shuffle(order)
            word = order.pop()
            if word != words[-1]:
                words.append(word)
        # Tokens go after the first word, each behind an ordinary German word.
        body = [words[0], *(f"mit {t}" for t in tokens), *words[1:]]
        return " ".join(body) + "."


@pytest.fixture(scope="module")
def conversations() -> list[Conversation]:
    return load_conversations("bfcl:multi_turn_base", limit=5)


@pytest.fixture(scope="module")
def translated(conversations: list[Conversation]) -> list[Any]:
    return translate_conversations(conversations, FakeGerman(), "de")


def test_protected_values_are_the_entities_the_turn_names(conversations: list[Conversation]) -> None:
    values = protected_values(conversations[0])
    assert values[0] == ("final_report.pdf", "document", "temp")
    assert values[1] == ("budget analysis",)
    assert "previous_report.pdf" in values[3]
    later = protected_values(conversations[2])
    assert "Collaboration leads to success. Innovation ignites growth." in later[1]  # echo content
    assert later[3] == ("TeamNotes.txt", "IdeasArchive.txt", "Archived")
    assert protected_values(conversations[1])[3] == ("20",)  # a number of two digits


def test_short_and_common_values_are_not_protected() -> None:
    base = load_conversations("bfcl:multi_turn_base", limit=2)[1]
    conversation = dataclasses.replace(base, turns=(
        ({"role": "user", "content": "I am alex. The directory is ok, file me a tail of 20 lines."},),
        *base.turns[1:]))
    values = protected_values(conversation)[0]
    # "alex", "directory", "file" are plain words of the state; "a" (ls's flag) is too short.
    assert "alex" not in values and "directory" not in values and "file" not in values


def test_values_of_later_turns_are_protected_where_stated_and_state_names_only_where_used() -> None:
    from promptgrid.matrix.episodes._environment import ToolCall

    # mini-mt template 22: the token is stated in turn 0, which has no call; turn 1's call uses it
    (budget,) = [c for c in load_conversations("mini-mt:en") if c.id == "mini_mt_22_en"]
    assert protected_values(budget)[0] == ("tk-en-4821",)
    translated = translate_conversation(budget, FakeGerman(), "de", descriptions=False)
    assert translated.ok and "tk-en-4821" in translated.conversation.turns[0][0]["content"]
    turns = translated.conversation.turns
    changed = dataclasses.replace(translated.conversation, turns=(
        ({**turns[0][0], "content": turns[0][0]["content"].replace("tk-en-4821", "tk-en-4827")},), *turns[1:]))
    (finding,) = check_conversation_translation(budget, changed, "en", "de", descriptions=False)
    assert (finding.turn, finding.code) == (0, PROTECTED_CHANGED) and "'tk-en-4821'" in finding.message

    # "my photography project" (turn 0) is prose: only turn 1's cd(folder='photography') uses the word
    (photos,) = [c for c in load_conversations("bfcl:multi_turn_base", limit=4) if c.id == "multi_turn_base_3"]
    assert "photography" in photos.turns[0][0]["content"] and "photography" not in protected_values(photos)[0]
    assert "test" in protected_values(photos)[0]  # turn 0's own find(name='test')

    # a name of the initial state is protected only where a ground-truth call uses it
    base = Conversation(id="s", category="c", turns=(
        ({"role": "user", "content": "Open Quarterly_Plan.txt, not Budget_2024.xlsx."},),
        ({"role": "user", "content": "Show Quarterly_Plan.txt again."},)),
        involved_classes=("GorillaFileSystem",),
        initial_config={"GorillaFileSystem": {"root": {"Quarterly_Plan.txt": "a", "Budget_2024.xlsx": "b"}}},
        functions=(), ground_truth=((ToolCall("cat", {"file_name": "Quarterly_Plan.txt"}),), ()))
    assert protected_values(base) == {0: ("Quarterly_Plan.txt",), 1: ("Quarterly_Plan.txt",)}


def test_translation_keeps_every_protected_value_and_passes_the_checks(
        conversations: list[Conversation], translated: list[Any]) -> None:
    for source, result in zip(conversations, translated, strict=True):
        assert result.ok, result.problems
        assert result.source_id == source.id
        assert result.conversation.id == f"{source.id}_de"
        assert result.conversation.category == f"{source.category}:de"
        assert result.conversation.ground_truth == source.ground_truth
        assert result.conversation.initial_config == source.initial_config
        for turn, values in result.protected.items():
            text = " ".join(m["content"] for m in result.conversation.turns[turn])
            assert text != " ".join(m["content"] for m in source.turns[turn])
            for value in values:
                assert value in text
        # descriptions were translated, names and parameters kept
        assert [f["name"] for f in result.conversation.functions] == [f["name"] for f in source.functions]
        assert result.conversation.functions[0]["description"] != source.functions[0]["description"]
        assert check_conversation_translation(source, result.conversation, "en", "de") == []


def test_a_changed_protected_value_is_caught_in_its_turn(
        conversations: list[Conversation], translated: list[Any]) -> None:
    source, result = conversations[0], translated[0].conversation
    turn1 = result.turns[1][0]["content"]
    assert "budget analysis" in turn1
    broken_turns = list(result.turns)
    broken_turns[1] = ({**result.turns[1][0], "content": turn1.replace("budget analysis", "Budgetanalyse")},)
    broken = dataclasses.replace(result, turns=tuple(broken_turns))
    findings = check_conversation_translation(source, broken, "en", "de")
    assert len(findings) == 1, findings
    finding = findings[0]
    assert finding.turn == 1 and finding.code == PROTECTED_CHANGED == "protected_changed"
    assert finding.message.startswith("turn 1:") and "'budget analysis'" in finding.message
    assert finding.conversation_id == "multi_turn_base_0_de" and finding.language == "de"

    # a file name changed in another turn: that turn, that file
    turn2 = result.turns[2][0]["content"].replace("final_report.pdf", "abschlussbericht.pdf")
    renamed = dataclasses.replace(result, turns=(*result.turns[:2], ({"role": "user", "content": turn2},),
                                                 *result.turns[3:]))
    (finding,) = check_conversation_translation(source, renamed, "en", "de")
    assert (finding.turn, finding.code) == (2, "protected_changed") and "final_report.pdf" in finding.message


def test_a_dropped_token_is_reported_not_guessed(conversations: list[Conversation]) -> None:
    source = conversations[2]
    backend = FakeGerman(drop="into the previous file")  # turn 1: the echo text's token is lost
    result = translate_conversation(source, backend, "de", descriptions=False)
    assert not result.ok
    assert [(p.turn, p.code) for p in result.problems] == [(1, "protected_changed")]
    assert "Collaboration leads to success" in result.problems[0].message
    assert result.problems[0].message.startswith("turn 1:")
    # the turn is kept as the backend translated it, without the value, and nothing else changed
    assert "Collaboration" not in result.conversation.turns[1][0]["content"]
    assert result.conversation.ground_truth == source.ground_truth
    assert result.conversation.functions == source.functions  # descriptions=False
    findings = check_conversation_translation(source, result.conversation, "en", "de", descriptions=False)
    assert [(f.turn, f.code) for f in findings] == [(1, "protected_changed")]


def test_each_unique_segment_is_sent_once(conversations: list[Conversation]) -> None:
    backend = FakeGerman()
    translate_conversations(conversations[:2], backend, "de")
    sent = [text for call in backend.calls for text in call]
    assert len(sent) == len(set(sent))
    assert all(len(call) <= 50 for call in backend.calls)


def test_bad_input_is_a_finding_not_a_crash(conversations: list[Conversation], translated: list[Any]) -> None:
    source, result = conversations[0], translated[0].conversation
    short = dataclasses.replace(result, turns=result.turns[:2])
    findings = check_conversation_translation(source, short, "en", "de", descriptions=False)
    assert [(f.turn, f.code) for f in findings] == [(None, TURN_COUNT)]
    assert "4 turns" in findings[0].message and "2 in" in findings[0].message
    extra = dataclasses.replace(result, turns=(result.turns[0] + ({"role": "user", "content": "Noch etwas."},),
                                               *result.turns[1:]))
    (finding,) = check_conversation_translation(source, extra, "en", "de", descriptions=False)
    assert (finding.turn, finding.code) == (0, TURN_COUNT) and finding.message.startswith("turn 0:")
    missing_docs = dataclasses.replace(result, functions=result.functions[1:])
    findings = check_conversation_translation(source, missing_docs, "en", "de")
    assert [(f.turn, f.code) for f in findings] == [(None, "missing")]
    with pytest.raises(TranslationError):
        check_conversation_translation(source, result, "en", "xx-not-a-code")


def test_untranslated_turn_and_english_descriptions(conversations: list[Conversation], translated: list[Any]) -> None:
    source, result = conversations[0], translated[0].conversation
    kept = dataclasses.replace(result, turns=(source.turns[0], *result.turns[1:]), functions=source.functions)
    findings = check_conversation_translation(source, kept, "en", "de")
    # docs left in English are not checked (a partial translation); the English turn is
    assert [(f.turn, f.code) for f in findings] == [(0, "untranslated")]


def test_backend_answering_the_wrong_number_of_texts_raises(conversations: list[Conversation]) -> None:
    class Short(FakeGerman):
        def translate(self, texts: list[str], source: str, target: str) -> list[str]:
            return super().translate(texts, source, target)[:-1]

    with pytest.raises(TranslationError, match="returned"):
        translate_conversation(conversations[0], Short(), "de")


def test_records_round_trip(tmp_path: Any, translated: list[Any]) -> None:
    import json

    path = tmp_path / "de.jsonl"
    path.write_text("".join(json.dumps(conversation_to_record(r.conversation), ensure_ascii=False) + "\n"
                            for r in translated), encoding="utf-8")
    loaded = load_conversations(f"jsonl:{path}")
    assert [c.id for c in loaded] == [r.conversation.id for r in translated]
    assert loaded[0].turns == translated[0].conversation.turns
    assert {conversation_language(c) for c in loaded} == {"de"}


def test_set_pairs_translations_with_their_sources(conversations: list[Conversation],
                                                   translated: list[Any]) -> None:
    german = [r.conversation for r in translated]
    assert conversation_language(conversations[0]) == "en"
    assert template_id(german[0], "de") == conversations[0].id
    result = check_conversation_set({"en": conversations, "de": german})
    assert result == {"de": []}
    orphan = dataclasses.replace(german[0], id="other_de", template="other")
    result = check_conversation_set({"en": conversations, "de": [orphan]})
    assert [(f.conversation_id, f.code) for f in result["de"]] == [("other_de", "missing")]


def _localized(base: Conversation, lang: str, text: str, card: str) -> Conversation:
    truth = ((dataclasses.replace(base.ground_truth[0][0], arguments={"card_id": card}),),)
    return dataclasses.replace(base, id=f"loc_1_{lang}", category=f"loc:{lang}",
                               turns=(({"role": "user", "content": text},),), ground_truth=truth)


def test_localized_set_checks_the_targets_own_values() -> None:
    from promptgrid.matrix.episodes._environment import ToolCall

    base = Conversation(id="x", category="loc", turns=(), involved_classes=("TravelAPI",), initial_config={},
                        functions=(), ground_truth=((ToolCall("get_credit_card_balance", {}),),))
    en = _localized(base, "en", "Please tell me the balance of my credit card 748211284482 today.", "748211284482")
    de = _localized(base, "de", "Bitte sag mir heute den Kontostand meiner Kreditkarte 773155137731.",
                    "773155137731")
    assert conversation_language(de) == "de" and template_id(de, "de") == "loc_1"
    assert check_conversation_set({"en": [en], "de": [de]}, protect_from="target") == {"de": []}
    assert check_conversation_set({"en": [en], "de": [de]}) == {"de": []}  # auto: the ground truth differs
    # the German turn names the English card: its own card is missing from the turn
    wrong = _localized(base, "de", "Bitte sag mir heute den Kontostand meiner Kreditkarte 748211284482.",
                       "773155137731")
    (finding,) = check_conversation_set({"en": [en], "de": [wrong]})["de"]
    assert (finding.turn, finding.code) == (0, "protected_changed") and "'773155137731'" in finding.message
    # a turn in the wrong language
    spanish = _localized(base, "de", "Por favor, dime hoy el saldo de mi tarjeta de crédito 773155137731.",
                         "773155137731")
    (finding,) = check_conversation_set({"en": [en], "de": [spanish]})["de"]
    assert (finding.turn, finding.code) == (0, "wrong_language")


def test_cli_translates_conversations_and_checks_them(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str],
                                                      conversations: list[Conversation]) -> None:
    import json

    import promptgrid.translate._backends as backends
    from promptgrid.matrix.cli import main

    monkeypatch.setattr(backends, "make_backend", lambda *a, **k: FakeGerman())
    source = tmp_path / "en.jsonl"
    source.write_text("".join(json.dumps(conversation_to_record(c)) + "\n" for c in conversations[:2]),
                      encoding="utf-8")
    out = tmp_path / "de.jsonl"
    code = main(["translate", "--to", "de", "--backend", "fake", "--dataset", f"jsonl:{source}",
                 "--conversations-out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "2 conversation(s) written" in printed
    german = load_conversations(f"jsonl:{out}")
    assert [c.id for c in german] == ["multi_turn_base_0_de", "multi_turn_base_1_de"]

    check = ["check-translations", "--dataset", f"jsonl:{source}", "--dataset", f"jsonl:{out}"]
    assert main(check) == 0, capsys.readouterr().out
    lines = out.read_text(encoding="utf-8").splitlines()
    lines[0] = lines[0].replace("budget analysis", "Budgetanalyse", 1)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(check) == 1
    printed = capsys.readouterr().out
    assert "protected_changed" in printed and "turn 1:" in printed and "multi_turn_base_0_de" in printed
    # only English conversations: nothing to check is an error, not a pass (bad input: exit 2)
    assert main(["check-translations", "--dataset", f"jsonl:{source}"]) == 2
    assert "holds no translated conversations" in capsys.readouterr().err


def test_conversations_out_never_destroys_an_input_or_a_run(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                            conversations: list[Conversation]) -> None:
    import json

    import promptgrid.translate._backends as backends
    from promptgrid.matrix.cli import main

    sent: list[Any] = []
    monkeypatch.setattr(backends, "make_backend", lambda *a, **k: sent.append(1) or FakeGerman())
    source = tmp_path / "en.jsonl"
    text = "".join(json.dumps(conversation_to_record(c)) + "\n" for c in conversations[:1])
    source.write_text(text, encoding="utf-8")
    base = ["translate", "--to", "de", "--backend", "fake", "--dataset", f"jsonl:{source}", "--conversations-out"]
    assert main([*base, str(source)]) == 2  # output = input
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "conversations.sqlite3").write_bytes(b"store")
    assert main([*base, str(run_dir / "conversations.sqlite3")]) == 2  # a conversation run's store
    assert main([*base, str(tmp_path)]) == 2  # a directory
    assert source.read_text(encoding="utf-8") == text and (run_dir / "conversations.sqlite3").read_bytes() == b"store"
    assert sent == []  # refused before a backend was made, so nothing was translated (or paid for)


# --------------------------------------------------------------------------- datasets: store, API, back-translation

def _jsonl(tmp_path: Any, conversations: list[Conversation], n: int = 2) -> str:
    import json

    source = tmp_path / "en.jsonl"
    source.write_text("".join(json.dumps(conversation_to_record(c)) + "\n" for c in conversations[:n]),
                      encoding="utf-8")
    return f"jsonl:{source}"


class FakeMany(FakeGerman):
    """FakeGerman for any target; ``fail_on``: a target whose batch raises (a network failure half-way)."""

    def __init__(self, fail_on: str | None = None) -> None:
        super().__init__()
        self.fail_on = fail_on
        self.texts = 0

    def translate(self, texts: list[str], source: str, target: str) -> list[str]:
        if target == self.fail_on:
            raise TranslationError(f"backend unreachable while translating into {target}")
        self.texts += len(texts)
        return [self._one(text) for text in texts]


def test_segments_are_stored_as_they_come_and_never_paid_twice(tmp_path: Any,
                                                               conversations: list[Conversation]) -> None:
    import promptgrid as pg
    from promptgrid.translate import TranslationStore

    dataset = _jsonl(tmp_path, conversations)
    store = tmp_path / "translations.sqlite3"
    failing = FakeMany(fail_on="fr")
    with pytest.raises(TranslationError, match="unreachable"):  # de done, then fr fails: nothing written
        pg.translate_conversations(dataset, "de,fr", failing, out=tmp_path / "out.jsonl", store=store)
    assert not (tmp_path / "out.jsonl").exists()
    paid_for_de = failing.texts
    with TranslationStore(store, readonly=True) as kept:
        rows = list(kept.rows())
    assert len(rows) == paid_for_de > 0 and {r.target for r in rows} == {"de"}
    assert all(r.kind == "conversation" and r.backend == "fake-german" for r in rows)
    assert any("multi_turn_base_0 turn 0" in r.keys for r in rows)

    working = FakeMany()
    made = pg.translate_conversations(dataset, "de,fr", working, out=tmp_path / "out.jsonl", store=store)
    assert made.stored == paid_for_de and made.sent == working.texts  # only French was sent
    fresh = FakeMany()
    alone = pg.translate_conversations(dataset, "fr", fresh, store=tmp_path / "other.sqlite3")
    assert working.texts == fresh.texts == alone.sent
    assert made.languages == {"de": 2, "fr": 2} and made.path == tmp_path / "out.jsonl"
    assert {f.language for f in made.findings} == {"fr"}  # the fake writes German whatever it is asked for
    german = [c for c in load_conversations(f"jsonl:{tmp_path / 'out.jsonl'}") if c.language == "de"]
    direct = translate_conversations(conversations[:2], FakeMany(), "de")
    assert [c.turns for c in german] == [t.conversation.turns for t in direct]  # stored = sent, word for word

    again = FakeMany()
    repeat = pg.translate_conversations(dataset, ["de", "fr"], again, store=store)
    assert repeat.sent == again.texts == 0 and repeat.stored == made.stored + made.sent
    assert repeat.path is None


class WholeTexts(FakeGerman):
    """Stands for a catalog backend: whole texts looked up (``masks`` False), nothing paid for."""

    masks = False


def test_catalog_backends_keep_nothing_and_bad_arguments_are_errors(tmp_path: Any,
                                                                    conversations: list[Conversation]) -> None:
    import promptgrid as pg

    dataset = _jsonl(tmp_path, conversations, 1)
    with pytest.raises(TranslationError, match="what must be one of"):
        pg.translate_conversations(dataset, "de", "catalog", what="everything")
    with pytest.raises(TranslationError):
        pg.translate_conversations(dataset, "en", "catalog")  # English is the source
    with pytest.raises(TranslationError, match="dataset must be"):
        pg.translate_conversations(None, "de", "catalog")  # type: ignore[arg-type]
    with pytest.raises(TranslationError, match="backend must be a backend spec"):
        pg.translate_conversations(dataset, "de", object())  # type: ignore[arg-type]
    store = tmp_path / "never.sqlite3"
    made = pg.translate_conversations(dataset, "de", WholeTexts(), what="instructions", store=store)
    assert made.store is None and not store.exists() and made.languages == {"de": 1}
    assert made.sent == sum(len(turn) for turn in conversations[0].turns)  # whole turns looked up, none kept


class BackTo:
    """A back-translator of whole texts: the English source (good) or an unrelated sentence (bad)."""

    name = "back"
    masks = False

    def __init__(self, english: dict[str, str] | None) -> None:
        self.english = english
        self.calls = 0

    def translate(self, texts: list[str], source: str, target: str) -> list[str]:
        assert (source, target) == ("de", "en")
        self.calls += len(texts)
        return [self.english.get(t, t) if self.english is not None else "The weather is nice in spring."
                for t in texts]


def test_back_translation_of_conversations(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                           conversations: list[Conversation],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import promptgrid as pg
    import promptgrid.translate._backends as backends
    from promptgrid.matrix.cli import main

    source = conversations[0]
    (german,) = translate_conversations([source], FakeGerman(), "de", descriptions=False)
    de_file = tmp_path / "de.jsonl"
    de_file.write_text(json.dumps(conversation_to_record(german.conversation)) + "\n", encoding="utf-8")
    datasets = [_jsonl(tmp_path, conversations, 1), f"jsonl:{de_file}"]
    assert pg.check_conversation_translations(datasets).ok  # without back-translation: clean

    # a back-translation unrelated to the source: every translated turn is flagged, turn by turn
    bad = BackTo(None)
    checks = pg.check_conversation_translations(datasets, "de", back_translate=bad)
    assert not checks.ok and bad.calls >= len(source.turns)
    turns = {f.turn for f in checks.failures if f.code == "back_translation_low"}
    assert turns == set(range(len(source.turns)))

    # back to the source word for word: no finding
    english = {}
    for src_turn, de_turn in zip(source.turns, german.conversation.turns, strict=True):
        for a, b in zip(src_turn, de_turn, strict=True):
            english[str(b.get("content"))] = str(a.get("content"))
    assert pg.check_conversation_translations(datasets, back_translate=BackTo(english)).ok

    # the command passes --back-translate on (a spec string, made into a backend)
    monkeypatch.setattr(backends, "make_backend", lambda *a, **k: BackTo(None))
    code = main(["check-translations", "--dataset", datasets[0], "--dataset", datasets[1], "--back-translate",
                 "fake"])
    assert code == 1 and "back_translation_low" in capsys.readouterr().out


def test_the_resume_benchmark_finds_nothing_paid_twice(capsys: pytest.CaptureFixture[str]) -> None:
    from support.scripts import load_script

    bench = load_script("benchmarks/translate_resume.py")
    assert bench.main(["--dataset", "mini-mt:en", "--to", "de,ja"]) == 0
    printed = capsys.readouterr().out
    assert "OK: nothing paid for twice" in printed and "4. everything again: sent 0," in printed


def test_the_input_is_found_however_the_spec_spells_it(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                       conversations: list[Conversation]) -> None:
    import promptgrid as pg

    spec = _jsonl(tmp_path, conversations, 1)
    source = tmp_path / "en.jsonl"
    before = source.read_bytes()
    monkeypatch.setenv("HOME", str(tmp_path))
    for spelled in ("jsonl:~/en.jsonl", f"jsonl: {source} ", spec):
        with pytest.raises(pg.OutputError, match="input"):
            pg.translate_conversations(spelled, "de", FakeGerman(), out=source)
    assert source.read_bytes() == before


def test_a_lost_value_is_one_finding_of_its_turn(tmp_path: Any, conversations: list[Conversation]) -> None:
    import promptgrid as pg

    spec = _jsonl(tmp_path, conversations, 1)
    made = pg.translate_conversations(spec, "de", FakeGerman(drop="budget analysis"), store=tmp_path / "s.sqlite3")
    lost = [f for f in made.findings if f.code == PROTECTED_CHANGED]
    turns = [f.turn for f in lost]
    assert lost and len(turns) == len(set(turns))  # found while translating and by the check: said once


def test_a_catalog_without_the_language_says_what_to_use_instead(tmp_path: Any,
                                                                 conversations: list[Conversation]) -> None:
    import promptgrid as pg

    spec = _jsonl(tmp_path, conversations, 1)
    with pytest.raises(pg.MissingTranslationError, match="no translations into ko") as caught:
        pg.translate_conversations(spec, "ko", "catalog", store=tmp_path / "s.sqlite3")
    assert "--backend amazon" in str(caught.value) and not (tmp_path / "s.sqlite3").exists()

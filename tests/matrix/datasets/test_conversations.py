"""Conversations: BFCL's four multi-turn categories and jsonl: files as records, ground truth parsed with ast."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import DatasetError
from promptgrid.matrix.conversations import (
    CONVERSATION_CATEGORIES,
    Conversation,
    ToolCall,
    conversation_to_record,
    functions_for,
    load_conversations,
    parse_call,
)

pytest.importorskip("bfcl_eval")

HINT = " Note that the provided function is in Python 3 syntax."
FILES_DOCS = functions_for(["GorillaFileSystem"], python_hint=False)


@pytest.fixture(scope="module")
def everything() -> dict[str, list[Conversation]]:
    return {category: load_conversations(f"bfcl:{category}") for category in CONVERSATION_CATEGORIES}


def test_all_800_entries_load(everything: dict[str, list[Conversation]]) -> None:
    for category, conversations in everything.items():
        assert len(conversations) == 200
        assert len({c.id for c in conversations}) == 200
        assert all(c.category == category and c.source == f"bfcl:{category}" for c in conversations)
        assert all(len(c.turns) == len(c.ground_truth) for c in conversations)
        assert all(c.long_context == (category == "multi_turn_long_context") for c in conversations)
        assert all(isinstance(call, ToolCall) for c in conversations for turn in c.ground_truth for call in turn)
    calls = sum(len(turn) for cs in everything.values() for c in cs for turn in c.ground_truth)
    assert calls > 4500


def test_a_base_entry_as_bfcl_eval_sends_it(everything: dict[str, list[Conversation]]) -> None:
    first = everything["multi_turn_base"][0]
    assert first.id == "multi_turn_base_0" and first.involved_classes == ("TwitterAPI", "GorillaFileSystem")
    assert first.turns[0][0]["role"] == "user" and "final_report.pdf" in first.turns[0][0]["content"]
    assert first.ground_truth[0][0] == ToolCall("cd", {"folder": "document"})
    assert first.ground_truth[2] == (ToolCall("sort", {"file_name": "final_report.pdf"}),)  # positional, by doc
    assert [d["name"] for d in first.functions][:2] == ["authenticate_twitter", "comment"]
    assert len(first.functions) == 14 + 18 and all(d["description"].endswith(HINT) for d in first.functions)
    assert not any(d["description"].endswith(HINT + HINT) for d in first.functions)
    assert first.path[0] == "GorillaFileSystem.find" and first.missed_functions == {}
    assert repr(first) == ("Conversation('multi_turn_base_0', category='multi_turn_base', "
                           "classes=['TwitterAPI', 'GorillaFileSystem'], turns=4, functions=32, expected_calls=10)")


def test_held_out_functions_come_back_at_their_turn_without_the_hint(everything: dict[str, list[Conversation]]) -> None:
    entry = everything["multi_turn_miss_func"][0]
    assert entry.missed_functions == {3: ("sort",)} and entry.turns[3] == ()
    assert "sort" not in {d["name"] for d in entry.functions} and len(entry.functions) == 31
    assert entry.functions_at(2) == entry.functions
    later = entry.functions_at(3)
    assert len(later) == 32 and later[-1]["name"] == "sort" and not later[-1]["description"].endswith(HINT)
    assert entry.ground_truth[3] == (ToolCall("sort", {"file_name": "final_report.pdf"}),)
    assert entry.ground_truth[2] == ()  # asked for before it exists: the turn cannot be done
    assert all(c.missed_functions for c in everything["multi_turn_miss_func"])


def test_excluded_functions_are_kept_as_data_and_not_applied_as_in_bfcl_eval(
        everything: dict[str, list[Conversation]]) -> None:
    marked = [c for c in everything["multi_turn_base"] if c.excluded_functions]
    assert len(marked) == 18
    for conversation in marked:
        assert set(conversation.excluded_functions) <= {d["name"] for d in conversation.functions}


def test_limit_takes_the_first_conversations() -> None:
    assert [c.id for c in load_conversations("bfcl:multi_turn_miss_param", limit=3)] == [
        "multi_turn_miss_param_0", "multi_turn_miss_param_1", "multi_turn_miss_param_2"]
    assert load_conversations("bfcl:multi_turn_base", limit=0) == []
    with pytest.raises(DatasetError, match="limit"):
        load_conversations("bfcl:multi_turn_base", limit=-1)


def test_list_conversation_datasets_with_and_without_bfcl_data() -> None:
    """``promptgrid datasets`` lists these beside the single-turn ones (before: none of them)."""
    from promptgrid.matrix.datasets._conversations import list_conversation_datasets

    listing = list_conversation_datasets()
    assert list(listing) == ["bfcl:multi_turn_base", "bfcl:multi_turn_miss_func", "bfcl:multi_turn_miss_param",
                             "bfcl:multi_turn_long_context", "mini-mt", "mini-mt:LANG[,LANG...]", "jsonl:PATH"]
    assert "24 conversations" in listing["mini-mt"] and "(216 in all)" in listing["mini-mt"]
    assert "en, de, es, fr, it, ja, zh, hi, pt" in listing["mini-mt"] and "involved_classes" in listing["jsonl:PATH"]
    for spec in listing:
        if "<" not in spec and "LANG" not in spec and "PATH" not in spec:
            assert load_conversations(spec, limit=1), spec  # every spec listed loads
    without = list_conversation_datasets(bfcl_data="/nowhere")
    assert [k for k in without if k.startswith("bfcl")] == ["bfcl:multi_turn_<...>"]
    assert "not available here" in without["bfcl:multi_turn_<...>"] and "/nowhere" in without["bfcl:multi_turn_<...>"]
    assert "mini-mt" in without and "jsonl:PATH" in without


# --------------------------------------------------------------------------- call strings

@pytest.mark.parametrize(("text", "expected"), [
    ("cd(folder='document')", ToolCall("cd", {"folder": "document"})),
    ("  sort('final_report.pdf') ", ToolCall("sort", {"file_name": "final_report.pdf"})),
    ("tail('a.txt', 5)", ToolCall("tail", {"file_name": "a.txt", "lines": 5})),
    ("tail('a.txt', lines=-5)", ToolCall("tail", {"file_name": "a.txt", "lines": -5})),
    ("ls()", ToolCall("ls", {})),
    ("find(path='.', name=None)", ToolCall("find", {"path": ".", "name": None})),
    ("echo(content=\"a\\nb\", file_name='x')", ToolCall("echo", {"content": "a\nb", "file_name": "x"})),
])
def test_calls_are_parsed_with_positional_arguments_named_by_the_doc(text: str, expected: ToolCall) -> None:
    assert parse_call(text, FILES_DOCS) == expected


def test_positional_arguments_bind_by_the_methods_signature_not_the_docs_order() -> None:
    """TravelAPI's doc lists insurance_cost before booking_id; the method (and bfcl-eval's eval) takes booking_id
    third."""
    docs = functions_for(["TravelAPI"], python_hint=False)
    assert list(next(d for d in docs if d["name"] == "purchase_insurance")["parameters"]["properties"])[2:4] == [
        "insurance_cost", "booking_id"]
    parsed = parse_call("purchase_insurance('t', 'comprehensive', 'b1', 50.0, card_id='c')", docs, ["TravelAPI"])
    assert parsed == ToolCall("purchase_insurance", {"access_token": "t", "insurance_type": "comprehensive",
                                                     "booking_id": "b1", "insurance_cost": 50.0, "card_id": "c"})
    assert parse_call("purchase_insurance('t', 'comprehensive', 'b1')", docs).arguments["booking_id"] == "b1"


def test_lists_and_dicts_are_literals() -> None:
    docs = functions_for(["TicketAPI", "MathAPI"], python_hint=False)
    assert parse_call("edit_ticket(ticket_id=1, updates={'priority': 2})", docs) == ToolCall(
        "edit_ticket", {"ticket_id": 1, "updates": {"priority": 2}})
    assert parse_call("mean(numbers=[1, 2.5, -3])", docs).arguments == {"numbers": [1, 2.5, -3]}


@pytest.mark.parametrize(("text", "fragment"), [
    ("__import__('os').system('touch /tmp/x')", "only a plain function name"),
    ("os.system('x')", "only a plain function name"),
    ("cd(folder=open('/tmp/pg-canary', 'w'))", "not a literal value"),
    ("cd(folder=__import__('os').getcwd())", "not a literal value"),
    ("cd(folder='a' + 'b')", "not a literal value"),
    ("cd(folder=(lambda: 'x')())", "not a literal value"),
    ("cd(folder={1, 2})", "type set"),
    ("cd(folder=b'x')", "type bytes"),
    ("cd(*['x'])", "*arguments"),
    ("cd(**{'folder': 'x'})", "**arguments"),
    ("eval('1')", "not one of the conversation's functions"),
    ("srot('a')", "Did you mean 'sort'?"),
    ("cd('a', 'b')", "at most 1 positional"),
    ("cd('a', folder='b')", "given twice"),
    ("cd(folder='a'", "not a Python call"),
    ("folder", "not a function call"),
    ("cd(folder=" + "[" * 40_000 + "]" * 40_000 + ")", "not a Python call"),
    ("cd(folder=" + "1" * 10_000 + ")", "not a Python call"),
    ("x" * 200_000, "longer than"),
])
def test_anything_but_a_literal_call_is_refused_and_nothing_is_evaluated(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        parse_call(text, FILES_DOCS)
    assert fragment in str(caught.value), str(caught.value)
    assert not Path("/tmp/pg-canary").exists()


# --------------------------------------------------------------------------- jsonl

def write_lines(path: Path, records: list[Any]) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return f"jsonl:{path}"


MINIMAL = {
    "id": "files_1",
    "question": [[{"role": "user", "content": "Go to docs and list it."}], [{"role": "user", "content": "Sort a.txt"}]],
    "involved_classes": ["GorillaFileSystem"],
    "initial_config": {"GorillaFileSystem": {"root": {"me": {"type": "directory", "contents": {}}}}},
    "ground_truth": [["cd(folder='docs')", {"name": "ls", "arguments": {"a": True}}], ["sort('a.txt')"]],
}


def test_a_minimal_jsonl_line_gets_bfcl_docs_and_defaults(tmp_path: Path) -> None:
    loaded, = load_conversations(write_lines(tmp_path / "c.jsonl", [MINIMAL]))
    assert loaded.id == "files_1" and loaded.category == "multi_turn" and not loaded.long_context
    assert loaded.ground_truth == ((ToolCall("cd", {"folder": "docs"}), ToolCall("ls", {"a": True})),
                                   (ToolCall("sort", {"file_name": "a.txt"}),))
    assert len(loaded.functions) == 18 and loaded.functions[0]["description"].endswith(HINT)
    assert loaded.source == f"jsonl:{tmp_path / 'c.jsonl'}"


def test_the_documented_example_line_loads(tmp_path: Path) -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "conversations.md").read_text(encoding="utf-8")
    example = json.loads(docs.split("```json\n", 1)[1].split("```", 1)[0])
    loaded, = load_conversations(write_lines(tmp_path / "example.jsonl", [example]))
    assert loaded.ground_truth[1] == (ToolCall("sort", {"file_name": "a.txt"}),)


def test_bfcl_conversations_round_trip_through_jsonl(everything: dict[str, list[Conversation]], tmp_path: Path) -> None:
    originals = [*everything["multi_turn_base"][:5], *everything["multi_turn_miss_func"][:5],
                 *everything["multi_turn_long_context"][:2]]
    spec = write_lines(tmp_path / "round.jsonl", [conversation_to_record(c) for c in originals])
    loaded = load_conversations(spec)
    for original, again in zip(originals, loaded, strict=True):
        assert again == Conversation(**{**original.__dict__, "source": spec})


def test_jsonl_problems_name_the_file_line_and_field(tmp_path: Path) -> None:
    bad_class = {**MINIMAL, "id": "b", "involved_classes": ["GorillaFileSytem"]}
    bad_call = {**MINIMAL, "id": "c", "ground_truth": [["cd(folder=__import__('os'))"], []]}
    short = {**MINIMAL, "id": "d", "ground_truth": [[]]}
    typo = {**MINIMAL, "id": "e", "ground_truths": []}
    web = {**MINIMAL, "id": "f", "involved_classes": ["WebSearchAPI"]}
    held = {**MINIMAL, "id": "g", "missed_function": {"5": ["sort"]}}
    path = tmp_path / "bad.jsonl"
    spec = write_lines(path, [MINIMAL, "{not json", "[1, 2]", bad_class, bad_call, short, typo, web, held, MINIMAL])
    with pytest.raises(DatasetError) as caught:
        load_conversations(spec)
    message = str(caught.value)
    assert message.startswith(f"{path} has 9 problems; see docs/conversations.md")
    for fragment in [f"{path}:2: not valid JSON", f"{path}:3: not a JSON object",
                     f"{path}:4: involved_classes: unknown environment class 'GorillaFileSytem'. Did you mean "
                     "'GorillaFileSystem'?",
                     f"{path}:5: ground_truth[0][0]: cd: argument 'folder' is not a literal value",
                     f"{path}:6: ground_truth: must be a list of 2 lists of calls",
                     f"{path}:7: ground_truths: is not a field of a conversation. Did you mean 'ground_truth'?",
                     f"{path}:8: involved_classes: unknown environment class 'WebSearchAPI' (it reaches the network)",
                     f"{path}:9: missed_function: key '5' is not a turn index (0 to 1)",
                     f"{path}:10: id: 'files_1' is also the id on line 1"]:
        assert fragment in message, fragment


def test_jsonl_docs_must_be_functions_the_environment_runs(tmp_path: Path) -> None:
    custom = {**MINIMAL, "function": [{"name": "rm_rf", "description": "", "parameters": {"type": "dict",
                                                                                        "properties": {}}}]}
    with pytest.raises(DatasetError, match="'rm_rf' is not a function of GorillaFileSystem"):
        load_conversations(write_lines(tmp_path / "c.jsonl", [custom]))


@pytest.mark.parametrize(("spec", "fragment"), [
    ("bfcl:simple_python", "is not a multi-turn BFCL category"),
    ("bfcl:multi_turn_bse", "Did you mean 'multi_turn_base'?"),
    ("jsonl:", "jsonl: needs a path"),
    ("mini", "unknown conversation dataset"),
    ("convs.jsonl", "Did you mean 'jsonl:convs.jsonl'?"),
    ("", "no conversation dataset given"),
])
def test_unknown_specs_are_explained(spec: str, fragment: str) -> None:
    with pytest.raises(DatasetError, match=None) as caught:
        load_conversations(spec)
    assert fragment in str(caught.value)


def test_a_missing_jsonl_file_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        load_conversations(f"jsonl:{tmp_path / 'absent.jsonl'}")


# ----------------------------------------------------------------- checked before the first call (issue 31)

def _with_files(contents: Any) -> dict[str, Any]:
    return {"GorillaFileSystem": {"root": {"me": {"type": "directory", "contents": contents}}}}


@pytest.mark.parametrize(("change", "field", "fragment"), [
    ({"initial_config": _with_files({"a": {"type": "directory", "contents": 5}})},
     "initial_config.GorillaFileSystem.root.me.contents.a.contents", "must be an object of the folder's files"),
    ({"initial_config": _with_files({"a.txt": {"type": "file", "content": ["x"]}})},
     "initial_config.GorillaFileSystem.root.me.contents.a.txt.content", "must be the file's text, not array"),
    ({"initial_config": _with_files({"a": {"type": "link"}})},
     "initial_config.GorillaFileSystem.root.me.contents.a", 'must be {"type": "directory"'),
    ({"initial_config": {"GorillaFileSystem": {"root": []}}}, "initial_config.GorillaFileSystem.root",
     "first entry is the top folder"),
    ({"involved_classes": ["GorillaFileSystem", "MessageAPI"],
      "initial_config": {"MessageAPI": {"random_seed": "7"}}}, "initial_config.MessageAPI.random_seed",
     "must be integer or null, not string"),
    ({"involved_classes": ["GorillaFileSystem", "MessageAPI"],
      "initial_config": {"MessageAPI": {"generated_ids": [1]}}}, "initial_config.MessageAPI.generated_ids",
     "cannot be given: the class keeps it as a set"),
    ({"involved_classes": ["GorillaFileSystem", "TicketAPI"],
      "initial_config": {"TicketAPI": {"ticket_queue": "none"}}}, "initial_config.TicketAPI.ticket_queue",
     "must be array, not string"),
    ({"involved_classes": ["GorillaFileSystem", "TicketAPI"],
      "initial_config": {"TicketAPI": {"ticket_queue": [5]}}}, "initial_config.TicketAPI.ticket_queue[0]",
     "must be object, not integer"),
    ({"ground_truth": [["cd(folder=5)"], []]}, "ground_truth[0][0]", "'folder'"),
    ({"ground_truth": [["cd(folder='a', evil=1)"], []]}, "ground_truth[0][0]", "cd has no parameter 'evil'"),
    ({"ground_truth": [["mv(source='a')"], []]}, "ground_truth[0][0]", "missing the required argument 'destination'"),
])
def test_conversation_data_is_checked_at_load_naming_file_line_and_field(
        tmp_path: Path, change: dict[str, Any], field: str, fragment: str) -> None:
    path = tmp_path / "bad.jsonl"
    with pytest.raises(DatasetError) as caught:
        load_conversations(write_lines(path, [MINIMAL, {**MINIMAL, "id": "bad", **change}]))
    message = str(caught.value)
    assert f"{path}:2: {field}:" in message and fragment in message, message
    assert "1 problem;" in message  # the good line is not blamed


def test_a_conversation_of_too_many_turns_is_refused_before_it_is_built(tmp_path: Path) -> None:
    turns = 100_000
    record = {**MINIMAL, "question": [[{"role": "user", "content": "ls"}]] * turns, "ground_truth": [[]] * turns}
    with pytest.raises(DatasetError, match=r"question: has 100000 turns; at most 256"):
        load_conversations(write_lines(tmp_path / "long.jsonl", [record]))


def test_a_conversation_whose_first_line_is_long_is_recognised_as_far_as_the_loader_reads(tmp_path: Path) -> None:
    from promptgrid.matrix.conversations import is_conversation_dataset

    padding = "x" * 15_700_000  # under the 16 MiB line bound, over the old 8 MB sniff
    record = {**MINIMAL, "question": [[{"role": "user", "content": "Go to docs." + padding}],
                                      [{"role": "user", "content": "Sort a.txt"}]]}
    path = tmp_path / "long.jsonl"
    write_lines(path, ["", "", record])
    assert is_conversation_dataset(f"jsonl:{path}")

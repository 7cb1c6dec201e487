"""``--backend llm:MODEL`` takes every model ``promptgrid run`` takes: the offline fakes, the local model (its
client made as a run makes it), litellm strings with --api-base / --api-key-env; bad input exits 2 at once and
leaves nothing behind. (Server tests: test_llm_server.py.)"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import MissingDependencyError, TranslationError
from promptgrid.matrix.cli import main
from promptgrid.translate import TranslationInputError, TranslationStore, make_backend
from promptgrid.translate._llm import LLMBackend, translations_grammar


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_fake_auto_translates_offline_marking_each_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: llm:fake/auto failed after 9-12 s with litellm's "LLM Provider NOT provided"."""
    from promptgrid.matrix.conversations import load_conversations

    out, store = tmp_path / "de.jsonl", tmp_path / "t.sqlite3"
    started = time.monotonic()
    code, printed, err = run(["translate", "--to", "de", "--backend", "llm:fake/auto", "--dataset", "mini-mt:en",
                              "--what", "instructions", "--conversations-out", str(out), "--store", str(store)],
                             capsys)
    assert code == 1, err  # the checks see that "[de] Hello" is English: findings, exit 1
    assert "litellm" not in sys.modules or time.monotonic() - started < 60
    german = load_conversations(f"jsonl:{out}")
    assert len(german) == 24
    turn = german[0].turns[0]
    text = turn if isinstance(turn, str) else json.dumps(turn, ensure_ascii=False)
    assert "[de] " in text
    assert "backend llm:fake/auto:" in printed and "segment(s) sent" in printed
    with TranslationStore(store, readonly=True) as kept:
        assert {row.backend for row in kept.rows()} == {"llm:fake/auto"}


def test_fake_auto_keeps_tokens_and_fake_prose_is_an_unusable_answer() -> None:
    backend = make_backend("llm:fake/auto")
    assert backend.name == "llm:fake/auto"
    assert backend.translate(["Use ⟦1⟧ now.", "Hello."], "en", "ja") == ["[ja] Use ⟦1⟧ now.", "[ja] Hello."]
    with pytest.raises(TranslationError, match="did not return usable translations") as caught:
        make_backend("llm:fake/prose").translate(["Hello."], "en", "de")
    assert caught.value.exit_code == 1  # a model that answers badly is not the caller's input
    slow = make_backend("llm:fake/auto@0.05")
    started = time.monotonic()
    slow.translate(["Hello."], "en", "de")
    assert time.monotonic() - started >= 0.05


@pytest.mark.parametrize(("spec", "match"), [
    ("llm:fake/nope", "the fake translators are fake/auto, fake/prose"),
    ("llm:fake/ground-truth", "cannot translate"),
    ("llm:fake/auto@soon", "latency after '@' must be a number"),
    ("llm:replay/x.jsonl", "replay models answer stored jobs"),
    ("deepl", "unknown translation backend 'deepl'"),
])
def test_unusable_models_are_input_errors_before_anything_is_stored(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    spec: str, match: str) -> None:
    """Before: an unknown fake exited 1 after the store was created."""
    store = tmp_path / "t.sqlite3"
    started = time.monotonic()
    code, out, err = run(["translate", "--to", "de", "--backend", spec, "--what", "instructions",
                          "--store", str(store)], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and match in err, err
    assert time.monotonic() - started < 5  # no model loaded, no litellm imported for a fake
    assert list(tmp_path.iterdir()) == []


def test_a_model_litellm_cannot_place_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("litellm")
    code, _, err = run(["translate", "--to", "de", "--backend", "llm:nosuchprovider/x", "--what", "instructions",
                        "--store", str(tmp_path / "t.sqlite3")], capsys)
    assert code == 2 and "litellm knows no provider" in err and "LLM Provider NOT provided" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("extra", "match"), [
    (["--api-key-env", "PROMPTGRID_TEST_UNSET_KEY"], "the variable PROMPTGRID_TEST_UNSET_KEY is not set"),
    (["--api-key-env", "not a name"], "takes the NAME of the variable"),
    (["--api-base", "localhost:8000"], "--api-base must be an http:// or https:// URL"),
])
def test_endpoint_flags_are_checked_before_anything_is_sent(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            extra: list[str], match: str) -> None:
    code, _, err = run(["translate", "--to", "de", "--backend", "llm:openai/m", *extra, "--what", "instructions",
                        "--store", str(tmp_path / "t.sqlite3")], capsys)
    assert code == 2 and match in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["translate", "--to", "de", "--backend", "catalog", "--api-base", "http://127.0.0.1:9/v1"],
    ["translate", "--to", "de", "--backend", "llm:fake/auto", "--api-base", "http://127.0.0.1:9/v1"],
    ["check-translations", "--api-base", "http://127.0.0.1:9/v1"],
])
def test_endpoint_flags_without_a_server_model_are_refused(capsys: pytest.CaptureFixture[str],
                                                           argv: list[str]) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2 and "--api-base" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("argv", [
    ["translate", "--to", "xx-!", "--backend", "catalog"],
    ["translate", "--to", "en", "--backend", "catalog"],
    ["translate", "--to", "de", "--backend", "catalog", "--timeout", "0"],
    ["translate", "--to", "de", "--backend", "llm:fake/auto", "--conversations-out", "x.jsonl"],
    ["check-translations", "--lang", "zz-!"],
    ["check-translations", "--store", "no-such-store.sqlite3"],
    ["check-translations", "--back-translate", "llm:fake/nope"],
    ["check-translations", "--dataset", "mini-mt", "--lang", "zz-!"],
    ["check-translations", "--dataset", "mini-mt", "--back-translate", "deepl"],
])
def test_bad_input_exits_2_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(argv, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_check_translations_back_translates_with_a_fake(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["check-translations", "--dataset", "mini-mt", "--lang", "de", "--back-translate",
                          "llm:fake/auto"], capsys)
    assert code in (0, 1) and "Traceback" not in err
    assert "de" in out


class _RecordingClient:
    """Stands in for the run's client of a local model: records what the backend asks."""

    name = "local/smollm2-135m"

    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any, Any]] = []
        self.closed = False

    async def complete(self, messages: Any, params: Any, *, request: Any = None) -> Any:
        self.calls.append((messages, dict(params), request))
        texts = json.loads(messages[-1]["content"])["texts"]

        class Answer:
            text = json.dumps({"translations": [f"DE {t}" for t in texts]})

        return Answer()

    async def aclose(self) -> None:
        self.closed = True


def test_local_models_get_the_run_client_and_a_grammar_of_the_answer() -> None:
    made: list[tuple[str, dict[str, Any]]] = []
    client = _RecordingClient()

    def clients(name: str, **options: Any) -> Any:
        made.append((name, options))
        return client

    backend = make_backend("llm:local/smollm2-135m", clients=clients, timeout=7)
    assert made[0][0] == "local/smollm2-135m" and made[0][1]["api_base"] is None
    assert made[0][1]["api_key_env"] is None and made[0][1]["redactor"] is not None
    assert backend.translate(["Hello ⟦1⟧", "Bye"], "en", "de") == ["DE Hello ⟦1⟧", "DE Bye"]
    _, params, request = client.calls[0]
    assert params["timeout"] == 7 and params["temperature"] == 0.0 and params["max_tokens"] > 0
    assert request == {"call_mode": "constrained", "grammar": translations_grammar(2)}
    for count in (1, 3):
        root, string, ws = translations_grammar(count).splitlines()
        assert root.split().count("string") == count and root.count('","') == count - 1
        assert string.startswith("string ::=") and ws == "ws ::= [ \\n]?"
    backend.close()  # type: ignore[attr-defined]
    assert client.closed


def test_local_model_without_clients_or_with_an_endpoint_is_input() -> None:
    with pytest.raises(TranslationInputError, match="pass clients="):
        make_backend("llm:local/smollm2-135m")
    with pytest.raises(TranslationInputError, match="runs in-process"):
        make_backend("llm:local/smollm2-135m", clients=lambda *a, **k: None, api_base="http://127.0.0.1:9/v1")


def test_the_shipped_local_model_builds_its_run_client_or_says_what_to_install() -> None:
    """llm:local/smollm2-135m builds LocalClient when llama-cpp-python and the weights are there; otherwise the
    run's MissingDependencyError (exit 2), at once, nothing loaded."""
    from promptgrid.matrix.clients import make_client

    try:
        backend = make_backend("llm:local/smollm2-135m", clients=make_client)
    except MissingDependencyError as exc:
        assert exc.exit_code == 2 and "install" in str(exc).lower()
        return
    from promptgrid.matrix.clients._local import LocalClient

    assert isinstance(backend._client, LocalClient)  # type: ignore[attr-defined]


def test_make_backend_returns_a_backend_object_as_it_is() -> None:
    backend = LLMBackend("fake/auto")
    assert make_backend(backend) is backend  # type: ignore[arg-type]
    with pytest.raises(TranslationInputError, match="not int"):
        make_backend(3)  # type: ignore[arg-type]

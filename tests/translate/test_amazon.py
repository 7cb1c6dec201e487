"""Amazon Translate backend against botocore's Stubber (request shapes validated by botocore)."""

from __future__ import annotations

from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.stub import ANY, Stubber  # noqa: E402

from promptgrid.translate import TranslationError, mask, translate_units  # noqa: E402
from promptgrid.translate._amazon import MAX_REQUEST_BYTES, AmazonTranslateBackend  # noqa: E402
from promptgrid.translate._units import Unit, UnitKind  # noqa: E402


def make_client() -> Any:
    return boto3.client("translate", region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def reply(text: str, target: str = "de") -> dict[str, str]:
    return {"TranslatedText": text, "SourceLanguageCode": "en", "TargetLanguageCode": target}


def capture(client: Any) -> list[dict[str, Any]]:
    """Every TranslateText request's parameters, as botocore accepted them."""
    seen: list[dict[str, Any]] = []
    client.meta.events.register("provide-client-params.translate.TranslateText",
                                lambda params, **_: seen.append(dict(params)))
    return seen


def test_protected_spans_are_sent_as_translate_no_and_restored() -> None:
    client = make_client()
    backend = AmazonTranslateBackend(client=client, sleep=lambda s: None)
    masked = mask("If you decide, you MUST use <TOOLCALL>{output_format}</TOOLCALL> & nothing else.")
    html = ('If you decide, you MUST use <span translate="no">⟦1⟧</span> &amp; nothing else.')
    with Stubber(client) as stub:
        stub.add_response(
            "translate_text",
            reply('Wenn Sie sich entscheiden, MÜSSEN Sie <span translate="no">⟦1⟧</span> &amp; sonst nichts '
                  "verwenden."),
            expected_params={"Text": html, "SourceLanguageCode": "en", "TargetLanguageCode": "de"},
        )
        (out,) = backend.translate([masked.text], "en", "de")
        stub.assert_no_pending_responses()
    assert out == "Wenn Sie sich entscheiden, MÜSSEN Sie ⟦1⟧ & sonst nichts verwenden."


def test_formality_goes_into_settings_and_the_store_key() -> None:
    client = make_client()
    backend = AmazonTranslateBackend(formality="FORMAL", client=client)
    assert backend.name == "amazon:formal"
    assert AmazonTranslateBackend(region="eu-west-1").name == "amazon"  # region does not change the text
    with Stubber(client) as stub:
        stub.add_response("translate_text", reply("Hallo"),
                          expected_params={"Text": "Hello", "SourceLanguageCode": "en", "TargetLanguageCode": "de",
                                           "Settings": {"Formality": "FORMAL"}})
        assert backend.translate(["Hello"], "en", "de") == ["Hallo"]


def test_long_text_is_chunked_at_sentence_boundaries_under_the_byte_limit() -> None:
    sentence = "The value of the ⟦1⟧ parameter must be a city name in Europe. "
    text = (sentence * 200).strip()
    assert len(text.encode()) > MAX_REQUEST_BYTES
    client = make_client()
    seen = capture(client)
    backend = AmazonTranslateBackend(client=client)
    chunks = backend.chunks(text)
    assert len(chunks) >= 2
    with Stubber(client) as stub:
        for i in range(len(chunks)):
            stub.add_response("translate_text", reply(f"Teil {i}."),
                              expected_params={"Text": ANY, "SourceLanguageCode": "en", "TargetLanguageCode": "de"})
        (out,) = backend.translate([text], "en", "de")
        stub.assert_no_pending_responses()
    assert out == " ".join(f"Teil {i}." for i in range(len(chunks)))
    assert len(seen) == len(chunks)
    for params in seen:
        assert len(params["Text"].encode("utf-8")) <= MAX_REQUEST_BYTES
        assert params["Text"].endswith("Europe.")  # cut after a sentence, never inside one
        assert '<span translate="no">⟦1⟧</span>' in params["Text"]
    sent = " ".join(AmazonTranslateBackend.from_html(p["Text"]) for p in seen)
    assert sent == text


def test_a_single_huge_sentence_is_cut_between_words_never_inside_a_token() -> None:
    backend = AmazonTranslateBackend(client=object(), max_bytes=200)
    text = " ".join(f"word{i} ⟦{i}⟧" for i in range(1, 80))
    chunks = backend.chunks(text)
    assert all(len(backend.to_html(c).encode()) <= 200 for c in chunks)
    assert " ".join(chunks) == text


def test_throttling_is_retried_with_backoff_then_succeeds() -> None:
    client = make_client()
    delays: list[float] = []
    backend = AmazonTranslateBackend(client=client, sleep=delays.append, rng=lambda: 1.0, base_delay=0.5)
    with Stubber(client) as stub:
        stub.add_client_error("translate_text", service_error_code="TooManyRequestsException",
                              service_message="Rate exceeded", http_status_code=429)
        stub.add_client_error("translate_text", service_error_code="ThrottlingException",
                              service_message="Rate exceeded", http_status_code=400)
        stub.add_response("translate_text", reply("Hallo Welt"))
        assert backend.translate(["Hello world"], "en", "de") == ["Hallo Welt"]
        stub.assert_no_pending_responses()
    assert delays == [0.5, 1.0]  # exponential; rng=1.0 gives the top of each jitter range
    assert backend.requests == 3


def test_throttling_gives_up_after_max_attempts() -> None:
    client = make_client()
    backend = AmazonTranslateBackend(client=client, sleep=lambda s: None, max_attempts=2)
    with Stubber(client) as stub:
        for _ in range(2):
            stub.add_client_error("translate_text", service_error_code="TooManyRequestsException",
                                  http_status_code=429)
        with pytest.raises(TranslationError, match="throttling"):
            backend.translate(["Hello"], "en", "de")


def test_client_errors_become_translation_errors_with_advice() -> None:
    client = make_client()
    backend = AmazonTranslateBackend(client=client)
    with Stubber(client) as stub:
        stub.add_client_error("translate_text", service_error_code="UnsupportedLanguagePairException",
                              service_message="no", http_status_code=400)
        with pytest.raises(TranslationError, match="does not translate en -> xx"):
            backend.translate(["Hello"], "en", "xx")
        stub.add_client_error("translate_text", service_error_code="UnrecognizedClientException",
                              service_message="bad token", http_status_code=400)
        with pytest.raises(TranslationError, match="aws configure"):
            backend.translate(["Hello"], "en", "de")


def test_missing_credentials_say_how_to_configure_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE", raising=False)
    backend = AmazonTranslateBackend(region="us-east-1")
    with pytest.raises(TranslationError, match="aws configure"):
        backend.translate(["Hello"], "en", "de")


def test_each_unique_string_is_sent_once_across_two_runs(store: Any, accept_all: Any) -> None:
    client = make_client()
    seen = capture(client)
    backend = AmazonTranslateBackend(client=client)
    units = [
        Unit("a.persona", UnitKind.INSTRUCTIONS, "You are an expert."),
        Unit("b.persona", UnitKind.INSTRUCTIONS, "You are an expert."),  # same English, another key
        Unit("a.tools", UnitKind.INSTRUCTIONS, "Tools in {format} format:\n{functions}\n"),
    ]
    with Stubber(client) as stub:
        stub.add_response("translate_text", reply("Sie sind ein Experte."))
        stub.add_response("translate_text", reply('Tools im Format <span translate="no">⟦1⟧</span>:'))
        first = translate_units(units, ["de"], backend, store, checker=accept_all)
        stub.assert_no_pending_responses()
        second = translate_units(units, ["de"], backend, store, checker=accept_all)
    assert [r.status for r in first.results] == ["new", "new", "new"]
    assert [r.status for r in second.results] == ["cached", "cached", "cached"]
    assert len(seen) == 2 and len({p["Text"] for p in seen}) == 2
    assert first.results[2].text == "Tools im Format {format}:\n{functions}\n"
    assert store.get("You are an expert.", "de", "amazon").keys == ("a.persona", "b.persona")


def test_errors_pass_the_shared_redactor_and_translations_its_exact_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    client = make_client()
    backend = AmazonTranslateBackend(client=client, sleep=lambda s: None)
    with Stubber(client) as stub:
        stub.add_client_error("translate_text", service_error_code="ValidationException",
                              service_message=f"bad request signed with {secret}\nsecond line", http_status_code=400)
        with pytest.raises(TranslationError) as caught:
            backend.translate(["Hello"], "en", "de")
        stub.add_response("translate_text", reply(f"Hallo {secret}"), {"Text": ANY, "SourceLanguageCode": "en",
                                                                      "TargetLanguageCode": "de"})
        out = backend.translate(["Hello"], "en", "de")
    assert secret not in str(caught.value) and "[REDACTED]" in str(caught.value) and "\n" not in str(caught.value)
    assert out == ["Hallo [REDACTED]"]


def test_a_read_timeout_is_retried_by_the_policy_then_names_the_timeout() -> None:
    from botocore.exceptions import ReadTimeoutError

    class Hanging:
        calls = 0

        def translate_text(self, **params: Any) -> Any:
            Hanging.calls += 1
            raise ReadTimeoutError(endpoint_url="https://translate.us-east-1.amazonaws.com")

    notes: list[str] = []
    backend = AmazonTranslateBackend(client=Hanging(), max_attempts=3, timeout=2.0, sleep=lambda s: None,
                                     on_retry=notes.append)
    with pytest.raises(TranslationError, match=r"no answer within 2 s \(3 attempt\(s\)\)"):
        backend.translate(["Hello"], "en", "de")
    assert Hanging.calls == 3 and len(notes) == 2 and notes[0].startswith("amazon: no answer within 2 s")

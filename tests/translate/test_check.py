"""Translation checks: small hand-made fixtures here; the large corpus in test_corpus.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptgrid.translate import CheckCode, back_translation_similarity, check_translation, detect_language

TOOL_CALL = ("You should only return the function calls in the <TOOLCALL> section. If you decide to invoke any "
             "of the function(s), you MUST put it in the format of <TOOLCALL>{output_format}</TOOLCALL>. "
             "{param_types} You SHOULD NOT include any other text in the response.")
TOOL_CALL_DE = ("Sie sollten die Funktionsaufrufe nur im Abschnitt <TOOLCALL> zurückgeben. Wenn Sie sich "
                "entscheiden, eine der Funktionen aufzurufen, MÜSSEN Sie folgendes Format verwenden: "
                "<TOOLCALL>{output_format}</TOOLCALL>. {param_types} Sie SOLLTEN KEINEN weiteren Text in die "
                "Antwort aufnehmen.")
TOOL_CALL_JA = ("関数呼び出しは <TOOLCALL> セクションでのみ返してください。いずれかの関数を呼び出す場合は、"
                "必ず次の形式にしなければなりません：<TOOLCALL>{output_format}</TOOLCALL>。{param_types} "
                "応答に他のテキストを含めるべきではありません。")
TOOL_CALL_ZH = ("你只应在 <TOOLCALL> 部分返回函数调用。如果你决定调用任何函数，必须使用以下格式："
                "<TOOLCALL>{output_format}</TOOLCALL>。{param_types} 回复中不应包含任何其他文本。")
TOOL_CALL_HI = ("आपको केवल <TOOLCALL> अनुभाग में फ़ंक्शन कॉल लौटाने चाहिए। यदि आप किसी भी फ़ंक्शन को कॉल करने का "
                "निर्णय लेते हैं, तो आपको उसे अनिवार्य रूप से इस प्रारूप में रखना होगा: "
                "<TOOLCALL>{output_format}</TOOLCALL>। {param_types} आपको उत्तर में कोई अन्य टेक्स्ट शामिल नहीं "
                "करना चाहिए।")
TOOL_CALL_ES = ("Solo debes devolver las llamadas a funciones en la sección <TOOLCALL>. Si decides invocar "
                "alguna de las funciones, DEBES ponerla en el formato <TOOLCALL>{output_format}</TOOLCALL>. "
                "{param_types} NO DEBERÍAS incluir ningún otro texto en la respuesta.")
TYPES = ("The type fields of the parameters in your function calls must be one of: string, integer, float, "
         "boolean, array, dict, or tuple.")
LIST = "- Select the most suitable action from the given list.\n- Do not ask any clarifying questions."
DATE = "Departure date in the format YYYY-MM-DD, e.g. '2024-05-01'. Use `city_name` for the city."

GOOD = [
    (TOOL_CALL, TOOL_CALL_DE, "de", ()),
    (TOOL_CALL, TOOL_CALL_JA, "ja", ()),
    (TOOL_CALL, TOOL_CALL_ZH, "zh", ()),
    (TOOL_CALL, TOOL_CALL_HI, "hi", ()),
    (TOOL_CALL, TOOL_CALL_ES, "es", ()),
    (TYPES, "関数呼び出しのパラメータの type フィールドは、string、integer、float、boolean、array、dict、tuple "
            "のいずれかでなければなりません。", "ja", ()),
    (TYPES, "Die type-Felder der Parameter in Ihren Funktionsaufrufen müssen einen der folgenden Werte haben: "
            "string, integer, float, boolean, array, dict oder tuple.", "de", ()),
    (LIST, "- Selecciona la acción más adecuada de la lista dada.\n- No hagas preguntas aclaratorias.", "es", ()),
    (DATE, "Abfahrtsdatum im Format YYYY-MM-DD, z. B. '2024-05-01'. Verwenden Sie `city_name` für die Stadt.",
     "de", ()),
    ("Bot", "Bot", "de", ()),
    ("User", "ユーザー", "ja", ()),
    ("Name of the city, e.g. 'Berlin'.", "都市名。例：'Berlin'。", "ja", ()),
    ("Name of the city, e.g. 'Berlin'.", "城市名称，例如 'Berlin'。", "zh", ()),
    ("Get the weather with get_weather.", "Obtiene el tiempo con get_weather.", "es", ("get_weather",)),
    ("```{format}\n{functions}\n```", "```{format}\n{functions}\n```", "fr", ()),
    ("Here is a list of functions in {format} format that you can invoke.\n{functions}\n",
     "Ecco un elenco di funzioni in formato {format} che puoi invocare.\n{functions}\n", "it", ()),
]


@pytest.mark.parametrize(("source", "translation", "lang", "protected"), GOOD)
def test_good_translations_raise_nothing(source: str, translation: str, lang: str,
                                         protected: tuple[str, ...]) -> None:
    result = check_translation(source, translation, "en", lang, protected)
    assert result.problems == [], result.details
    assert result.ok


BROKEN = [
    (TOOL_CALL, TOOL_CALL_DE.replace("{output_format}", "{ausgabeformat}"), "de", (), {"placeholder_missing"}),
    (TOOL_CALL, TOOL_CALL_DE.replace("{param_types} ", ""), "de", (), {"placeholder_missing"}),
    (TOOL_CALL, TOOL_CALL_JA.replace("<TOOLCALL>", "＜TOOLCALL＞", 1), "ja", (), {"tag_missing"}),
    (TOOL_CALL, TOOL_CALL_DE.replace("</TOOLCALL>", "</toolcall>"), "de", (), {"tag_missing"}),
    (DATE, "Abfahrtsdatum im Format JJJJ-MM-TT, z. B. '2024-05-01'. Verwenden Sie `city_name` für die Stadt.",
     "de", (), {"protected_changed"}),
    (DATE, "Abfahrtsdatum im Format YYYY-MM-DD, z. B. '2024-05-01'. Verwenden Sie `stadt_name` für die Stadt.",
     "de", (), {"protected_changed"}),
    ("Call get_weather first.", "Rufen Sie zuerst hole_wetter auf.", "de", ("get_weather",), {"protected_changed"}),
    (TOOL_CALL, TOOL_CALL, "de", (), {"untranslated"}),
    (TOOL_CALL, TOOL_CALL_DE.split(". Wenn")[0] + ". If you decide to invoke any of the function(s), you MUST put "
     "it in the format of <TOOLCALL>{output_format}</TOOLCALL>. {param_types} You SHOULD NOT include any other "
     "text in the response.", "de", (), {"untranslated"}),
    (TOOL_CALL, TOOL_CALL_ZH, "ja", (), {"wrong_language"}),
    (TOOL_CALL, TOOL_CALL_ES, "it", (), {"wrong_language"}),
    (TOOL_CALL, TOOL_CALL_HI, "de", (), {"wrong_language"}),
    (TOOL_CALL, TOOL_CALL_DE.split(" Wenn")[0] + " <TOOLCALL>{output_format}</TOOLCALL>. {param_types}", "de", (),
     {"length_ratio"}),
    (TOOL_CALL, TOOL_CALL_ZH.replace("回复中不应包含任何其他文本。", "回复中不应包含任何其他文本。" * 3), "zh", (),
     {"length_ratio"}),
    (LIST, "- Selecciona la acción más adecuada de la lista dada. No hagas preguntas aclaratorias.", "es", (),
     {"structure_changed"}),
    (LIST, "* Selecciona la acción más adecuada de la lista dada.\n1. No hagas preguntas aclaratorias.", "es", (),
     {"structure_changed"}),
]


@pytest.mark.parametrize(("source", "translation", "lang", "protected", "expected"), BROKEN)
def test_broken_translations_get_exactly_their_codes(source: str, translation: str, lang: str,
                                                     protected: tuple[str, ...], expected: set[str]) -> None:
    result = check_translation(source, translation, "en", lang, protected)
    assert {p.value for p in result.problems} == expected, result.details
    assert not result.ok


def test_problem_codes_are_an_enum_of_strings() -> None:
    result = check_translation("Use {x}.", "Benutze {y}.", "en", "de")
    assert result.problems == [CheckCode.PLACEHOLDER_MISSING]
    assert result.problems == ["placeholder_missing"]  # str-valued, JSON friendly
    assert result.to_dict()["problems"] == ["placeholder_missing"]


@pytest.mark.parametrize(
    ("text", "target", "expected"),
    [
        ("Sie sind ein Experte für das Verfassen von Funktionsaufrufen.", "de", "de"),
        ("あなたは関数呼び出しを作成する専門家です。", "ja", "ja"),
        ("你是编写函数调用的专家。", "zh", "zh"),
        ("你是编写函数调用的专家。", "ja", "zh"),
        ("आप फ़ंक्शन कॉल लिखने में विशेषज्ञ हैं।", "hi", "hi"),
        ("ab", "de", None),
    ],
)
def test_detect_language_uses_script_first(text: str, target: str, expected: str | None) -> None:
    assert detect_language(text, target)[0] == expected


def test_back_translation_similarity() -> None:
    source = "Get the current weather conditions for a city."
    assert back_translation_similarity(source, "Get the current weather conditions of a city.") > 0.8
    assert back_translation_similarity(source, "Book a table in a restaurant.") < 0.3


def test_back_translation_low_is_flagged_with_a_backend() -> None:
    class Back:
        name = "back"

        def __init__(self, answer: str) -> None:
            self.answer = answer

        def translate(self, texts: list[str], source: str, target: str) -> list[str]:
            assert (source, target) == ("de", "en")
            return [self.answer for _ in texts]

    source = "Get the current weather conditions for a city."
    translation = "Ruft die aktuellen Wetterbedingungen für eine Stadt ab."
    good = check_translation(source, translation, "en", "de", back_translator=Back(source))
    bad = check_translation(source, translation, "en", "de", back_translator=Back("Order a pizza now."))
    assert good.ok
    assert bad.problems == [CheckCode.BACK_TRANSLATION_LOW]


words = st.sampled_from(["Funktion", "Aufruf", "Antwort", "Format", "Text", "Abschnitt", "wählen", "bitte"])


@settings(max_examples=40, deadline=None)
@given(st.lists(words, min_size=3, max_size=12), st.sampled_from(["{output_format}", "<TOOLCALL>", "{format}"]))
def test_dropping_a_placeholder_or_tag_is_always_caught(body: list[str], token: str) -> None:
    source = "Use the answer " + token + " here."
    translation = " ".join(body)
    codes = {p.value for p in check_translation(source, translation, "en", "de").problems}
    assert ("placeholder_missing" if token.startswith("{") else "tag_missing") in codes


# --------------------------------------------------------------------------- markup structure (xmltodict)

CALLS = 'Answer only with <calls><call name="f">{arguments}</call></calls>, nothing else.'
CALLS_DE = 'Antworten Sie nur mit <calls><call name="f">{arguments}</call></calls>, sonst nichts.'


@pytest.mark.parametrize(("source", "translation", "lang"), [
    (TOOL_CALL, TOOL_CALL_DE, "de"),  # "the <TOOLCALL> section" names a tag: prose, not an element
    (CALLS, CALLS_DE, "de"),
    ("Wrap it: <a>{x}</a> & <b/> < c", "Umschließen Sie es: <a>{x}</a> & <b/> < c", "de"),  # stray & and <
])
def test_markup_kept(source: str, translation: str, lang: str) -> None:
    result = check_translation(source, translation, "en", lang)
    assert CheckCode.MARKUP_CHANGED not in result.problems, result.details


@pytest.mark.parametrize(("translation", "shown"), [
    # the same tags, swapped: {output_format} is no longer inside <TOOLCALL>
    (TOOL_CALL_DE.replace("<TOOLCALL>{output_format}</TOOLCALL>", "</TOOLCALL>{output_format}<TOOLCALL>"),
     "<TOOLCALL>({output_format}) {param_types} in the source but <TOOLCALL> {output_format} {param_types}"),
    (CALLS_DE.replace('<calls><call name="f">{arguments}</call></calls>',
                      '<calls></calls><call name="f">{arguments}</call>'),
     "<calls>(<call>({arguments})) in the source but <calls> <call>({arguments})"),
    (CALLS_DE.replace('<call name="f">{arguments}</call>', '{arguments}<call name="f"></call>'),
     "<calls>(<call>({arguments})) in the source but <calls>(<call> {arguments})"),
])
def test_markup_broken(translation: str, shown: str) -> None:
    source = TOOL_CALL if "TOOLCALL" in translation else CALLS
    result = check_translation(source, translation, "en", "de")
    assert result.problems == [CheckCode.MARKUP_CHANGED], result.details
    assert shown in result.details["markup_changed"]


def test_markup_is_judged_only_when_tags_and_placeholders_agree() -> None:
    dropped = check_translation(CALLS, CALLS_DE.replace("</calls>", ""), "en", "de")
    assert dropped.problems == [CheckCode.TAG_MISSING]
    renamed = check_translation(CALLS, CALLS_DE.replace("{arguments}", "{argumente}"), "en", "de")
    assert renamed.problems == [CheckCode.PLACEHOLDER_MISSING]


def test_markup_dtd_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    import xmltodict

    def no_parse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a text with a DTD reached the XML parser")

    monkeypatch.setattr(xmltodict, "parse", no_parse)
    bomb = '<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
    result = check_translation(CALLS, bomb + CALLS_DE, "en", "de")
    assert result.problems == [CheckCode.MARKUP_CHANGED]
    assert "DTD or entity" in result.details["markup_changed"]
    # a source with a declaration is not parsed either (and not judged)
    assert check_translation(bomb + CALLS, bomb + CALLS_DE, "en", "de").ok


def test_markup_not_compared_past_the_size_bound() -> None:
    from promptgrid.translate._check import MAX_MARKUP_CHARS

    filler = " Bitte." * (MAX_MARKUP_CHARS // 7)
    swapped = CALLS_DE.replace('<calls><call name="f">{arguments}</call></calls>',
                               '<calls></calls><call name="f">{arguments}</call>')
    assert CheckCode.MARKUP_CHANGED in check_translation(CALLS, swapped, "en", "de").problems
    assert CheckCode.MARKUP_CHANGED not in check_translation(CALLS, swapped + filler, "en", "de").problems


# Korean has no shipped catalog: its length band is Japanese's; these reviewed-by-hand lines must pass.
GOOD_KO = [
    ("You are an expert in composing functions.", "당신은 함수 구성에 능숙한 전문가입니다."),
    ("Number of passengers.", "승객 수."),
    ("Search for flights between two cities on a given date.", "지정한 날짜에 두 도시 사이의 항공편을 검색합니다."),
    ("You are given a question and a set of possible functions. Based on the question, you will need to make one "
     "or more function/tool calls to achieve the purpose.",
     "질문과 사용 가능한 함수 목록이 주어집니다. 질문에 따라 목적을 달성하기 위해 하나 이상의 함수/도구 호출을 "
     "해야 합니다."),
    ("User", "사용자"),
]


@pytest.mark.parametrize(("source", "translation"), GOOD_KO)
def test_korean_translations_pass(source: str, translation: str) -> None:
    result = check_translation(source, translation, "en", "ko")
    assert result.ok, result.details


@pytest.mark.parametrize(("source", "translation"), [
    ("You are an expert in composing functions.", "전문가."),
    ("Search for flights between two cities on a given date.", "항공편 검색."),
    (GOOD_KO[3][0], "질문과 함수."),
])
def test_korean_translation_that_drops_most_of_the_sentence_fails(source: str, translation: str) -> None:
    assert check_translation(source, translation, "en", "ko").problems == [CheckCode.LENGTH_RATIO]


@pytest.mark.parametrize(("translation", "target", "detected"), [
    ("Bạn được cung cấp một câu hỏi và một tập hợp các hàm có thể dùng.", "de", "vi"),
    ("Je krijgt een vraag en een reeks mogelijke functies.", "de", "nl"),
    ("Du får en fråga och en uppsättning möjliga funktioner.", "fr", "sv"),
    ("Вам дан вопрос и набор возможных функций.", "de", "ru"),
    ("질문과 사용 가능한 함수 목록이 주어집니다.", "es", "ko"),
    ("Anda diberi sebuah pertanyaan dan sekumpulan fungsi yang mungkin.", "ja", "ms"),
])
def test_a_language_outside_the_built_in_ones_is_named(translation: str, target: str, detected: str) -> None:
    result = check_translation("You are given a question and a set of possible functions.", translation, "en", target)
    assert result.problems == [CheckCode.WRONG_LANGUAGE], result.details
    assert result.details["detected_language"] == detected


@pytest.mark.parametrize(("source", "translation", "target"), [
    ("Number of passengers.", "Aantal passagiers.", "de"),  # Dutch, but too short to be sure
    ("Which account.", "Qué cuenta.", "es"),  # langid: French with 0.999 on 9 letters
    ("Full name of the person receiving the money.", "Nome completo da pessoa que recebe o dinheiro.", "pt"),
    ("Where the event takes place.", "इवेंट की जगह कहाँ है, यह स्थान।", "hi"),  # langid often says Marathi
])
def test_short_strings_and_close_relatives_are_not_called_another_language(source: str, translation: str,
                                                                          target: str) -> None:
    result = check_translation(source, translation, "en", target)
    assert CheckCode.WRONG_LANGUAGE not in result.problems, result.details


def test_relatives_are_languages_langid_knows() -> None:
    from promptgrid.languages import BROAD_LANGUAGES
    from promptgrid.translate._check import _RELATIVES

    assert set(_RELATIVES) | {lang for relatives in _RELATIVES.values() for lang in relatives} <= set(BROAD_LANGUAGES)


def test_a_sentence_cut_to_a_word_inside_a_text_of_plausible_length_fails() -> None:
    source = ("Search for flights between two cities on a given date. Return the cheapest flights first. "
              "Never book a flight without asking the user to confirm the price and the date.")
    kept = ("Sucht nach verfügbaren Flügen zwischen zwei verschiedenen Städten an einem bestimmten Reisedatum. "
            "Gibt die günstigsten verfügbaren Flüge immer zuerst zurück.")  # long enough for the whole text
    result = check_translation(source, kept + " Niemals.", "en", "de")
    assert result.problems == [CheckCode.LENGTH_RATIO]
    assert "sentence 3 has 7 letters" in result.details["length_ratio_problem"]
    full = kept + " Buchen Sie nie einen Flug, ohne den Nutzer den Preis und das Datum bestätigen zu lassen."
    assert check_translation(source, full, "en", "de").ok
    # sentences that do not pair up (two merged into one) are judged as a whole only
    merged = ("Sucht Flüge zwischen zwei Städten an einem bestimmten Datum und gibt die günstigsten zuerst zurück. "
              "Buchen Sie nie einen Flug, ohne den Nutzer den Preis und das Datum bestätigen zu lassen.")
    assert check_translation(source, merged, "en", "de").ok


@pytest.mark.parametrize("source, translation, target", [
    ("Send a text message to one of your contacts.", "メッセージ", "ja"),
    ("Send a text message to one of your contacts.", "消息", "zh"),
    ("Send a text message to one of your contacts.", "Nachricht", "de"),
])
def test_one_word_left_of_a_sentence_fails_length_ratio(source: str, translation: str, target: str) -> None:
    # The lower bound's slack (fair to short labels) fades out with the source's length: a 35-letter
    # sentence cut to one word fails, while the shipped catalogs' terse Japanese (5 letters for a
    # 31-letter description) still passes (test_length_bands).
    result = check_translation(source, translation, "en", target)
    assert CheckCode.LENGTH_RATIO in result.problems, result.details
    assert check_translation("City", "都市", "en", "ja").ok

"""score(): verdict fields, failure modes on the BFCL V4 blog's examples (section 5), the Verdict record."""

from __future__ import annotations

import dataclasses
import inspect
import json
from typing import Any

import pytest

from promptgrid.matrix.scoring import FailureMode as F
from promptgrid.matrix.scoring import clear_caches, score
from promptgrid.matrix.scoring.verdict import ErrorCode, Verdict
from promptgrid.variants import Variant
from support.builders import checked_case, fn

E = ErrorCode


def V(ret: str = "python", tag: bool = False, doc: str = "json") -> Variant:
    return Variant(return_format=ret, tool_call_tag=tag, doc_format=doc)


@pytest.fixture
def gcd() -> Any:
    return checked_case("simple", [fn("math.gcd", ["num1", "num2"], num1="integer", num2="integer")],
                        [{"math.gcd": {"num1": [40], "num2": [50]}}], case_id="simple_19")


@pytest.fixture
def paint() -> Any:
    f = [fn("paint_color_mixture", ["paint_type", "color"], paint_type="string", color="string")]
    gt = [{"paint_color_mixture": {"paint_type": ["Watercolor"], "color": ["magenta"]}},
          {"paint_color_mixture": {"paint_type": ["Acrylic"], "color": ["navy"]}}]
    return checked_case("parallel", f, gt, case_id="parallel_36")


def test_valid_python_answer_fills_every_field(gcd: Any) -> None:
    v = score("[math.gcd(num1=40, num2=50)]", V(), gcd)
    assert v.valid and v.error_code is E.VALID and v.bfcl_error_type is None and v.failure_mode is None
    assert v.format_agnostic_valid and v.format_match and v.function_selection_correct
    assert v.detected_format == "python"
    assert (v.tool_tp, v.tool_fp, v.tool_fn, v.arg_tp, v.arg_fp, v.arg_fn) == (1, 0, 0, 2, 0, 0)
    assert (v.n_expected_calls, v.n_predicted_calls) == (1, 1)
    assert v.response_language is None and v.language_match is None
    d = v.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["error_code"] == "VALID" and d["bfcl_error_type"] is None and d["message"] == ""


def test_blog_wrong_xml_type_names(gcd: Any) -> None:
    text = ('<TOOLCALL>\n<functions>\n<function name="math.gcd">\n<params>\n'
            '<param name="num1" value="40" type="int"/>\n'
            '<param name="num2" value="50" type="int"/>\n</params>\n</function>\n</functions>\n</TOOLCALL>')
    v = score(text, V("verbose_xml", True, "python"), gcd)
    assert not v.valid and v.bfcl_error_type == "type_error:simple"
    assert v.failure_mode is F.WRONG_XML_TYPE_NAMES
    assert v.format_agnostic_valid  # read leniently, int means integer
    assert v.function_selection_correct and v.format_match
    assert (v.arg_tp, v.arg_fp, v.arg_fn) == (0, 2, 2)
    fixed = text.replace('type="int"', 'type="integer"')
    assert score(fixed, V("verbose_xml", True, "python"), gcd).valid


def test_blog_per_call_functions_wrapping(paint: Any) -> None:
    one = ('<functions><function name="paint_color_mixture"><params><param name="paint_type" value="{}" '
           'type="string"/><param name="color" value="{}" type="string"/></params></function></functions>')
    text = one.format("Watercolor", "magenta") + "\n" + one.format("Acrylic", "navy")
    v = score(text, V("verbose_xml", False), paint)
    assert v.bfcl_error_type == "parallel_function_checker_no_order:wrong_count"
    assert v.failure_mode is F.PER_CALL_FUNCTIONS_WRAPPING
    assert v.format_agnostic_valid and v.format_match is False
    assert v.n_predicted_calls == 1  # bfcl-eval reads the first block only


def test_blog_per_call_toolcall_wrapping() -> None:
    f = [fn("alimony_calculator.ca.calculate", ["payor_income", "recipient_income", "duration"],
              payor_income="integer", recipient_income="integer", duration="integer")]
    gt = [{"alimony_calculator.ca.calculate": {"payor_income": [10000], "recipient_income": [3000], "duration": [d]}}
          for d in (10, 20)]
    c = checked_case("parallel", f, gt)
    text = ("<TOOLCALL>\nalimony_calculator.ca.calculate(payor_income=10000, recipient_income=3000, duration=10)\n"
            "</TOOLCALL>\n<TOOLCALL>\nalimony_calculator.ca.calculate(payor_income=10000, recipient_income=3000, "
            "duration=20)\n</TOOLCALL>")
    v = score(text, V("python", True, "xml"), c)
    assert not v.valid and v.failure_mode is F.PER_CALL_TOOLCALL_WRAPPING
    assert v.format_agnostic_valid


def test_blog_python_answer_to_json_prompt() -> None:
    f = [fn("lawsuit_search", ["company", "start_date", "location"], company="string", start_date="string",
              location="string", status="string")]
    c = checked_case("simple", f, [{"lawsuit_search": {"company": ["Google"], "start_date": ["01-01-2021"],
                                                 "location": ["California"], "status": ["ongoing", ""]}}])
    text = '<TOOLCALL>\n[lawsuit_search(company="Google", start_date="01-01-2021", location="California")]\n</TOOLCALL>'
    v = score(text, V("json", True, "xml"), c)
    assert not v.valid and v.failure_mode is F.OTHER_FORMAT and v.detected_format == "python"
    assert v.format_agnostic_valid and v.format_match is False
    good = ('<TOOLCALL>\n```json\n[{"function":"lawsuit_search","parameters":{"company":"Google",'
            '"start_date":"01-01-2021","location":"California","status":"ongoing"}}]\n```\n</TOOLCALL>')
    assert score(good, V("json", True, "xml"), c).valid


def test_blog_unclosed_params_tag() -> None:
    f = [fn("update_user_info", ["user_id", "update_info"], user_id="integer", update_info="dict",
              database="string")]
    c = checked_case("simple", f, [{"update_user_info": {"user_id": [43523], "update_info": [
        {"name": ["John Doe"], "email": ["johndoe@email.com"]}], "database": ["CustomerInfo", ""]}}])
    text = ('<TOOLCALL>\n<functions>\n<function name="update_user_info">\n<params>\n'
            '<param name="user_id" value="43523" type="integer"/>\n'
            '<param name="update_info" value="{\'name\': \'John Doe\', \'email\': \'johndoe@email.com\'}" '
            'type="dict"/>\n'
            '</function>\n</functions>\n</TOOLCALL>')
    v = score(text, V("verbose_xml", True, "xml"), c)
    assert v.bfcl_error_type == "ast_decoder:decoder_failed"
    assert v.failure_mode is F.UNCLOSED_TAG
    closed = text.replace("</function>", "</params>\n</function>")
    assert score(closed, V("verbose_xml", True, "xml"), c).valid


def test_tag_missing_and_prose(gcd: Any) -> None:
    v = score("[math.gcd(num1=40, num2=50)]", V("python", True), gcd)
    assert v.bfcl_error_type == "ast_decoder:decoder_failed" and v.failure_mode is F.TAG_MISSING
    assert v.format_agnostic_valid and v.format_match is False
    v = score("Sure! Here is the call: [math.gcd(num1=40, num2=50)]", V(), gcd)
    assert v.failure_mode is F.PROSE_AROUND_CALL and v.format_agnostic_valid
    v = score("The greatest common divisor of 40 and 50 is 10.", V(), gcd)
    assert v.failure_mode is F.PROSE_INSTEAD_OF_CALL and v.format_match is False
    assert v.response_language == "en" and v.language_match is True
    assert score("", V(), gcd).failure_mode is F.NO_CALL


def test_content_failure_modes() -> None:
    f = [fn("a", ["x"], x="integer", y="string"), fn("b", ["x"], x="integer")]
    c = checked_case("multiple", f, [{"b": {"x": [2]}}])
    assert score("[zzz(x=2)]", V(), c).failure_mode is F.HALLUCINATED_FUNCTION
    wrong = score("[a(x=2)]", V(), c)
    assert wrong.failure_mode is F.WRONG_FUNCTION and not wrong.function_selection_correct
    assert (wrong.tool_tp, wrong.tool_fp, wrong.tool_fn) == (0, 1, 1)
    assert score("[b(x=2), b(x=2)]", V(), c).failure_mode is F.WRONG_COUNT
    assert score("[b()]", V(), c).failure_mode is F.MISSING_PARAMETER
    assert score("[b(x=2, q=1)]", V(), c).failure_mode is F.UNKNOWN_PARAMETER
    assert score("[b(x='2')]", V(), c).failure_mode is F.WRONG_TYPE
    v = score("[b(x=3)]", V(), c)
    assert v.failure_mode is F.WRONG_VALUE and v.function_selection_correct
    assert (v.arg_tp, v.arg_fp, v.arg_fn) == (0, 1, 1)


def test_irrelevance_cases() -> None:
    f = [fn("weather.get", ["city"], city="string")]
    c = checked_case("irrelevance", f, [], language="de")
    v = score("Dafür habe ich leider keine passende Funktion, ich kann das Rezept nicht suchen.", V(), c)
    assert v.valid and v.failure_mode is None and v.format_match is None and v.format_agnostic_valid
    assert v.response_language == "de" and v.language_match is True
    assert v.function_selection_correct and v.n_expected_calls == 0
    v = score("[weather.get(city='Berlin')]", V(), c)
    assert not v.valid and v.bfcl_error_type == "irrelevance_error:decoder_success"
    assert v.failure_mode is F.CALL_WHEN_NONE_EXPECTED and not v.format_agnostic_valid
    assert (v.tool_fp, v.tool_tp, v.tool_fn) == (1, 0, 0)
    assert score("[]", V(), c).valid  # an empty call list is no call, as in bfcl-eval


def test_scores_are_memoized_but_equal(gcd: Any) -> None:
    clear_caches()
    first = score("[math.gcd(num1=40, num2=51)]", V(), gcd)
    assert score("[math.gcd(num1=40, num2=51)]", V(doc="xml"), gcd) is first  # doc format does not matter
    assert score("[math.gcd(num1=40, num2=51)]", V(tag=True), gcd) is not first


def test_verdict_init_matches_its_fields() -> None:
    names = [f.name for f in dataclasses.fields(Verdict)]
    params = list(inspect.signature(Verdict.__init__).parameters)[1:]
    assert params == [*names, "message"]
    for f in dataclasses.fields(Verdict):
        assert inspect.signature(Verdict.__init__).parameters[f.name].default == (
            f.default if f.default is not dataclasses.MISSING else inspect.Parameter.empty)
    v = Verdict(False, ErrorCode.TYPE_ERROR_SIMPLE, failure_mode=F.WRONG_TYPE, message="why")
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.valid = True  # type: ignore[misc]
    d = v.to_dict()
    assert d["bfcl_error_type"] == "type_error:simple" and d["failure_mode"] == "wrong_type" and d["message"] == "why"
    for key in ("valid", "error_code", "bfcl_error_type", "failure_mode", "format_agnostic_valid", "detected_format",
                "format_match", "function_selection_correct", "tool_tp", "tool_fp", "tool_fn", "arg_tp", "arg_fp",
                "arg_fn", "n_expected_calls", "n_predicted_calls", "message"):
        assert key in d


def test_error_code_round_trips_bfcl_strings() -> None:
    for code in ErrorCode:
        assert ErrorCode.from_bfcl(code.bfcl_error_type) is code
    assert ErrorCode.from_bfcl(None) is ErrorCode.VALID


def test_every_failure_mode_has_a_description() -> None:
    for mode in F:
        assert mode.description and mode.description[0].islower()


def test_massive_one_shot_answer_label_is_removed_before_parsing() -> None:
    from promptgrid.matrix.datasets import load_dataset
    from promptgrid.variants import load_grid

    case = load_dataset("mini:de").case("simple_weather_01-de")
    variants = load_grid("massive_translation").variants
    for variant in variants:
        for response in ('Action: weather.get_current(city="München")',
                         '  action: [weather.get_current(city="München")]',
                         'weather.get_current(city="München")'):
            assert score(response, variant, case).valid, (variant.label, response)
        assert not score('Action: weather.get_current(city="Berlin")', variant, case).valid
    bfcl = load_grid("bfcl_v4").variants[5]  # python, no tag: no label expected there
    assert not score('Action: weather.get_current(city="München")', bfcl, case).valid

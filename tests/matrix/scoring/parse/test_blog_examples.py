"""The BFCL V4 format-sensitivity blog's failure examples (section 5), each
with the outcome bfcl-eval's decoder gives and the failure kind we report.

The blog prints model output JSON-escaped (``name=\\"f\\"``); the texts below
are the outputs themselves, with that display escaping undone except where
the backslashes are the model's own mistake.
"""

from __future__ import annotations

from promptgrid.matrix.scoring.parse import ParseFailure, parse_response

GCD_INT = """<TOOLCALL>
<functions>
<function name="math.gcd">
<params>
<param name="num1" value="40" type="int"/>
<param name="num2" value="50" type="int"/>
</params>
</function>
</functions>
</TOOLCALL>"""


def test_xml_type_int_instead_of_integer_keeps_strings(check_bfcl):
    """5.1 simple_19 py->verbose_xml, tag: "int" is not a bfcl type, values stay strings."""
    r = check_bfcl(GCD_INT, "verbose_xml", True)
    assert r.ok
    assert r.calls == ({"math.gcd": {"num1": "40", "num2": "50"}},)
    assert r.unknown_xml_types == ("int",)
    assert r.detected_format == "verbose_xml" and r.tag_found


def test_xml_type_integer_converts(check_bfcl):
    r = check_bfcl(GCD_INT.replace('type="int"', 'type="integer"'), "verbose_xml", True)
    assert r.calls == ({"math.gcd": {"num1": 40, "num2": 50}},)
    assert r.unknown_xml_types == ()


def test_xml_type_int_strict_mode_fails():
    r = parse_response(GCD_INT, "verbose_xml", True, strict_xml_types=True)
    assert r.failure is ParseFailure.WRONG_XML_TYPE
    assert r.bfcl_error_type is None  # bfcl-eval decodes it; its checker fails the type
    assert r.unknown_xml_types == ("int",)


PAINT_PER_CALL = """<functions>
<function name="paint_color_mixture">
<params>
<param name="paint_type" value="Watercolor" type="string"/>
<param name="color" value="magenta" type="string"/>
</params>
</function>
</functions>
<functions>
<function name="paint_color_mixture">
<params>
<param name="paint_type" value="Acrylic" type="string"/>
<param name="color" value="navy" type="string"/>
</params>
</function>
</functions>"""


def test_per_call_functions_wrapping_keeps_first_block(check_bfcl):
    """5.1 parallel_36 json->verbose_xml: bfcl reads the first <functions> only."""
    r = check_bfcl(PAINT_PER_CALL, "verbose_xml", False)
    assert r.ok and r.per_call_wrapping
    assert r.calls == ({"paint_color_mixture": {"paint_type": "Watercolor", "color": "magenta"}},)
    assert r.any_calls is not None and len(r.any_calls) == 2


def test_one_functions_block_is_not_per_call(check_bfcl):
    one = PAINT_PER_CALL.replace("</functions>\n<functions>\n", "")
    r = check_bfcl(one, "verbose_xml", False)
    assert r.ok and not r.per_call_wrapping and len(r.calls or ()) == 2


ALIMONY_PER_CALL = """<TOOLCALL>
alimony_calculator.ca.calculate(payor_income=10000, recipient_income=3000,
duration=10)
</TOOLCALL>
<TOOLCALL>
alimony_calculator.ca.calculate(payor_income=10000, recipient_income=3000,
duration=20)
</TOOLCALL>"""


def test_per_call_toolcall_wrapping_keeps_first_block(check_bfcl):
    """5.1 parallel_23 xml->python, tag: bfcl reads the first <TOOLCALL> only."""
    r = check_bfcl(ALIMONY_PER_CALL, "python", True)
    assert r.ok and r.per_call_wrapping and r.tag_found
    assert r.calls == ({"alimony_calculator.ca.calculate":
                        {"payor_income": 10000, "recipient_income": 3000, "duration": 10}},)
    assert r.any_calls is not None
    assert [c["alimony_calculator.ca.calculate"]["duration"] for c in r.any_calls] == [10, 20]


def test_one_toolcall_list_is_correct(check_bfcl):
    text = """<TOOLCALL>
[alimony_calculator.ca.calculate(payor_income=10000, recipient_income=3000, duration=10),
alimony_calculator.ca.calculate(payor_income=10000, recipient_income=3000, duration=20)]
</TOOLCALL>"""
    r = check_bfcl(text, "python", True)
    assert r.ok and len(r.calls or ()) == 2 and not r.per_call_wrapping


LLAMA_BAD_JSON = (
    "<TOOLCALL>\n"
    '[{\\"function\\":\\"get_service_id\\",\\"parameters\\":{\\"service_id:"\\2\\",\\"province_id:"\\1\\",'
    '\\"district_name:Chatuchak\\",\\"rating:"\\4.5\\"}}]\\n\n'
    "</TOOLCALL>"
)


def test_json_backslash_quotes_is_bad_escaping(check_bfcl):
    """5.1 live_simple_181 xml->json, tag: bfcl's json.loads fails, it returns no calls."""
    r = check_bfcl(LLAMA_BAD_JSON, "json", True)
    assert r.failure is ParseFailure.BAD_ESCAPING
    assert r.bfcl_error_type is None  # bfcl-eval: [] -> its checker reports a wrong count


def test_json_in_fence_inside_tag_is_correct(check_bfcl):
    text = ('<TOOLCALL>\n```json\n[{"function":"get_service_id","parameters":{"service_id":2,'
            '"province_id":1,"district_name":"Chatuchak","rating":4.5}}]\n```\n</TOOLCALL>')
    r = check_bfcl(text, "json", True)
    assert r.ok and r.code_fence and not r.prose
    assert r.calls == ({"get_service_id": {"service_id": 2, "province_id": 1,
                                           "district_name": "Chatuchak", "rating": 4.5}},)


GEMMA_BAD_XML = """<TOOLCALL>
<functions>
<function name="update_user_info">
<params>
<param name="user_id" value="43523" type="integer"/>
<param name="update_info" value="{\\"name\\": \\"John Doe\\", \\"email\\": \\"johndoe@email.com\\"}" type="dict"/>
</params>
</function>
</functions>
</TOOLCALL>"""


def test_xml_backslash_quotes_is_bad_escaping(check_bfcl):
    """5.1 simple_94 xml->verbose_xml, tag: \\" inside an attribute breaks the XML."""
    r = check_bfcl(GEMMA_BAD_XML, "verbose_xml", True)
    assert r.failure is ParseFailure.BAD_ESCAPING


def test_xml_dict_value_with_single_quotes_is_correct(check_bfcl):
    good = GEMMA_BAD_XML.replace(
        'value="{\\"name\\": \\"John Doe\\", \\"email\\": \\"johndoe@email.com\\"}"',
        "value=\"{'name':'John Doe', 'email':'johndoe@email.com'}\"",
    )
    r = check_bfcl(good, "verbose_xml", True)
    assert r.calls == ({"update_user_info": {"user_id": 43523,
                                             "update_info": {"name": "John Doe", "email": "johndoe@email.com"}}},)


WATT_OTHER_XML = """<predict_house_price>
<area>2000</area>
<rooms>4</rooms>
<year>1985</year>
<location>San Francisco</location>
</predict_house_price>
<lawsuit_search>
<entity>Mr. John Doe</entity>
<county>San Francisco</county>
<state>California</state>
</lawsuit_search>"""


def test_made_up_xml_tags_are_wrong_format(check_bfcl):
    """5.2 parallel_multiple_154 py->concise_xml: no <functions>, tags of its own."""
    r = check_bfcl(WATT_OTHER_XML, "concise_xml", False)
    assert r.failure is ParseFailure.WRONG_FORMAT
    assert r.detected_format == "other_xml"
    assert r.any_calls is not None and r.any_calls[0] == {
        "predict_house_price": {"area": 2000, "rooms": 4, "year": 1985, "location": "San Francisco"}}


def test_concise_xml_is_correct(check_bfcl):
    text = """<functions>
<function name="predict_house_price">
<param name="area" type="integer">2000</param>
<param name="rooms" type="integer">4</param>
<param name="year" type="integer">1985</param>
<param name="location" type="string">San Francisco</param>
</function>
<function name="calculate_probability">
<param name="total_outcomes" type="integer">1000</param>
<param name="favorable_outcomes" type="integer">5</param>
<param name="round_to" type="integer">3</param>
</function>
</functions>"""
    r = check_bfcl(text, "concise_xml", False)
    assert r.ok and r.detected_format == "concise_xml" and len(r.calls or ()) == 2
    assert r.calls and r.calls[1]["calculate_probability"]["round_to"] == 3


GEMMA_UNCLOSED = """<TOOLCALL>
<functions>
<function name="update_user_info">
<params>
<param name="user_id" value="43523" type="integer"/>
<param name="update_info" value="{'name': 'John Doe', 'email': 'johndoe@email.com'}" type="dict"/>
<param name="database" value="the database" type="string"/>
</function>
</functions>
</TOOLCALL>"""


def test_unclosed_xml_element_is_unclosed_tag(check_bfcl):
    """5.1 simple_94: </params> missing -> mismatched tag; the calls are still recoverable."""
    r = check_bfcl(GEMMA_UNCLOSED, "verbose_xml", True)
    assert r.failure is ParseFailure.UNCLOSED_TAG
    assert r.detected_format == "verbose_xml"
    assert r.any_calls is not None and r.any_calls[0]["update_user_info"]["user_id"] == 43523


def test_python_inside_tag_when_json_asked_is_wrong_format(check_bfcl):
    """5.2 simple_168 xml->json, tag (watt-tool): Python calls instead of JSON."""
    text = ('<TOOLCALL>\n[lawsuit_search(company="Google", start_date="01-01-2021", '
            'location="California")]\n</TOOLCALL>')
    r = check_bfcl(text, "json", True)
    assert r.failure is ParseFailure.WRONG_FORMAT and r.detected_format == "python"
    assert r.bfcl_error_type is None  # bfcl-eval finds no JSON array: no calls, wrong count


def test_json_with_line_break_inside_is_correct(check_bfcl):
    text = ('<TOOLCALL>\n```json\n[{"function":"lawsuit_search","parameters":{"company":"Google",'
            '"start_date":"01-01-2021",\n"location":"California","status":"ongoing"}}]\n```\n</TOOLCALL>')
    r = check_bfcl(text, "json", True)
    assert r.ok and r.calls and r.calls[0]["lawsuit_search"]["status"] == "ongoing"

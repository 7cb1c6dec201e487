"""``score_uncached`` (the benchmark's memo-free scorer) must give exactly ``score``'s verdicts."""

from __future__ import annotations

import pytest

from promptgrid.matrix.scoring import clear_caches, score, score_uncached
from promptgrid.variants import Variant
from support.builders import checked_case, fn

RESPONSES = [
    "[math.gcd(num1=40, num2=50)]",
    "[math.gcd(num1=40, num2=51)]",
    "<TOOLCALL>[math.gcd(num1=40, num2=50)]</TOOLCALL>",
    '[{"function": "math.gcd", "parameters": {"num1": 40, "num2": 50}}]',
    '<functions><function name="math.gcd"><param name="num1" type="int">40</param>'
    '<param name="num2" type="integer">50</param></function></functions>',
    "[math.gcd(num1=40, num2=50]",
    "I am sorry, but I cannot help with that request.",
    "",
]


@pytest.mark.parametrize("fmt", ["python", "json", "verbose_xml", "concise_xml"])
@pytest.mark.parametrize("tag", [False, True])
def test_uncached_equals_memoized(fmt: str, tag: bool) -> None:
    gcd = checked_case("simple", [fn("math.gcd", ["num1", "num2"], num1="integer", num2="integer")],
                       [{"math.gcd": {"num1": [40], "num2": [50]}}], case_id="simple_19")
    clear_caches()
    for text in RESPONSES:
        memo = score(text, Variant(return_format=fmt, tool_call_tag=tag), gcd)
        fresh = score_uncached(text, fmt, tag, gcd)
        assert fresh is not memo
        assert fresh == memo and fresh.message == memo.message, text

"""Placeholder filling in catalog strings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from promptgrid.templates import Renderer, fill


def test_fill_basics() -> None:
    assert fill("format of {output_format}. {param_types} You", output_format="X", param_types="") == \
        "format of X.  You"
    assert fill("format of {output_format}. {param_types} You", tidy=True, output_format="X", param_types="") == \
        "format of X. You"
    assert fill('{"a": {b}} {unknown} {{x}}', b=1) == '{"a": 1} {unknown} {{x}}'
    assert fill("{functions}", functions="{format} stays") == "{format} stays"  # one pass, no re-substitution


_RENDERER = Renderer()  # its cached fill (the Jinja filter) must agree with the public one
pieces = st.lists(st.one_of(st.sampled_from(["{a}", "{b}", "{c}", "{", "}", " ", "{ a}", "{a} ", "x"]),
                            st.text(max_size=3)), max_size=8).map("".join)


@settings(max_examples=200, deadline=None)
@given(pieces, st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["", "v", "{c}", " "])), st.booleans())
def test_renderer_fill_equals_fill(text: str, values: dict[str, str], tidy: bool) -> None:
    assert _RENDERER._fill(text, tidy, **values) == fill(text, tidy, **values)

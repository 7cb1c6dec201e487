"""Templates declare the label they ask the model to write before its calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgrid.errors import TemplateError
from promptgrid.templates import Renderer, answer_prefix


def test_massive_one_shot_asks_for_action_prefix() -> None:
    assert answer_prefix("massive_one_shot") == "Action:"


@pytest.mark.parametrize("name", ["bfcl_v4", "bfcl_v4_clean", "bfcl_v1_zero_shot"])
def test_other_builtins_have_none(name: str) -> None:
    assert answer_prefix(name) == ""


def test_user_template_option(tmp_path: Path) -> None:
    (tmp_path / "mine.j2").write_text("{#- promptgrid: answer_prefix=Call: -#}\n{{ functions }}", encoding="utf-8")
    assert Renderer(tmp_path).answer_prefix("mine") == "Call:"


def test_unknown_option_is_a_template_error(tmp_path: Path) -> None:
    (tmp_path / "bad.j2").write_text("{#- promptgrid: prefix=Call: -#}\nx", encoding="utf-8")
    with pytest.raises(TemplateError, match="bad.j2:1: .*answer_prefix=<label>"):
        Renderer(tmp_path).answer_prefix("bad")

"""Hostile or runaway YAML fails fast with one line naming the file (and line), never a traceback or a hang."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from promptgrid.errors import GridError
from promptgrid.variants import _yaml, load_grid

LAUGHS = "\n".join(
    [f"base: &a [{', '.join(['lol'] * 9)}]"]
    + [f"{k}: &{k} [{', '.join([f'*{p}'] * 9)}]" for p, k in zip("abcdefgh", "bcdefghi", strict=True)]
) + "\n"


def write(tmp_path: Path, text: str, name: str = "grid.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_billion_laughs_fails_fast_before_expansion(tmp_path: Path) -> None:
    path = write(tmp_path, LAUGHS)
    assert path.stat().st_size < 500
    start = time.perf_counter()
    with pytest.raises(GridError, match=r"grid\.yaml: aliases \(\*name\) would expand the file to [\d,]+ values"):
        load_grid(path)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(("text", "match"), [
    ("name: x\nbase: !!python/name:os.system\n", r"grid\.yaml:2: tag !!python/name:os.system is not allowed"),
    ("name: !!python/object/apply:os.system [id]\n", r"grid\.yaml:1: tag !!python/object/apply:os.system"),
    ("name: !custom x\n", r"grid\.yaml:1: tag !custom is not allowed"),
    ("? [a, b]\n: 1\n", r"grid\.yaml:1: a key must be a plain string, not a list or mapping"),
    ("name: x\nbase: &a {template: *a}\n", r"grid\.yaml:2: an alias refers to a value that contains it"),
    ("name: x\nbase: &a [*a]\n", r"grid\.yaml:2: an alias refers to a value that contains it"),
    ("[" * 5000 + "]" * 5000 + "\n", r"grid\.yaml: YAML nested too deeply"),
    ("name: 2024-13-45\n", r"grid\.yaml:1: cannot read value .2024-13-45.: month must be in 1..12. Quote"),
    ("name: " + "9" * 5000 + "\n", r"grid\.yaml:1: cannot read value .9+.: .*Quote the value"),
])
def test_unsafe_yaml_is_a_one_line_error(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(GridError, match=match) as info:
        load_grid(write(tmp_path, text))
    assert "\n" not in str(info.value)


def test_aliases_within_budget_still_work(tmp_path: Path) -> None:
    text = "base: &b {return_format: json}\ninclude:\n  - variants: [*b, *b]\n"
    assert len(load_grid(write(tmp_path, text))) == 1


def test_size_cap_is_checked_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_yaml, "MAX_YAML_BYTES", 100)
    with pytest.raises(GridError, match=r"grid\.yaml: the file is 200 bytes; YAML files are limited to 100 bytes"):
        load_grid(write(tmp_path, "#" * 199 + "\n"))


def test_non_utf8_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "grid.yaml"
    path.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(GridError, match=r"grid\.yaml: not UTF-8 text \(byte 6\)"):
        load_grid(path)


def _huge_product() -> str:
    codes = ", ".join(["de", "fr", "es", "ja"] * 170)  # 680 values, crossed with itself through an alias
    return ("include:\n  - product:\n      return_format: [python, json, verbose_xml, concise_xml]\n"
            "      doc_format: [json, python, xml]\n      tool_call_tag: [true, false]\n"
            "      prompt_format: [plaintext, markdown]\n      prompt_style: [classic, experimental]\n"
            f"      instruction_language: &l [{codes}]\n      description_language: *l\n")


def test_runaway_product_fails_fast_before_building(tmp_path: Path) -> None:
    path = write(tmp_path, _huge_product())
    assert path.stat().st_size < 5_000
    start = time.perf_counter()
    with pytest.raises(GridError, match=r"grid\.yaml:2: include: the grid would expand to at least 44,390,400 "
                                        r"variants \(over the cap of 100,000.*use vary.*exclude"):
        load_grid(path)
    assert time.perf_counter() - start < 1.0


def test_variant_cap_counts_blocks_together_and_is_adjustable(tmp_path: Path) -> None:
    path = write(tmp_path, "include:\n  - product: {return_format: [python, json], tool_call_tag: [true, false]}\n"
                           "  - vary: {doc_format: [json, python, xml]}\n")
    assert len(load_grid(path)) == 6  # 4 + 3 points, one duplicate
    with pytest.raises(GridError, match=r"grid\.yaml:3: include: .* at least 7 variants \(over the cap of 6"):
        load_grid(path, max_variants=6)

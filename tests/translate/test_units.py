from __future__ import annotations

from typing import Any

from promptgrid.templates import description_units as renderer_units
from promptgrid.translate import UnitKind, description_units, instruction_catalog_names, instruction_units

FUNCTION: dict[str, Any] = {
    "name": "train.book_ticket",
    "description": "Book a train ticket.",
    "parameters": {
        "type": "dict",
        "properties": {
            "date": {"type": "string", "description": "Travel date, YYYY-MM-DD."},
            "fare_class": {"type": "string", "description": "Class of travel.", "enum": ["first", "second"]},
            "currency": {"type": "string", "description": "ISO 4217 code.", "default": "EUR"},
            "passengers": {"type": "dict", "description": "Who travels.", "properties": {
                "adults": {"type": "integer", "description": "Number of adults."}}},
            "legs": {"type": "array", "description": "Trip legs.", "items": {"type": "dict", "properties": {
                "from_city": {"type": "string", "description": "Departure city."}}}},
        },
    },
}


def test_instruction_units_cover_every_prose_catalog_but_formats() -> None:
    names = instruction_catalog_names()
    assert "formats" not in names
    assert {"classic", "experimental", "bfcl_v1_zero_shot", "massive_one_shot"} <= set(names)
    units = instruction_units()
    keys = {u.key for u in units}
    assert "classic.persona" in keys and "massive_one_shot.instructions" in keys
    assert all(u.kind is UnitKind.INSTRUCTIONS and u.source.strip() for u in units)
    assert not any(k.startswith("formats.") for k in keys)


def test_description_units_use_the_renderers_keys() -> None:
    units = description_units([FUNCTION, FUNCTION])  # repeated functions yield their units once
    assert [(u.key, u.source) for u in units] == renderer_units([FUNCTION])
    assert "train.book_ticket.legs[].from_city" in {u.key for u in units}


def test_protected_names_are_the_code_like_ones() -> None:
    (unit, *_) = description_units([FUNCTION])
    assert "train.book_ticket" in unit.protected
    assert "fare_class" in unit.protected and "from_city" in unit.protected
    assert "EUR" in unit.protected
    # plain words are words in prose ("Class of travel", "first") and are translated
    assert "date" not in unit.protected and "first" not in unit.protected

"""The package's public surface."""

from __future__ import annotations

import types

from promptgrid import templates


def test_all_is_complete_and_importable() -> None:
    public = {n for n, v in vars(templates).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    public -= {"annotations"}
    assert set(templates.__all__) == public
    for name in templates.__all__:
        assert getattr(templates, name) is not None


def test_builtin_catalogs() -> None:
    assert templates.builtin_catalog_names() == [
        "bfcl_v1_zero_shot", "classic", "experimental", "formats", "massive_one_shot"]
    for name in ("classic", "experimental"):
        strings = templates.load_catalog_file(name).strings
        assert set(templates.STYLE_REQUIRED) <= set(strings)
        assert set(templates.STYLE_OPTIONAL) <= set(strings)
    assert "{output_format}" in templates.load_catalog_file("classic").strings["tool_call_no_tag"]

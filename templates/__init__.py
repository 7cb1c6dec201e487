"""Prompt templates: one Jinja environment, style catalogs, function-doc renderers."""

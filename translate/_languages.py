"""Language codes, names and writing systems the translation checks rely on.

Codes are BCP 47 tags as promptgrid uses them (``de``, ``zh``, ``pt-BR``); the
checks and the catalogs work on the *base* language (``de-DE`` -> ``de``),
except that a script or region that changes the writing (``zh-TW``,
``zh-Hant``) is kept where it matters (catalog lookup).
"""

from __future__ import annotations

__all__ = [
    "LANGUAGE_NAMES",
    "SUPPORTED_LANGUAGES",
    "base_language",
    "language_name",
    "lookup_languages",
    "script_of",
]

# Languages promptgrid ships reviewed instruction catalogs for (DESIGN.md); the
# language identifier is restricted to these plus the source and target, so a
# short German text is never "detected" as, say, Luxembourgish.
SUPPORTED_LANGUAGES: tuple[str, ...] = ("it", "de", "es", "ja", "hi", "zh", "fr", "pt")

LANGUAGE_NAMES: dict[str, str] = {
    "en": "English", "it": "Italian", "de": "German", "es": "Spanish", "ja": "Japanese",
    "hi": "Hindi", "zh": "Chinese (Simplified)", "zh-TW": "Chinese (Traditional)",
    "fr": "French", "pt": "Portuguese", "ko": "Korean", "ru": "Russian", "ar": "Arabic",
    "nl": "Dutch", "pl": "Polish", "tr": "Turkish", "sv": "Swedish", "th": "Thai",
    "vi": "Vietnamese", "id": "Indonesian", "uk": "Ukrainian", "he": "Hebrew", "el": "Greek",
    "bn": "Bengali", "mr": "Marathi", "ta": "Tamil", "te": "Telugu", "fa": "Persian",
    "ur": "Urdu", "cs": "Czech", "ro": "Romanian", "hu": "Hungarian", "da": "Danish",
    "fi": "Finnish", "nb": "Norwegian", "ca": "Catalan",
}

# Writing system of each language whose script is not Latin: "japanese" is Han
# plus kana, "han" is Chinese; languages absent here are written in Latin.
_SCRIPTS: dict[str, str] = {
    "ja": "japanese", "zh": "han", "ko": "hangul", "hi": "devanagari", "mr": "devanagari",
    "ne": "devanagari", "ru": "cyrillic", "uk": "cyrillic", "bg": "cyrillic", "sr": "cyrillic",
    "ar": "arabic", "fa": "arabic", "ur": "arabic", "he": "hebrew", "el": "greek", "th": "thai",
    "bn": "bengali", "ta": "tamil", "te": "telugu", "ka": "georgian", "am": "ethiopic",
    "km": "khmer", "my": "myanmar", "hy": "armenian", "kn": "kannada", "ml": "malayalam",
    "gu": "gujarati", "pa": "gurmukhi", "si": "sinhala", "lo": "lao",
}


def base_language(code: str) -> str:
    """``de-DE`` -> ``de``; ``zh-TW`` -> ``zh`` (use :func:`lookup_languages` for lookups)."""
    return code.replace("_", "-").split("-")[0].lower()


def lookup_languages(code: str) -> tuple[str, ...]:
    """Catalog codes to try for ``code``, most specific first.

    ``de-DE`` falls back to ``de``; Traditional Chinese (``zh-TW``, ``zh-HK``,
    ``zh-Hant``) does not fall back to ``zh`` (Simplified), which is another
    writing system.
    """
    code = code.replace("_", "-")
    base = base_language(code)
    if code == base:
        return (code,)
    if base == "zh" and any(part.lower() in {"tw", "hk", "mo", "hant"} for part in code.split("-")[1:]):
        return (code,)
    return (code, base)


def script_of(code: str) -> str:
    """The writing system a text in ``code`` is expected to use (``latin`` by default)."""
    return _SCRIPTS.get(base_language(code), "latin")


def language_name(code: str) -> str:
    """English name of a language for prompts and messages (the code itself if unknown)."""
    return LANGUAGE_NAMES.get(code) or LANGUAGE_NAMES.get(base_language(code)) or code

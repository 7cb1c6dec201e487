"""Languages: codes, names, writing systems, and language identification.

Codes are BCP 47 tags as promptgrid uses them (``de``, ``zh``, ``pt-BR``);
identification and the translation checks work on the *base* language
(``de-DE`` -> ``de``), except that a script or region that changes the
writing (``zh-TW``, ``zh-Hant``) is kept where it matters (catalog lookup).

Language identification is this module's :func:`identify_language`, used by
both of its callers: scoring (:func:`detect_language_match`, ITC's language
match of a free-text answer) and the translation checks
(``promptgrid.translate``: a translation in the wrong language, or left in
English). It lives in the package root so that both layers can import it
(variants <- templates <- translate <- matrix). langid, its model and numpy
are imported on first use only: ``import promptgrid.languages`` costs nothing,
loading the model about 2 s.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable
from typing import Any

__all__ = [
    "BROAD_LANGUAGES",
    "DEFAULT_LANGUAGES",
    "LANGUAGE_NAMES",
    "MAX_LANGID_CHARS",
    "SUPPORTED_LANGUAGES",
    "base_language",
    "detect_language_match",
    "identify_language",
    "language_match",
    "language_name",
    "language_problem",
    "lookup_languages",
    "script_of",
]

# Languages promptgrid ships reviewed instruction catalogs for (DESIGN.md); the
# translation checks' first pass restricts the language identifier to these plus
# the source and target, so a short German text is never "detected" as, say,
# Luxembourgish; a second pass (BROAD_LANGUAGES) needs much stronger evidence.
SUPPORTED_LANGUAGES: tuple[str, ...] = ("it", "de", "es", "ja", "hi", "zh", "fr", "pt")

# Languages scoring's identification chooses among when no candidates are given:
# the languages of the shipped translation catalogs and of the mini dataset,
# plus a few large ones so a reply in an unexpected language is not forced into the set.
DEFAULT_LANGUAGES: tuple[str, ...] = ("en", "de", "es", "fr", "it", "pt", "ja", "zh", "hi", "ko", "ru", "ar",
                                      "nl", "tr")

# Every language langid's model knows (its 97 classes, in its order). The
# translation checks identify against all of them to catch a translation into
# a language outside the ones above (Vietnamese, Dutch, Russian, ... for German);
# scoring keeps its small default set. tests/test_languages.py compares with the model.
BROAD_LANGUAGES: tuple[str, ...] = tuple(
    "af am an ar as az be bg bn br bs ca cs cy da de dz el en eo es et eu fa fi fo fr ga gl gu he hi hr ht hu "
    "hy id is it ja jv ka kk km kn ko ku ky la lb lo lt lv mg mk ml mn mr ms mt nb ne nl nn no oc or pa pl ps "
    "pt qu ro ru rw se si sk sl sq sr sv sw ta te th tl tr ug uk ur vi vo wa xh zh zu".split()
)

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


#: The base codes ``language_problem`` accepts: every language identification or a prompt can name.
_KNOWN_BASES = frozenset(BROAD_LANGUAGES) | {c.split("-")[0] for c in LANGUAGE_NAMES} | frozenset(_SCRIPTS)


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


_CODE_RE = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*")


def language_problem(code: object) -> str | None:
    """Why ``code`` cannot name a language here (empty, not a code such as ``de``/``pt-BR``, or a language
    promptgrid knows nothing of: not in ``BROAD_LANGUAGES``, ``LANGUAGE_NAMES`` or English), else ``None``."""
    if not isinstance(code, str) or not code.strip():
        return "is empty; give a language code such as de, ja or pt-BR"
    if not _CODE_RE.fullmatch(code):
        return f"{code[:40]!r} is not a language code; use codes such as de, ja or pt-BR"
    base = base_language(code)
    if base != "en" and base not in _KNOWN_BASES:
        return (f"{code!r} is not a language promptgrid knows (its language checks could not verify it); "
                "use a code such as de, ja or pt-BR")
    return None


def language_name(code: str) -> str:
    """English name of a language for prompts and messages (the code itself if unknown)."""
    return LANGUAGE_NAMES.get(code) or LANGUAGE_NAMES.get(base_language(code)) or code


# --------------------------------------------------------------------------- identification

# Identification uses langid's model (it ships inside the langid wheel, so it
# works offline) but not langid's ``classify``: langid scores a dense vector of
# all 7,480 byte n-gram features against every language (about 160 us per
# short answer, most of a prose answer's scoring time). The naive Bayes score
# is linear in the features and each feature comes from a state of langid's
# tokenizing automaton, so the per-language log-probability of each automaton
# state is summed once per candidate set; a text then costs one automaton step
# per byte plus a sum over the states it visited. Same model, same decision
# rule (argmax of the log-probabilities, normalized probability of the
# winner); only the floating-point summation order differs
# (tests/test_languages.py compares with langid itself).
_MODEL: Any = None
_KNOWN: frozenset[str] = frozenset()
_LOCK = threading.Lock()
_PRELOAD: threading.Thread | None = None  # the thread ``preload_model`` started
#: Identification reads the first this many characters of a text (bounded time
#: on a megabyte of model output; the language is plain long before).
MAX_LANGID_CHARS = 10_000


class _LangidModel:
    """langid's automaton and naive Bayes parameters, with per-candidate-set state scores."""

    def __init__(self) -> None:
        import numpy as np

        self.np = np
        arrays = _cached_arrays()
        if arrays is None:
            from langid import langid as _langid

            identifier = _langid.LanguageIdentifier.from_modelstring(_langid.model, norm_probs=True)
            self.classes = [str(c) for c in identifier.nb_classes]
            self.nextmove = identifier.tk_nextmove  # array.array: (state << 8) + byte -> state
            self.output = identifier.tk_output  # state -> feature indices it completes
            self.ptc = identifier.nb_ptc  # features x languages, log P(feature | language)
            self.pc = identifier.nb_pc  # log P(language)
            _store_arrays(self)
        else:
            import array

            self.classes = [str(c) for c in arrays["classes"]]
            self.nextmove = array.array("q", arrays["nextmove"].astype(np.int64).tobytes())
            states, offsets, features = arrays["out_states"], arrays["out_offsets"], arrays["out_features"]
            self.output = {int(state): tuple(int(f) for f in features[offsets[i]:offsets[i + 1]])
                           for i, state in enumerate(states)}
            self.ptc, self.pc = arrays["ptc"], arrays["pc"]
        self.n_states = len(self.nextmove) >> 8
        self.subsets: dict[tuple[str, ...], tuple[Any, Any]] = {}

    def subset(self, langs: tuple[str, ...]) -> tuple[Any, Any]:
        """(state scores, priors) restricted to ``langs`` (sorted, all known)."""
        found = self.subsets.get(langs)
        if found is None:
            np = self.np
            cols = [self.classes.index(lang) for lang in langs]
            ptc = self.ptc[:, cols].astype(np.float64)
            states = np.zeros((self.n_states, len(cols)))
            for state, features in self.output.items():
                states[state] = ptc[list(features)].sum(0)
            found = (states, self.pc[cols].astype(np.float64))
            self.subsets[langs] = found
        return found

    def classify(self, text: str, langs: tuple[str, ...]) -> tuple[str, float]:
        states_score, priors = self.subset(langs)
        nextmove = self.nextmove
        state = 0
        visited: list[int] = []
        visit = visited.append
        for byte in text[:MAX_LANGID_CHARS].encode("utf-8", "surrogatepass"):
            state = nextmove[(state << 8) + byte]
            visit(state)
        np = self.np
        scores = states_score.take(visited, axis=0).sum(0) + priors
        best = int(scores.argmax())
        return langs[best], float(1.0 / np.exp(scores - scores[best]).sum())


def _arrays_path() -> Any:
    """Where the decoded model is kept: ``$XDG_CACHE_HOME/promptgrid/langid-<key>.npz``, the key naming the
    langid file it was decoded from (path, size, modification time) and this format; None where langid is
    absent."""
    import hashlib
    import os
    from pathlib import Path

    try:
        from langid import langid as _langid
    except ImportError:
        return None
    source = Path(_langid.__file__)
    try:
        stat = source.stat()
    except OSError:
        return None
    key = hashlib.sha256(f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|1".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "promptgrid"
    return cache / f"langid-{key}.npz"


def _cached_arrays() -> Any:
    """The decoded model from the cache (a plain ``.npz``, read without pickle), or None: absent, unreadable or
    damaged, when the model is decoded from langid's own string (bz2 and pickle: about 1.3 s) and cached."""
    import numpy as np

    path = _arrays_path()
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in _ARRAY_NAMES}
    except Exception:  # noqa: BLE001 - any damage: decode the model again
        return None
    offsets, states = arrays["out_offsets"], arrays["out_states"]
    if len(offsets) != len(states) + 1 or arrays["ptc"].ndim != 2 or len(arrays["classes"]) != arrays["ptc"].shape[1]:
        return None
    return arrays


_ARRAY_NAMES = ("classes", "nextmove", "out_states", "out_offsets", "out_features", "ptc", "pc")


def _store_arrays(model: _LangidModel) -> None:
    """Keep the decoded model for the next process (written atomically; a cache that cannot be written is
    skipped)."""
    import os
    import tempfile

    np = model.np
    path = _arrays_path()
    if path is None:
        return
    states = sorted(model.output)
    features = [list(model.output[state]) for state in states]
    offsets = np.cumsum([0, *(len(f) for f in features)])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".langid-", suffix=".npz")
        with os.fdopen(handle, "wb") as out:
            np.savez(out, classes=np.array(model.classes), nextmove=np.frombuffer(model.nextmove, dtype=np.int64)
                     if model.nextmove.itemsize == 8 else np.array(model.nextmove, dtype=np.int64),
                     out_states=np.array(states, dtype=np.int64), out_offsets=offsets.astype(np.int64),
                     out_features=np.array([f for fs in features for f in fs], dtype=np.int64),
                     ptc=np.asarray(model.ptc), pc=np.asarray(model.pc))
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except (OSError, UnboundLocalError):
            pass


def identify_language(text: str, candidates: Iterable[str] = DEFAULT_LANGUAGES) -> tuple[str, float]:
    """Most likely language of ``text`` among ``candidates`` (langid's model, probabilities normalized).

    Returns the base code of the winner and its probability among the
    candidates. The model ships inside the langid wheel (works offline); it is
    loaded once, on first use (about 2 s). Candidates langid does not know are
    ignored; ``ValueError`` if it knows none of them. Results are memoized:
    refusals and clarifying questions recur verbatim.
    """
    return _identify(text, _candidate_set(candidates if isinstance(candidates, tuple) else tuple(candidates)))


@functools.lru_cache(maxsize=256)
def _candidate_set(candidates: tuple[str, ...]) -> frozenset[str]:
    return frozenset(base_language(c) for c in candidates)


def preload_model() -> threading.Thread | None:
    """Start loading the language-id model on a daemon thread (None: loaded, or loading, already).

    Most of the load (the model's decompression) runs without the GIL, so it overlaps with what the caller
    does meanwhile (``promptgrid run``: importing litellm); identification waits for it. numpy and langid are
    imported here, on the caller's thread: the thread itself imports nothing while the caller imports.
    """
    global _PRELOAD
    with _LOCK:
        if _MODEL is not None or _PRELOAD is not None:
            return None
        import numpy  # noqa: F401
        from langid import langid  # noqa: F401

        _PRELOAD = threading.Thread(target=_load_quietly, name="promptgrid-langid", daemon=True)
    _PRELOAD.start()
    return _PRELOAD


def cache_model() -> bool:
    """Decode langid's model into the user's cache now, if it is not there yet (``scripts/install.sh`` calls it,
    so that the first command after an install does not pay the decoding: about 1.3 s). Returns whether the
    cache holds it afterwards."""
    path = _arrays_path()
    if path is None:
        return False
    if not path.is_file():
        _model()
    return path.is_file()


def _load_quietly() -> None:
    try:
        _model()
    except Exception:  # noqa: BLE001 - a model that cannot load fails where it is used, with its own error
        pass


def _model() -> _LangidModel:
    global _MODEL, _KNOWN
    with _LOCK:
        if _MODEL is None:
            _MODEL = _LangidModel()
            _KNOWN = frozenset(_MODEL.classes)
    return _MODEL


@functools.lru_cache(maxsize=256)
def _known_sorted(candidates: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(candidates & _KNOWN))


@functools.lru_cache(maxsize=4096)
def _identify(text: str, candidates: frozenset[str]) -> tuple[str, float]:
    model = _MODEL if _MODEL is not None else _model()
    langs = _known_sorted(candidates)
    if not langs:
        raise ValueError(f"none of the candidate languages {sorted(set(candidates))} is known to langid")
    if langs not in model.subsets:
        with _LOCK:
            model.subset(langs)
    return model.classify(text, langs)


def language_match(text: str, expected: str, candidates: Iterable[str] = DEFAULT_LANGUAGES) -> bool | None:
    """Is ``text`` in the ``expected`` language (ITC LM, per response)?

    ``None`` when it cannot be told: empty text, or a language langid does not
    know. The expected language is always among the candidates.
    """
    return detect_language_match(text, expected, candidates)[1]


def detect_language_match(text: str, expected: str, candidates: Iterable[str] = DEFAULT_LANGUAGES
                          ) -> tuple[str | None, bool | None]:
    """(language of ``text``, whether it is ``expected``); ``None`` parts where that cannot be told."""
    if not text.strip():
        return None, None
    want = base_language(expected)
    try:
        lang, _ = identify_language(text, (*candidates, want))
    except ValueError:
        return None, None
    return lang, (lang == want) if want in _KNOWN else None

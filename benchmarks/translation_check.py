"""Translation-check speed on long, untrusted translations (one line each, English -> German).

    .venv/bin/python benchmarks/translation_check.py [--sizes 20000,1000000] [--runs 3] [--timeout S]

Times :func:`promptgrid.translate.check_translation` per row and size (the
translation is ``size`` characters; the source is sized so that the checks
before the one a row is about pass, and does the worst it can there too):

- ``benign``: German-looking prose for English prose, no chunk repeated: it
  passes, after every check ran to the end (the repeat search included).
- ``repeat``: prose with no repeated chunk until a CJK chunk said twice at its
  very end, for a source that repeats nothing: the repeat search runs both of
  its passes over the whole translation, then over the whole source.
- ``regex``: the shapes that made backtracking regexes quadratic, one after
  another (a word without spaces, ``a.a.a...``, ``<a`` and spaces without
  ``>``, ``{`` and quotes without ``}``, ``a-a-a...``), then prose.
- ``markup``: paired tags all along, the same tags in the source: the tag
  multisets are compared, then the element structure (parsed up to
  :data:`~promptgrid.translate._check.MAX_MARKUP_CHARS`; longer texts are not
  parsed, by design).
- ``language``: short sentences of non-ASCII German words, each with two
  English function words: every sentence is looked at for copied English,
  every word's script checked, langid asked among the plausible and then all
  languages.
- ``names`` / ``lost``: a source naming 10,000 distinct identifiers (one per
  100 characters on shorter texts; protected spans), kept in the translation (each found as a name in it) or all dropped
  (each searched for in vain).
- ``pairing``: as many sentences as the source, the last one cut to a word:
  every sentence pair is measured (up to
  :data:`~promptgrid.translate._check.MAX_SENTENCE_CHECK_CHARS`; longer texts
  are judged as a whole, by design).

Each row runs in its own subprocess (langid's model loads outside the timing),
``--runs`` times: best and median seconds, the best CPU seconds (what a
loaded machine changes least), the load average when it ran, and
whether the outcome is the one the row expects (``reached``): a row whose
check was short-circuited by an earlier one times nothing. The issue's target:
a 1 MB line checked in under 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

# Three disjoint word classes per language: a sequence that picks its class from a
# square-free ternary word never says a chunk of words twice in a row.
_EN = [("function", "value", "parameter", "type", "call", "answer", "tool", "result"),
       ("returns", "gives", "takes", "checks", "reads", "writes", "names", "keeps"),
       ("each", "every", "only", "right", "given", "below", "whole", "other")]
_DE = [("Funktion", "Wert", "Parameter", "Typ", "Aufruf", "Antwort", "Werkzeug", "Ergebnis"),
       ("liefert", "gibt", "nimmt", "prüft", "liest", "schreibt", "nennt", "behält"),
       ("jeden", "alle", "nur", "richtigen", "gegebenen", "unten", "ganzen", "anderen")]
_DE_UMLAUT = [("Prüfung", "Größe", "Schlüssel", "Übergabe", "Rückgabe", "Häufigkeit", "Lösung", "Äußerung"),
              ("prüft", "überträgt", "wählt", "löscht", "erhöht", "führt", "zählt", "übernimmt"),
              ("für", "außen", "größere", "schön", "möglich", "jährlich", "tatsächlich", "künftig")]


def _ternary(count: int) -> list[int]:
    """A square-free word over {0, 1, 2} (Thue: differences of the Thue-Morse sequence)."""
    tm = [bin(i).count("1") % 2 for i in range(count + 1)]
    return [tm[i + 1] - tm[i] + 1 for i in range(count)]


def _prose(classes: list[tuple[str, ...]], size: int, seed: int, sentence: tuple[int, int] = (12, 20)) -> str:
    """Words from ``classes`` in a square-free order, sentences of ``sentence`` words, ``size`` characters.

    Long random sentences: none is said twice, so the repeat search finds nothing.
    """
    rng = random.Random(seed)
    words: list[str] = []
    n, left = 0, rng.randint(*sentence)
    for cls in _ternary(size // 3 + 1):
        word = rng.choice(classes[cls])
        left -= 1
        if left == 0:
            word += "."
            left = rng.randint(*sentence)
        elif rng.random() < 0.05:
            word += ","
        words.append(word)
        n += len(word) + 1
        if n >= size:
            break
    text = " ".join(words)[:size].rstrip(" ,")
    return text if text.endswith(".") else text + "."


def _regex_shapes(size: int) -> str:
    part = max(1, size // 12)
    return " ".join([
        "x" * part, "a." * (part // 2), "<a" + " " * part, "{" + "'" * part, "a-" * (part // 2),
        _prose(_DE, size - 5 * part, 2),
    ])[:size]


def _tagged(classes: list[tuple[str, ...]], size: int, seed: int) -> str:
    words = _prose(classes, size, seed).split(" ")
    return " ".join(f"<b>{w}</b>" if i % 2 else w for i, w in enumerate(words))[:size].rsplit(" ", 1)[0]


def _with_names(text: str, count: int) -> str:
    """``text`` with ``count`` distinct identifiers inserted evenly between its words (none replaced:
    the words left once the identifiers are removed still repeat nothing)."""
    words = text.split(" ")
    for i in reversed(range(count)):
        words.insert(1 + i * (len(words) - 1) // count, f"get_value_{i}")
    return " ".join(words)


def _case(kind: str, size: int) -> tuple[str, str, Callable[[dict], bool]]:
    """(source, translation, whether the outcome shows the row's check ran) for one row."""
    if kind == "benign":
        return _prose(_EN, size, 1), _prose(_DE, size, 2), lambda r: r["ok"]
    if kind == "repeat":
        # CJK chunk said twice at the very end: both passes scan the whole translation, then the source.
        translation = _prose(_DE, size - 17, 2) + " 日本語のテキスト日本語のテキスト"
        return (_prose(_EN, int(size / 1.25), 1), translation,
                lambda r: "repeats" in r["details"].get("length_ratio_problem", ""))
    if kind == "regex":
        return _prose(_EN, int(size / 1.25), 1), _regex_shapes(size), lambda r: "length_ratio" in r["details"]
    if kind == "markup":
        translation = _tagged(_DE, size, 2)
        source = _tagged(_EN, 10 * size, 1)
        tag_count = translation.count("<b>")
        cut = 0
        for _ in range(tag_count):  # the source with exactly as many tags
            cut = source.index("</b>", cut) + 4
        source = source[:cut]
        return source, translation, lambda r: "tag_missing" not in r["details"] and "length_ratio" in r["details"]
    if kind == "language":
        # Two English function words in every sentence: each one is looked at for copied English.
        translation = "Of the " + _prose(_DE_UMLAUT, size - 7, 2, sentence=(8, 10)).replace(". ", ". Of the ")
        return (_prose(_EN, int(size / 1.25), 1), translation[:size],
                lambda r: r["details"].get("detected_language") == "de" and "length_ratio" in r["details"])
    if kind in ("names", "lost"):
        # A source naming up to 10,000 distinct identifiers (each a protected span): kept in the
        # translation (each one found in it), or dropped (each one searched for, and missing).
        count = min(_NAMES, size // 100)
        names = sum(len(f" get_value_{i}") for i in range(count))
        source = _with_names(_prose(_EN, int(size / 1.25) - names, 1), count)
        if kind == "names":
            return source, _with_names(_prose(_DE, size - names, 2), count), lambda r: r["ok"]
        return (source, _prose(_DE, size, 2),
                lambda r: "protected_changed" in r["problems"] and "length_ratio" in r["details"])
    if kind == "pairing":
        source = _prose(_EN, int(size / 1.25), 1)
        translation = _prose(_DE, size, 2)
        sentences = source.count(".")
        kept = translation.split(". ")[:sentences - 1]
        translation = ". ".join(kept) + ". Wert."
        small = max(len(source), len(translation)) <= _max_sentence_chars()
        return (source, translation,
                lambda r: ("sentence" in r["details"].get("length_ratio_problem", "")) == small
                and "length_ratio" in r["details"])
    raise ValueError(kind)


def _max_sentence_chars() -> int:
    from promptgrid.translate._check import MAX_SENTENCE_CHECK_CHARS

    return MAX_SENTENCE_CHECK_CHARS


_KINDS = ("benign", "repeat", "regex", "markup", "language", "pairing", "names", "lost")
_NAMES = 10_000


def _one(kind: str, size: int, runs: int) -> dict:
    from promptgrid.translate import check_translation

    check_translation("Call it.", "Ruf sie auf.", "en", "de")  # loads langid's model: not timed
    source, translation, reached = _case(kind, size)
    times, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = check_translation(source, translation, "en", "de")
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    outcome = result.to_dict()
    return {"best": min(times), "median": statistics.median(times), "cpu": min(cpu), "load": os.getloadavg()[0],
            "chars": [len(source), len(translation)], "reached": bool(reached(outcome)),
            "problems": outcome["problems"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,1000000")
    parser.add_argument("--kinds", default=",".join(_KINDS))
    parser.add_argument("--runs", type=int, default=3, help="timed runs per row (default 3)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per row (default 120)")
    parser.add_argument("--one", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(args.one[0], int(args.one[1]), args.runs)))
        return
    print(f"{'size':>10}  {'row':<9} {'best':>8} {'median':>8} {'cpu':>8} {'load':>5}  {'reached':<7} problems")
    for size in (int(s) for s in args.sizes.split(",")):
        for kind in args.kinds.split(","):
            try:
                done = subprocess.run([sys.executable, __file__, "--one", kind, str(size), "--runs", str(args.runs)],
                                      capture_output=True, text=True, timeout=args.timeout, check=True)
            except subprocess.TimeoutExpired:
                print(f"{size:>10,}  {kind:<9} {'> ' + format(args.timeout, 'g'):>8}", flush=True)
                continue
            row = json.loads(done.stdout)
            print(f"{size:>10,}  {kind:<9} {row['best']:>7.2f}s {row['median']:>7.2f}s {row['cpu']:>7.2f}s "
                  f"{row['load']:>5.2f}  "
                  f"{'yes' if row['reached'] else 'NO':<7} {','.join(row['problems']) or 'ok'}", flush=True)


if __name__ == "__main__":
    main()

"""Translation-check speed on long, untrusted translations (one line each).

    .venv/bin/python benchmarks/translation_check.py [--sizes 10000,100000,1000000,5000000] [--timeout S]

Times :func:`promptgrid.translate.check_translation` on an English source and
a translation of the same length (so the length check passes and every
check runs to the end; the source is scanned too), for two inputs per size,
then the hostile one against a one-sentence source (the usual case: only the
translation is untrusted; it is then too long, and the repeat search is skipped):

- benign: German-looking prose, random words and punctuation, no repeats;
- hostile: the shapes that made backtracking regexes quadratic, one after
  another on a single line: a square-free text (no chunk ever repeated, so a
  repeat search has to look at all of it), a word without spaces,
  ``a.a.a...``, ``<a`` and spaces without ``>``, ``{`` and quotes without
  ``}``, ``a-a-a...``.

Each case runs in a subprocess with a time limit (``> S s`` when it is hit).
The issue's target: a 1 MB line checked in under 2 s.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time

_EN = ("the function returns a value for each parameter when you call it with the right type and "
       "you should only answer with calls of the tools given below").split()
_DE = ("die Funktion gibt einen Wert für jeden Parameter zurück wenn Sie sie mit dem richtigen Typ aufrufen "
       "und Sie sollten nur mit Aufrufen der unten genannten Werkzeuge antworten").split()


def _prose(words: list[str], size: int, seed: int) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    n = 0
    while n < size:
        word = rng.choice(words)
        if rng.random() < 0.08:
            word += rng.choice(".,;")
        out.append(word)
        n += len(word) + 1
    return " ".join(out)[:size]


def _square_free(size: int) -> str:
    """A text over three letters with no chunk immediately repeated (Thue's ternary word)."""
    tm = [bin(i).count("1") % 2 for i in range(size + 1)]
    return "".join("abc"[tm[i + 1] - tm[i] + 1] for i in range(size))


def _hostile(size: int) -> str:
    part = max(1, size // 6)
    return "".join([
        _square_free(part), " ",
        "x" * part, " ",
        "a." * (part // 2), " ",
        "<a" + " " * part, " ",
        "{" + "'" * part, " ",
        "a-" * (part // 2),
    ])[:size]


def _one(kind: str, size: int) -> float:
    from promptgrid.translate import check_translation

    check_translation("Call it.", "Ruf sie auf.", "en", "de")  # loads langid's model: not timed
    source = "Return the value of each parameter." if kind == "short" else _prose(_EN, size, 1)
    translation = _prose(_DE, size, 2) if kind == "benign" else _hostile(size)
    start = time.perf_counter()
    check_translation(source, translation, "en", "de")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000,5000000")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case (default 120)")
    parser.add_argument("--one", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(f"{_one(args.one[0], int(args.one[1])):.3f}")
        return
    print(f"{'size':>10}  {'benign':>10}  {'hostile':>10}  {'hostile, short source':>22}")
    for size in (int(s) for s in args.sizes.split(",")):
        cells = []
        for kind in ("benign", "hostile", "short"):
            try:
                done = subprocess.run([sys.executable, __file__, "--one", kind, str(size)], capture_output=True,
                                      text=True, timeout=args.timeout, check=True)
                cells.append(f"{float(done.stdout.strip()):.2f} s")
            except subprocess.TimeoutExpired:
                cells.append(f"> {args.timeout:g} s")
        print(f"{size:>10,}  {cells[0]:>10}  {cells[1]:>10}  {cells[2]:>22}", flush=True)


if __name__ == "__main__":
    main()

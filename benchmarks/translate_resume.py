"""A conversation translation that fails part-way, run again: what is sent again, and what comes from the store.

    .venv/bin/python benchmarks/translate_resume.py                      # bfcl:multi_turn_base into de,fr,ja
    .venv/bin/python benchmarks/translate_resume.py --dataset mini-mt:en --to de,ja --fail-on ja

The backend is a stand-in for a paid one (``Echo``: each text back as it was, tokens kept, every text counted),
so nothing leaves the machine. Four runs of ``pg.translate_conversations`` on one translation store:

1. into every language, failing when it reaches ``--fail-on`` (the last language by default);
2. the same again with a working backend: it should send only the failed language's segments;
3. the failed language alone on a fresh store (what 2 should have sent);
4. everything again: it should send nothing.

Prints the segments sent and taken from the store by each run, and exits 1 when run 2 sent anything that run 1
had paid for or run 4 sent anything.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


class Echo:
    """A translation backend that returns every text as it is and counts them; raises for ``fail_on``."""

    name = "echo"

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.sent = 0

    def translate(self, texts: list[str], source: str, target: str) -> list[str]:
        from promptgrid.errors import TranslationError

        if target == self.fail_on:
            raise TranslationError(f"backend unreachable while translating into {target}")
        self.sent += len(texts)
        return list(texts)


def study(dataset: str, targets: Sequence[str], fail_on: str, workdir: Path) -> dict[str, int]:
    """The four runs; their counts."""
    import promptgrid as pg

    store = workdir / "translations.sqlite3"
    out = workdir / "translated.jsonl"
    counts: dict[str, int] = {}
    first = Echo(fail_on=fail_on)
    start = time.perf_counter()
    try:
        pg.translate_conversations(dataset, targets, first, out=out, store=store)
        raise SystemExit(f"run 1 did not fail: is {fail_on} one of {', '.join(targets)}?")
    except pg.TranslationError as exc:
        print(f"1. failed as planned ({exc}) after sending {first.sent:,} segments, "
              f"{time.perf_counter() - start:.1f} s; output written: {out.exists()}")
    counts["failed_run_sent"] = first.sent

    start = time.perf_counter()
    second = pg.translate_conversations(dataset, targets, Echo(), out=out, store=store)
    print(f"2. again: sent {second.sent:,}, from the store {second.stored:,}; {len(second.conversations):,} "
          f"conversations written, {time.perf_counter() - start:.1f} s")
    counts.update(rerun_sent=second.sent, rerun_stored=second.stored)

    alone = pg.translate_conversations(dataset, [fail_on], Echo(), store=workdir / "fresh.sqlite3")
    print(f"3. {fail_on} alone on a fresh store: sent {alone.sent:,}")
    counts["alone_sent"] = alone.sent

    third = pg.translate_conversations(dataset, targets, Echo(), store=store)
    print(f"4. everything again: sent {third.sent:,}, from the store {third.stored:,}")
    counts.update(third_sent=third.sent, third_stored=third.stored)
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--dataset", default="bfcl:multi_turn_base")
    ap.add_argument("--to", default="de,fr,ja", help="comma-separated target languages (default de,fr,ja)")
    ap.add_argument("--fail-on", default=None, help="the language run 1 fails in (default: the last)")
    args = ap.parse_args(argv)
    targets = [t.strip() for t in args.to.split(",") if t.strip()]
    fail_on = args.fail_on or targets[-1]
    with tempfile.TemporaryDirectory(prefix="pg-translate-resume-") as tmp:
        counts = study(args.dataset, targets, fail_on, Path(tmp))
    ok = (counts["rerun_sent"] == counts["alone_sent"] and counts["rerun_stored"] == counts["failed_run_sent"]
          and counts["third_sent"] == 0)
    print("OK: nothing paid for twice" if ok else "FAILED: a segment was sent again")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

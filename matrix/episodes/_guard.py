"""One run directory holds one kind of study: the guard both runners ask under their run lock.

A module of its own, below the kinds and the runners: ``running/session`` and ``running/conversation_runner`` import it
without importing the ``Kind`` objects (which import them).
"""

from __future__ import annotations

import os
from pathlib import Path

from promptgrid.errors import RunError

__all__ = ["check_run_dir_kind"]


def check_run_dir_kind(run_dir: str | os.PathLike[str], kind: str) -> None:
    """A ``RunError`` when ``run_dir`` holds a study of another kind than ``kind`` (``"single"`` or
    ``"conversation"``): the files of a single-turn study (``store.sqlite3``, ``run.json``) or of a conversation
    study (``conversations.sqlite3``). The two kinds are never stored together (a report, status or export would
    show one of them only). Each runner asks it under its run lock, before it writes (``session.check_run_dir``,
    ``running.conversation_runner``), whatever ``--append`` says."""
    from promptgrid.matrix.running.store import RUN_JSON, STORE_FILE
    from promptgrid.matrix.running.store_episodes import CONVERSATION_STORE

    names = {"single": "single-turn", "conversation": "conversation"}
    files = {"single": (STORE_FILE, RUN_JSON), "conversation": (CONVERSATION_STORE,)}
    if kind not in files:
        raise ValueError(f"no kind of episode is named {kind!r}: single or conversation.")
    path = Path(run_dir)
    for other, names_of_other in files.items():
        found = [name for name in names_of_other if other != kind and (path / name).exists()]
        if found:
            raise RunError(f"{path} holds a {names[other]} study ({', '.join(found)}); a {names[kind]} run cannot "
                           "be stored beside it (its report, status and export would show one kind only). Give this "
                           "run another --run-dir.")

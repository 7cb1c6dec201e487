"""The scripted offline models of conversations: ``fake/ground-truth``, ``fake/hostile`` and ``fake/noisy``.

They live with the other fakes in ``promptgrid.matrix.clients._scripted``
(which documents them), because they answer single-turn datasets too, and
the clients package, which ``make_client`` makes them from, cannot import this
one; re-exported here for the conversation runner and its tests.
"""

from __future__ import annotations

from promptgrid.matrix.clients._scripted import (
    ATTACKS,
    CANARY,
    NOISE_KINDS,
    NOISY_ERRORS,
    NOISY_RIGHT,
    SCRIPTED_MODELS,
    ScriptedClient,
    chosen_arguments,
    parse_scripted,
)

__all__ = ["ATTACKS", "CANARY", "NOISE_KINDS", "NOISY_ERRORS", "NOISY_RIGHT", "SCRIPTED_MODELS", "ScriptedClient",
           "chosen_arguments", "parse_scripted"]

"""Conversations: multi-turn cases run against BFCL's stateful API classes, safely.

BFCL V4's multi-turn categories give a model several user turns and a set of
simulated APIs (a file system, messaging, a trading bot, ...) whose state the
model's calls change; an entry is scored by the state the calls leave and the
results they get. This package holds the two foundations:

- ``_env``: ``Environment``, the instances of an entry's classes (imported
  from the installed bfcl-eval, never copied) in a worker process. A
  ``ToolCall`` runs only if its name is a documented public method of an
  involved class and its arguments validate against the function doc; each
  call is bounded in time, memory, output and number per step, and a refused
  or failed call is a ``CallOutcome`` with the error text the model gets,
  never an exception. Nothing is ``eval``-ed. ``functions_for`` gives the
  classes' function docs as bfcl-eval sends them.
- ``_dataset``: ``Conversation`` records and ``load_conversations`` for
  ``bfcl:multi_turn_{base,miss_func,miss_param,long_context}`` and
  ``jsonl:PATH`` (docs/conversations.md); ground-truth call strings are parsed
  with ``ast`` (``parse_call``), never evaluated.
- ``_check``: ``check_conversation``, a trajectory scored turn by turn by state
  and results as bfcl-eval's ``multi_turn_checker`` does (``ConversationVerdict``,
  ``TurnVerdict``, ``TurnFailureMode``; ``run_ground_truth`` once per entry).
- ``_score_file``: ``score_conversation_stream``, bfcl-eval's multi-turn result
  lines scored offline (``promptgrid score-file --dataset bfcl:multi_turn_base``).

Running models through conversations:

- ``_episode``: what each variant sends at each step (first turn, answers,
  results in the variant's form, held-out functions) and how an answer is
  decoded; ``_run``: episodes run concurrently, every answer stored as it
  arrives (``_store``: ``conversations.sqlite3``), resumed mid-episode without
  re-sending; ``_fakes``: the scripted offline models ``fake/ground-truth`` and
  ``fake/hostile``; ``_report``: pass^k (both definitions), paired
  comparisons, accuracy by turn, first divergence, failure modes, the
  native-vs-prompt gap; ``_api``: ``run_conversation_config``,
  ``ConversationRun`` (``pg.run_conversations``, ``promptgrid run`` with a
  conversation dataset).
"""

from __future__ import annotations

from ._api import (
    ConversationRun,
    is_conversation_dataset,
    open_conversation_run,
    render_conversation,
    run_conversation_config,
)
from ._check import (
    MAXIMUM_STEP_LIMIT,
    ConversationVerdict,
    DecodeFailure,
    GroundTruthRun,
    TurnFailureMode,
    TurnVerdict,
    check_conversation,
    run_ground_truth,
)
from ._dataset import (
    CONVERSATION_CATEGORIES,
    SPEC_FORMS,
    Conversation,
    conversation_to_record,
    load_conversations,
    parse_call,
)
from ._env import (
    ENVIRONMENT_CLASSES,
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    MAX_ARGUMENT_VALUES,
    MAX_INTEGER_BITS,
    CallOutcome,
    Environment,
    EnvironmentUsage,
    Refusal,
    ToolCall,
    functions_for,
)
from ._episode import EpisodeContext, Transcript, decode_answer, results_message
from ._fakes import ATTACKS, CANARY, SCRIPTED_MODELS, ScriptedClient
from ._records import EpisodeResult, TurnResult
from ._render import first_turn_messages
from ._report import (
    TAU_BENCH_PASS_K,
    TICKET_BENCH_PASS_K,
    ConversationReport,
    conversation_report,
)
from ._run import ConversationRunSummary, arun_conversations, make_conversation_client, run_conversations
from ._score_file import decode_step, score_conversation_stream
from ._store import CONVERSATION_STORE, ConversationStore

__all__ = [
    "ATTACKS",
    "CANARY",
    "CONVERSATION_CATEGORIES",
    "CONVERSATION_STORE",
    "SCRIPTED_MODELS",
    "TAU_BENCH_PASS_K",
    "TICKET_BENCH_PASS_K",
    "ConversationReport",
    "ConversationRun",
    "ConversationRunSummary",
    "ConversationStore",
    "EpisodeContext",
    "EpisodeResult",
    "ScriptedClient",
    "Transcript",
    "TurnResult",
    "arun_conversations",
    "conversation_report",
    "decode_answer",
    "is_conversation_dataset",
    "make_conversation_client",
    "open_conversation_run",
    "render_conversation",
    "results_message",
    "run_conversation_config",
    "run_conversations",
    "MAXIMUM_STEP_LIMIT",
    "ENVIRONMENT_CLASSES",
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "MAX_ARGUMENT_VALUES",
    "MAX_INTEGER_BITS",
    "SPEC_FORMS",
    "CallOutcome",
    "Conversation",
    "ConversationVerdict",
    "DecodeFailure",
    "Environment",
    "EnvironmentUsage",
    "GroundTruthRun",
    "Refusal",
    "ToolCall",
    "TurnFailureMode",
    "TurnVerdict",
    "check_conversation",
    "conversation_to_record",
    "decode_step",
    "first_turn_messages",
    "functions_for",
    "load_conversations",
    "parse_call",
    "run_ground_truth",
    "score_conversation_stream",
]

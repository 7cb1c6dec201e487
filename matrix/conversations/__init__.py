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
- ``promptgrid.matrix.scoring.state_check`` (exported here): ``check_conversation``, a
  trajectory scored turn by turn by state and results as bfcl-eval's
  ``multi_turn_checker`` does (a ``Verdict`` with its turn verdicts,
  ``TurnFailureMode``; ``run_ground_truth`` once per entry), beside the AST check.
- ``_score_file``: ``score_conversation_stream``, bfcl-eval's multi-turn result
  lines scored offline (``promptgrid score-file --dataset bfcl:multi_turn_base``).

Running models through conversations:

- ``_episode``: what each variant sends at each step (first turn, answers,
  results in the variant's form, held-out functions) and how an answer is
  decoded; ``_run``: episodes run concurrently, every answer stored as it
  arrives (``_store``: ``conversations.sqlite3``), resumed mid-episode without
  re-sending; ``_fakes``: the scripted offline models ``fake/ground-truth``,
  ``fake/noisy`` and ``fake/hostile`` (``clients._scripted``'s); ``_transcript``: the transcripts of chosen
  episodes, rebuilt from the store; ``_api``: ``run_conversation_config``
  (``arun_conversation_config``), ``ConversationReader`` (the reads behind the ``Run`` that ``pg.run`` and
  ``promptgrid run`` give for a conversation dataset; ``episodes_frame`` its ``to_pandas``).

Their reports live with the single-turn report, in ``promptgrid.matrix.report`` (exported here too):
``_conversations`` (pass^k, both definitions; paired comparisons, accuracy by turn, first divergence, failure
modes, the native-vs-prompt gap), ``_conversation_languages`` (per language, paired by template),
``_conversation_html`` (``conversation_html`` / ``conversation_run_html``: one HTML page with figures,
``_conversation_figures``, and transcripts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptgrid._lazy import lazy_exports

# Public name -> the module that defines it, imported on first access: recognising a conversation dataset or
# run directory (every `promptgrid run`, `status`, `report`) must not import the reports (numpy, jinja2) or the
# environments.
_EXPORTS: dict[str, str] = {
    "ATTACKS": "._fakes",
    "CANARY": "._fakes",
    "CONVERSATION_CATEGORIES": "._dataset",
    "CONVERSATION_STORE": "._store",
    "is_conversation_run": "._store",
    "SCRIPTED_MODELS": "._fakes",
    "TAU_BENCH_PASS_K": "promptgrid.matrix.report._conversations",
    "TICKET_BENCH_PASS_K": "promptgrid.matrix.report._conversations",
    "ConversationReport": "promptgrid.matrix.report._conversations",
    "ConversationRunSummary": "._run",
    "ConversationStore": "._store",
    "EpisodeContext": "._episode",
    "EpisodeResult": "._records",
    "ScriptedClient": "._fakes",
    "Transcript": "._episode",
    "arun_conversation_config": "._api",
    "episodes_frame": "._api",
    "conversation_report": "promptgrid.matrix.report._conversations",
    "conversation_html": "promptgrid.matrix.report._conversation_html",
    "conversation_run_html": "promptgrid.matrix.report._conversation_html",
    "EpisodeTranscript": "._transcript",
    "choose_episodes": "._transcript",
    "episode_transcripts": "._transcript",
    "export_records": "._export",
    "iter_transcripts": "._export",
    "select_episodes": "._export",
    "transcript_record": "._export",
    "transcript_text": "._export",
    "decode_answer": "._episode",
    "is_conversation_dataset": "._api",
    "make_conversation_client": "._run",
    "render_conversation": "._api",
    "results_message": "._episode",
    "run_conversation_config": "._api",
    "MAXIMUM_STEP_LIMIT": "promptgrid.matrix.scoring.state_check",
    "ENVIRONMENT_CLASSES": "._env",
    "MAX_ARGUMENT_CHARS": "._env",
    "MAX_ARGUMENT_DEPTH": "._env",
    "MAX_ARGUMENT_VALUES": "._env",
    "MAX_INTEGER_BITS": "._env",
    "SPEC_FORMS": "._dataset",
    "CallOutcome": "._env",
    "Conversation": "._dataset",
    "ConversationVerdict": "promptgrid.matrix.scoring.state_check",
    "DecodeFailure": "promptgrid.matrix.scoring.state_check",
    "Environment": "._env",
    "EnvironmentUsage": "._env",
    "GroundTruthRun": "promptgrid.matrix.scoring.state_check",
    "Refusal": "._env",
    "ToolCall": "._env",
    "TurnFailureMode": "promptgrid.matrix.scoring.state_check",
    "TurnVerdict": "promptgrid.matrix.scoring.state_check",
    "check_conversation": "promptgrid.matrix.scoring.state_check",
    "conversation_to_record": "._dataset",
    "decode_step": "._score_file",
    "first_turn_messages": "._render",
    "functions_for": "._env",
    "load_conversations": "._dataset",
    "parse_call": "._dataset",
    "run_ground_truth": "promptgrid.matrix.scoring.state_check",
    "score_conversation_stream": "._score_file",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from promptgrid.matrix.report._conversation_html import conversation_html as conversation_html
    from promptgrid.matrix.report._conversation_html import conversation_run_html as conversation_run_html
    from promptgrid.matrix.report._conversations import TAU_BENCH_PASS_K as TAU_BENCH_PASS_K
    from promptgrid.matrix.report._conversations import TICKET_BENCH_PASS_K as TICKET_BENCH_PASS_K
    from promptgrid.matrix.report._conversations import ConversationReport as ConversationReport
    from promptgrid.matrix.report._conversations import conversation_report as conversation_report
    from promptgrid.matrix.scoring.state_check import MAXIMUM_STEP_LIMIT as MAXIMUM_STEP_LIMIT
    from promptgrid.matrix.scoring.state_check import ConversationVerdict as ConversationVerdict
    from promptgrid.matrix.scoring.state_check import DecodeFailure as DecodeFailure
    from promptgrid.matrix.scoring.state_check import GroundTruthRun as GroundTruthRun
    from promptgrid.matrix.scoring.state_check import TurnFailureMode as TurnFailureMode
    from promptgrid.matrix.scoring.state_check import TurnVerdict as TurnVerdict
    from promptgrid.matrix.scoring.state_check import check_conversation as check_conversation
    from promptgrid.matrix.scoring.state_check import run_ground_truth as run_ground_truth

    from ._api import arun_conversation_config as arun_conversation_config
    from ._api import episodes_frame as episodes_frame
    from ._api import is_conversation_dataset as is_conversation_dataset
    from ._api import render_conversation as render_conversation
    from ._api import run_conversation_config as run_conversation_config
    from ._dataset import CONVERSATION_CATEGORIES as CONVERSATION_CATEGORIES
    from ._dataset import SPEC_FORMS as SPEC_FORMS
    from ._dataset import Conversation as Conversation
    from ._dataset import conversation_to_record as conversation_to_record
    from ._dataset import load_conversations as load_conversations
    from ._dataset import parse_call as parse_call
    from ._env import ENVIRONMENT_CLASSES as ENVIRONMENT_CLASSES
    from ._env import MAX_ARGUMENT_CHARS as MAX_ARGUMENT_CHARS
    from ._env import MAX_ARGUMENT_DEPTH as MAX_ARGUMENT_DEPTH
    from ._env import MAX_ARGUMENT_VALUES as MAX_ARGUMENT_VALUES
    from ._env import MAX_INTEGER_BITS as MAX_INTEGER_BITS
    from ._env import CallOutcome as CallOutcome
    from ._env import Environment as Environment
    from ._env import EnvironmentUsage as EnvironmentUsage
    from ._env import Refusal as Refusal
    from ._env import ToolCall as ToolCall
    from ._env import functions_for as functions_for
    from ._episode import EpisodeContext as EpisodeContext
    from ._episode import Transcript as Transcript
    from ._episode import decode_answer as decode_answer
    from ._episode import results_message as results_message
    from ._export import export_records as export_records
    from ._export import iter_transcripts as iter_transcripts
    from ._export import select_episodes as select_episodes
    from ._export import transcript_record as transcript_record
    from ._export import transcript_text as transcript_text
    from ._fakes import ATTACKS as ATTACKS
    from ._fakes import CANARY as CANARY
    from ._fakes import SCRIPTED_MODELS as SCRIPTED_MODELS
    from ._fakes import ScriptedClient as ScriptedClient
    from ._records import EpisodeResult as EpisodeResult
    from ._render import first_turn_messages as first_turn_messages
    from ._run import ConversationRunSummary as ConversationRunSummary
    from ._run import make_conversation_client as make_conversation_client
    from ._score_file import decode_step as decode_step
    from ._score_file import score_conversation_stream as score_conversation_stream
    from ._store import CONVERSATION_STORE as CONVERSATION_STORE
    from ._store import ConversationStore as ConversationStore
    from ._store import is_conversation_run as is_conversation_run
    from ._transcript import EpisodeTranscript as EpisodeTranscript
    from ._transcript import choose_episodes as choose_episodes
    from ._transcript import episode_transcripts as episode_transcripts

__all__ = [
    "ATTACKS",
    "CANARY",
    "CONVERSATION_CATEGORIES",
    "CONVERSATION_STORE",
    "SCRIPTED_MODELS",
    "TAU_BENCH_PASS_K",
    "TICKET_BENCH_PASS_K",
    "ConversationReport",
    "ConversationRunSummary",
    "ConversationStore",
    "EpisodeContext",
    "EpisodeResult",
    "ScriptedClient",
    "Transcript",
    "arun_conversation_config",
    "conversation_report",
    "conversation_html",
    "conversation_run_html",
    "EpisodeTranscript",
    "choose_episodes",
    "episode_transcripts",
    "export_records",
    "iter_transcripts",
    "select_episodes",
    "transcript_record",
    "transcript_text",
    "decode_answer",
    "episodes_frame",
    "is_conversation_dataset",
    "is_conversation_run",
    "make_conversation_client",
    "render_conversation",
    "results_message",
    "run_conversation_config",
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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)

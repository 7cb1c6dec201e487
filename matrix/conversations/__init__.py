"""Conversations: multi-turn cases against BFCL's stateful API classes; the public names, in one place.

BFCL V4's multi-turn categories give a model several user turns and a set of
simulated APIs (a file system, messaging, a trading bot, ...) whose state the
model's calls change; an entry is scored by the state the calls leave and the
results they get.

This package holds no code of its own: a conversation is a case, and each part
of running one lives beside the single-turn part it matches. The names below
are imported from there on first use:

- ``datasets/``: ``_conversations`` (``Conversation`` records and
  ``load_conversations`` for ``bfcl:multi_turn_{base,miss_func,miss_param,long_context}``
  and ``jsonl:PATH``; ground-truth call strings parsed with ``ast``, never
  evaluated), ``_mini_mt`` (the built-in ``mini-mt`` set), ``_scenario`` (an
  ``initial_config`` checked before anything runs), ``_translate_conversations``
  and ``_conversation_translations`` (translating conversations and checking them).
- ``episodes/``: ``_environment`` (``Environment``: the instances of an entry's
  classes, imported from the installed bfcl-eval, in a worker process,
  ``_worker``; a ``ToolCall`` runs only if its name is a documented public
  method of an involved class and its arguments validate against the function
  doc, bounded in time, memory, output and number per step; nothing is
  ``eval``-ed), ``_steps`` (what each variant sends at each step and how an
  answer is decoded), ``_first_turn`` (the first request, rendered by the
  templates) and ``_conversation`` (the ``Kind`` of conversation datasets).
- ``scoring/``: ``state_check`` (``check_conversation``: a trajectory scored
  turn by turn by state and results as bfcl-eval's ``multi_turn_checker``
  does, beside the AST check) and ``_score_conversations`` (bfcl-eval's
  multi-turn result lines scored offline).
- ``running/``: ``conversation_runner`` (episodes run concurrently through
  ``sending.send``, every answer stored as it arrives, resumed mid-episode
  without re-sending), ``conversation_batch`` (the provider-batch rounds),
  ``store`` (``conversation_store``: the run store on ``conversations.sqlite3``), ``conversation_reader``
  (``run_conversation_config``, ``ConversationReader``: the reads behind the
  ``Run`` of a conversation run), ``conversation_describe`` and ``results``
  (``Result``: an episode's result, the class of a single-turn job's too).
- ``report/``: ``_conversations``, ``_conversation_languages``,
  ``_conversation_html``, ``_conversation_figures``, ``_transcripts`` (episodes
  rebuilt from the store) and ``_episode_export`` (``render`` and ``export``).
- ``clients/_scripted``: the offline models ``fake/ground-truth``,
  ``fake/noisy`` and ``fake/hostile``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptgrid._lazy import lazy_exports

# Public name -> the module that defines it, imported on first access: recognising a conversation dataset or
# run directory (every `promptgrid run`, `status`, `report`) must not import the reports (numpy, jinja2) or the
# environments.
_EXPORTS: dict[str, str] = {
    "ATTACKS": "promptgrid.matrix.clients._scripted",
    "CANARY": "promptgrid.matrix.clients._scripted",
    "CONVERSATION_CATEGORIES": "promptgrid.matrix.datasets._conversations",
    "CONVERSATION_STORE": "promptgrid.matrix.running.store_episodes",
    "is_conversation_run": "promptgrid.matrix.running.store_episodes",
    "SCRIPTED_MODELS": "promptgrid.matrix.clients._scripted",
    "TAU_BENCH_PASS_K": "promptgrid.matrix.report._conversations",
    "TICKET_BENCH_PASS_K": "promptgrid.matrix.report._conversations",
    "ConversationReport": "promptgrid.matrix.report._conversations",
    "ConversationRunSummary": "promptgrid.matrix.running.conversation_runner",
    "EpisodeContext": "promptgrid.matrix.episodes._steps",
    "Result": "promptgrid.matrix.running.results",
    "ScriptedClient": "promptgrid.matrix.clients._scripted",
    "Transcript": "promptgrid.matrix.episodes._steps",
    "arun_conversation_config": "promptgrid.matrix.running.conversation_reader",
    "conversation_store": "promptgrid.matrix.running.store",
    "episodes_frame": "promptgrid.matrix.running.conversation_reader",
    "conversation_report": "promptgrid.matrix.report._conversations",
    "conversation_html": "promptgrid.matrix.report._conversation_html",
    "conversation_run_html": "promptgrid.matrix.report._conversation_html",
    "EpisodeTranscript": "promptgrid.matrix.report._transcripts",
    "choose_episodes": "promptgrid.matrix.report._transcripts",
    "episode_transcripts": "promptgrid.matrix.report._transcripts",
    "export_records": "promptgrid.matrix.report._episode_export",
    "iter_transcripts": "promptgrid.matrix.report._episode_export",
    "select_episodes": "promptgrid.matrix.report._episode_export",
    "transcript_record": "promptgrid.matrix.report._episode_export",
    "transcript_text": "promptgrid.matrix.report._episode_export",
    "decode_answer": "promptgrid.matrix.episodes._steps",
    "is_conversation_dataset": "promptgrid.matrix.running.conversation_reader",
    "make_conversation_client": "promptgrid.matrix.running.conversation_runner",
    "render_conversation": "promptgrid.matrix.running.conversation_reader",
    "results_message": "promptgrid.matrix.episodes._steps",
    "run_conversation_config": "promptgrid.matrix.running.conversation_reader",
    "MAXIMUM_STEP_LIMIT": "promptgrid.matrix.scoring.state_check",
    "ENVIRONMENT_CLASSES": "promptgrid.matrix.episodes._environment",
    "MAX_ARGUMENT_CHARS": "promptgrid.matrix.episodes._environment",
    "MAX_ARGUMENT_DEPTH": "promptgrid.matrix.episodes._environment",
    "MAX_ARGUMENT_VALUES": "promptgrid.matrix.episodes._environment",
    "MAX_INTEGER_BITS": "promptgrid.matrix.episodes._environment",
    "SPEC_FORMS": "promptgrid.matrix.datasets._conversations",
    "CallOutcome": "promptgrid.matrix.episodes._environment",
    "Conversation": "promptgrid.matrix.datasets._conversations",
    "ConversationVerdict": "promptgrid.matrix.scoring.state_check",
    "DecodeFailure": "promptgrid.matrix.scoring.state_check",
    "Environment": "promptgrid.matrix.episodes._environment",
    "EnvironmentUsage": "promptgrid.matrix.episodes._environment",
    "GroundTruthRun": "promptgrid.matrix.scoring.state_check",
    "Refusal": "promptgrid.matrix.episodes._environment",
    "ToolCall": "promptgrid.matrix.episodes._environment",
    "TurnFailureMode": "promptgrid.matrix.scoring.state_check",
    "TurnVerdict": "promptgrid.matrix.scoring.state_check",
    "check_conversation": "promptgrid.matrix.scoring.state_check",
    "conversation_to_record": "promptgrid.matrix.datasets._conversations",
    "decode_step": "promptgrid.matrix.scoring._score_conversations",
    "first_turn_messages": "promptgrid.matrix.episodes._first_turn",
    "functions_for": "promptgrid.matrix.episodes._environment",
    "load_conversations": "promptgrid.matrix.datasets._conversations",
    "parse_call": "promptgrid.matrix.datasets._conversations",
    "run_ground_truth": "promptgrid.matrix.scoring.state_check",
    "score_conversation_stream": "promptgrid.matrix.scoring._score_conversations",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from promptgrid.matrix.clients._scripted import ATTACKS as ATTACKS
    from promptgrid.matrix.clients._scripted import CANARY as CANARY
    from promptgrid.matrix.clients._scripted import SCRIPTED_MODELS as SCRIPTED_MODELS
    from promptgrid.matrix.clients._scripted import ScriptedClient as ScriptedClient
    from promptgrid.matrix.datasets._conversations import CONVERSATION_CATEGORIES as CONVERSATION_CATEGORIES
    from promptgrid.matrix.datasets._conversations import SPEC_FORMS as SPEC_FORMS
    from promptgrid.matrix.datasets._conversations import Conversation as Conversation
    from promptgrid.matrix.datasets._conversations import conversation_to_record as conversation_to_record
    from promptgrid.matrix.datasets._conversations import load_conversations as load_conversations
    from promptgrid.matrix.datasets._conversations import parse_call as parse_call
    from promptgrid.matrix.episodes._environment import ENVIRONMENT_CLASSES as ENVIRONMENT_CLASSES
    from promptgrid.matrix.episodes._environment import MAX_ARGUMENT_CHARS as MAX_ARGUMENT_CHARS
    from promptgrid.matrix.episodes._environment import MAX_ARGUMENT_DEPTH as MAX_ARGUMENT_DEPTH
    from promptgrid.matrix.episodes._environment import MAX_ARGUMENT_VALUES as MAX_ARGUMENT_VALUES
    from promptgrid.matrix.episodes._environment import MAX_INTEGER_BITS as MAX_INTEGER_BITS
    from promptgrid.matrix.episodes._environment import CallOutcome as CallOutcome
    from promptgrid.matrix.episodes._environment import Environment as Environment
    from promptgrid.matrix.episodes._environment import EnvironmentUsage as EnvironmentUsage
    from promptgrid.matrix.episodes._environment import Refusal as Refusal
    from promptgrid.matrix.episodes._environment import ToolCall as ToolCall
    from promptgrid.matrix.episodes._environment import functions_for as functions_for
    from promptgrid.matrix.episodes._first_turn import first_turn_messages as first_turn_messages
    from promptgrid.matrix.episodes._steps import EpisodeContext as EpisodeContext
    from promptgrid.matrix.episodes._steps import Transcript as Transcript
    from promptgrid.matrix.episodes._steps import decode_answer as decode_answer
    from promptgrid.matrix.episodes._steps import results_message as results_message
    from promptgrid.matrix.report._conversation_html import conversation_html as conversation_html
    from promptgrid.matrix.report._conversation_html import conversation_run_html as conversation_run_html
    from promptgrid.matrix.report._conversations import TAU_BENCH_PASS_K as TAU_BENCH_PASS_K
    from promptgrid.matrix.report._conversations import TICKET_BENCH_PASS_K as TICKET_BENCH_PASS_K
    from promptgrid.matrix.report._conversations import ConversationReport as ConversationReport
    from promptgrid.matrix.report._conversations import conversation_report as conversation_report
    from promptgrid.matrix.report._episode_export import export_records as export_records
    from promptgrid.matrix.report._episode_export import iter_transcripts as iter_transcripts
    from promptgrid.matrix.report._episode_export import select_episodes as select_episodes
    from promptgrid.matrix.report._episode_export import transcript_record as transcript_record
    from promptgrid.matrix.report._episode_export import transcript_text as transcript_text
    from promptgrid.matrix.report._transcripts import EpisodeTranscript as EpisodeTranscript
    from promptgrid.matrix.report._transcripts import choose_episodes as choose_episodes
    from promptgrid.matrix.report._transcripts import episode_transcripts as episode_transcripts
    from promptgrid.matrix.running.conversation_reader import arun_conversation_config as arun_conversation_config
    from promptgrid.matrix.running.conversation_reader import episodes_frame as episodes_frame
    from promptgrid.matrix.running.conversation_reader import is_conversation_dataset as is_conversation_dataset
    from promptgrid.matrix.running.conversation_reader import render_conversation as render_conversation
    from promptgrid.matrix.running.conversation_reader import run_conversation_config as run_conversation_config
    from promptgrid.matrix.running.conversation_runner import ConversationRunSummary as ConversationRunSummary
    from promptgrid.matrix.running.conversation_runner import make_conversation_client as make_conversation_client
    from promptgrid.matrix.running.results import Result as Result
    from promptgrid.matrix.running.store import conversation_store as conversation_store
    from promptgrid.matrix.running.store_episodes import CONVERSATION_STORE as CONVERSATION_STORE
    from promptgrid.matrix.running.store_episodes import is_conversation_run as is_conversation_run
    from promptgrid.matrix.scoring._score_conversations import decode_step as decode_step
    from promptgrid.matrix.scoring._score_conversations import score_conversation_stream as score_conversation_stream
    from promptgrid.matrix.scoring.state_check import MAXIMUM_STEP_LIMIT as MAXIMUM_STEP_LIMIT
    from promptgrid.matrix.scoring.state_check import ConversationVerdict as ConversationVerdict
    from promptgrid.matrix.scoring.state_check import DecodeFailure as DecodeFailure
    from promptgrid.matrix.scoring.state_check import GroundTruthRun as GroundTruthRun
    from promptgrid.matrix.scoring.state_check import TurnFailureMode as TurnFailureMode
    from promptgrid.matrix.scoring.state_check import TurnVerdict as TurnVerdict
    from promptgrid.matrix.scoring.state_check import check_conversation as check_conversation
    from promptgrid.matrix.scoring.state_check import run_ground_truth as run_ground_truth

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
    "EpisodeContext",
    "Result",
    "ScriptedClient",
    "Transcript",
    "arun_conversation_config",
    "conversation_store",
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

"""The first request of a conversation, rendered by promptgrid's own templates.

What bfcl-eval's prompting handlers send on the first step of turn 0 of a
multi-turn entry (``inference_multi_turn_prompting``, e.g. the OpenAI
completions handler) is:

* ``_pre_query_processing_prompting``: ``system_prompt_pre_processing_chat_model
  (question[0], function, id)``, i.e. the system prompt of
  ``formulate_system_prompt`` for the entry's prompt format (the default
  ``ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic``:
  multi-turn ids have no format part) with the entry's function docs (those of
  its involved classes, class by class, held-out ``miss_func`` docs removed,
  " Note that the provided function is in Python 3 syntax." appended to every
  description by ``load_dataset_entry``), put first, or in front of the turn's
  own system message (joined by a blank line) when it has one;
* ``add_first_turn_message_prompting``: the chat starts as that list: the
  system message, then the messages of turn 0.

``first_turn_messages`` builds the same list from a ``Conversation`` with a
``Case`` (the turn-0 docs, ``functions_at(0)``, and the turn-0 messages) and
``Renderer.render``, which reproduces ``formulate_system_prompt`` and the
system-message join byte for byte; bfcl-eval's code is never called.
"""

from __future__ import annotations

from promptgrid.matrix.datasets._conversations import Conversation
from promptgrid.records import Case
from promptgrid.templates import Renderer
from promptgrid.variants import Variant

__all__ = ["DEFAULT_VARIANT", "first_turn_case", "first_turn_messages"]

DEFAULT_VARIANT = Variant()
"""bfcl-eval's default prompt (``DEFAULT_SYSTEM_PROMPT_FORMAT``), the ``base`` of the ``bfcl_v4`` grid: Python
return format, no tool-call tag, JSON docs, plaintext, classic style, the ``bfcl_v4`` template."""


def first_turn_case(conversation: Conversation) -> Case:
    """The conversation's first turn as a single-turn ``Case``: its turn-0 messages and the docs offered at turn 0."""
    return Case(
        id=conversation.id,
        category=conversation.category,
        turns=tuple(dict(message) for message in conversation.turns[0]),
        functions=conversation.functions_at(0),
        language=conversation.language,
        group=conversation.template or conversation.id,
        source=conversation.source,
    )


def first_turn_messages(conversation: Conversation, variant: Variant | None = None, *,
                        renderer: Renderer | None = None) -> tuple[dict[str, str], ...]:
    """The messages sent on the first step of the first turn of ``conversation`` for ``variant``.

    ``variant`` defaults to ``DEFAULT_VARIANT`` (bfcl-eval's default prompt),
    for which the result equals what bfcl-eval's prompting handler sends.
    ``renderer`` is reused when given (its caches make repeated renders
    cheap); otherwise a new ``Renderer()`` renders. Raises what
    ``Renderer.render`` raises (``TemplateError``, ``MissingTranslationError``).
    """
    renderer = renderer if renderer is not None else Renderer()
    prompt = renderer.render(variant if variant is not None else DEFAULT_VARIANT, first_turn_case(conversation))
    return tuple(dict(message) for message in prompt.messages)

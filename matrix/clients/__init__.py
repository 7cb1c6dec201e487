"""Model access: a small client protocol, with litellm, local (llama-cpp) and fake implementations.

The call errors are ``promptgrid.providers``' (shared with the translation
backend), re-exported here for client authors. Implementations are imported
lazily by ``make_client``: litellm takes seconds to import, and
llama-cpp-python is an optional extra (``promptgrid[local]``).
"""

from promptgrid.providers import CallError, ErrorKind, FatalError, RetryableError, call_error

from ._base import Completion, JobIds, ModelClient
from ._batch import (
                     BatchBackend,
                     BatchStatus,
                     LineResult,
                     OpenAIBatchBackend,
                     batch_kind,
                     body_model,
                     completion_from_body,
                     decode_result,
                     decode_result_line,
                     encode_request_line,
)
from ._envelope import MAX_STORED_ANSWER_CHARS, envelope, read_envelope, stored_response
from ._litellm import CONSTRAINTS
from ._redact import REDACTED, Redactor
from ._registry import make_batch_backend, make_client, provider_of
from ._router import GRACE_S, NoEndpointLeft

__all__ = [
    "MAX_STORED_ANSWER_CHARS",
    "BatchBackend",
    "BatchStatus",
    "CONSTRAINTS",
    "LineResult",
    "OpenAIBatchBackend",
    "batch_kind",
    "body_model",
    "completion_from_body",
    "decode_result",
    "decode_result_line",
    "encode_request_line",
    "REDACTED",
    "CallError",
    "Completion",
    "ErrorKind",
    "FatalError",
    "GRACE_S",
    "JobIds",
    "ModelClient",
    "NoEndpointLeft",
    "Redactor",
    "RetryableError",
    "call_error",
    "envelope",
    "stored_response",
    "make_batch_backend",
    "make_client",
    "provider_of",
    "read_envelope",
]

"""The redactor of the run's clients: :mod:`promptgrid.redact`, shared by every path that talks to a provider
(runner, translation backends, batch backends, ``status``); re-exported here for the clients' imports."""

from promptgrid.redact import REDACTED, Redactor, redact_url, secret_values, url_secrets

__all__ = ["REDACTED", "Redactor", "redact_url", "secret_values", "url_secrets"]

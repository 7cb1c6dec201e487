"""Several endpoints of one model (vLLM replicas) behind litellm's Router.

``LiteLLMClient`` uses this when a model lists more than one ``api_base``;
with one it calls ``litellm.acompletion`` directly (no routing cost).

- One Router deployment per endpoint, all under one model name (``ROUTE``);
  the Router sends each call with its deployment's ``api_base`` and key.
- Spreading, least-busy: the endpoint with the fewest calls in flight gets
  the next one (ties rotate). ``LeastBusy`` is the Router's routing
  strategy (``Router.set_custom_routing_strategy``) rather than litellm's
  ``least-busy``: that one counts a call only once litellm logs it as
  started, after the choice, so calls chosen together all see the same
  counts and go to the first endpoint (measured: 8 of 8 at the start, and
  55/45 over a run, against replicas that each answer a fixed number at
  once). Here a call is counted when it is given its endpoint and given back
  when it ends (``send``). The runner keeps ``concurrency x endpoints``
  calls in flight (``ModelSpec.in_flight``), so each endpoint has
  ``concurrency``.
- Failover: a call that finds its endpoint down (refused or dropped
  connection, any 5xx) takes that endpoint out of the rotation for
  ``COOLDOWN_S`` seconds and is sent again at once, to another endpoint, at
  most ``endpoints - 1`` times (``send``). Everything else goes straight
  back to the runner, whose ``RetryPolicy`` stays the one retry loop over
  time: rate limits (it obeys Retry-After), timeouts (a second full timeout
  inside one attempt would hide a slow server), bad requests, auth and
  not-found errors (another replica answers the same). A failover is not a
  runner attempt: ``attempts`` counts the runner's tries. With every
  endpoint cooling down, the one back soonest is tried.
- Out of the rotation for good (``LeastBusy.remove``): an endpoint that
  answers 404 (wrong path or model), 401 or 403 (its key), or that refused
  every connection for ``GRACE_S`` seconds (consecutive failures, no answer
  between), is not chosen again in this run; the call is sent at once to
  another endpoint. When no endpoint is left, ``send`` raises
  ``NoEndpointLeft``, naming each endpoint (without credentials) and why it
  was dropped; the runner stops the model then (its other jobs stay pending).
- The Router's and the SDK's own retries are off (``num_retries=0``,
  ``max_retries=0`` on every deployment).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from promptgrid.providers import ErrorKind, FatalError

from ._redact import redact_url

__all__ = ["COOLDOWN_S", "GRACE_S", "ROUTE", "LeastBusy", "NoEndpointLeft", "connection_failed", "endpoint_broken",
           "deployment", "endpoint_down", "make_router", "registered_deployments", "retire", "send"]

ROUTE = "promptgrid-endpoints"
"""The one model name every deployment of a Router is registered under (``send`` asks for it)."""

COOLDOWN_S = 5.0
"""Seconds an endpoint that was found down stays out of the rotation before it is tried again."""

GRACE_S = 10.0
"""Seconds an endpoint may refuse every connection (no answer between) before it leaves the rotation for good;
also how long a model's only server may (``Runner``)."""


class NoEndpointLeft(FatalError):
    """Every endpoint of a model was taken out of the rotation for good: the model gets no more calls.

    ``kind`` is that of the last endpoint dropped (``not_found``, ``auth``, ``connection``); never retried.
    """

    @property
    def retryable(self) -> bool:
        return False

# The deployments chosen for the call ``send`` is making (a list shared with the tasks litellm may start).
_CHOSEN: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("promptgrid_router_chosen", default=None)


class LeastBusy:
    """The Router's routing strategy: fewest calls in flight, counted from the moment of choice.

    Implements litellm's ``CustomRoutingStrategyBase`` (duck-typed: the
    Router only calls these two methods).
    """

    def __init__(self, deployments: Sequence[Mapping[str, Any]]) -> None:
        self.deployments = list(deployments)
        self.in_flight: dict[str, int] = {self.id(d): 0 for d in self.deployments}
        self.back_at: dict[str, float] = {}
        """Deployment id -> ``time.monotonic()`` when an endpoint found down may be tried again."""
        self.removed: dict[str, tuple[ErrorKind, str]] = {}
        """Deployment id -> (kind, why) of the endpoints out of the rotation for good."""
        self.refused_since: dict[str, float] = {}
        """Deployment id -> ``time.monotonic()`` of the first of its connection failures in a row."""
        self._turn = 0

    @staticmethod
    def id(deployment: Mapping[str, Any]) -> str:
        return str(deployment["model_info"]["id"])

    def choose(self) -> Mapping[str, Any]:
        """The least busy endpoint not cooling down (ties rotate); counted in flight from now."""
        now = time.monotonic()
        usable = [d for d in self.deployments if self.id(d) not in self.removed] or self.deployments
        live = [d for d in usable if self.back_at.get(self.id(d), 0.0) <= now]
        if not live:  # all found down lately: try the one back soonest
            live = [min(usable, key=lambda d: self.back_at.get(self.id(d), 0.0))]
        self._turn += 1
        start = self._turn % len(live)
        chosen = min(live[start:] + live[:start], key=lambda d: self.in_flight[self.id(d)])
        key = self.id(chosen)
        self.in_flight[key] += 1
        chosen_list = _CHOSEN.get()
        if chosen_list is not None:
            chosen_list.append(key)
        return chosen

    def release(self, deployment_id: str) -> None:
        self.in_flight[deployment_id] -= 1

    def cool_down(self, deployment_id: str) -> None:
        self.back_at[deployment_id] = time.monotonic() + COOLDOWN_S

    def url(self, deployment_id: str) -> str:
        """The endpoint of a deployment, without credentials."""
        for d in self.deployments:
            if self.id(d) == deployment_id:
                params = d["litellm_params"]
                url, query = str(params.get("api_base")), params.get("extra_query")
                if isinstance(query, Mapping) and query:  # as configured: make_router moved it out of the URL
                    url += "?" + urlencode(query)
                return redact_url(url) or "?"
        return "?"

    def remove(self, deployment_id: str, kind: ErrorKind, why: str) -> None:
        """Take an endpoint out of the rotation for good (``why``: one line)."""
        self.removed.setdefault(deployment_id, (kind, why))

    def refused(self, deployment_id: str) -> float:
        """A connection to this endpoint failed; returns for how long its failures have been in a row."""
        now = time.monotonic()
        return now - self.refused_since.setdefault(deployment_id, now)

    def answered(self, deployment_id: str) -> None:
        """The endpoint answered (anything but a connection failure): its run of refusals is over."""
        self.refused_since.pop(deployment_id, None)

    def left(self) -> int:
        """How many endpoints are still in the rotation."""
        return len(self.deployments) - len(self.removed)

    def no_endpoint_left(self) -> NoEndpointLeft:
        """The error that stops the model: every endpoint, and why it was dropped."""
        whys = "; ".join(f"{self.url(i)}: {why}" for i, (_, why) in self.removed.items())
        kind = list(self.removed.values())[-1][0] if self.removed else ErrorKind.CONNECTION
        return NoEndpointLeft(kind, f"no endpoint of this model is left ({whys})")

    async def async_get_available_deployment(self, model: str, messages: Any = None, input: Any = None,  # noqa: A002
                                             specific_deployment: bool | None = False,
                                             request_kwargs: dict[str, Any] | None = None) -> Mapping[str, Any]:
        return self.choose()

    def get_available_deployment(self, model: str, messages: Any = None, input: Any = None,  # noqa: A002
                                 specific_deployment: bool | None = False,
                                 request_kwargs: dict[str, Any] | None = None) -> Mapping[str, Any]:
        return self.choose()


def make_router(lt: Any, model: str, api_bases: Sequence[str], api_key: str | None) -> tuple[Any, LeastBusy]:
    """A ``litellm.Router`` sending ``model`` to every endpoint of ``api_bases``, and its strategy (``send``)."""
    deployments = []
    for url in api_bases:
        base, query = urlsplit(url), None
        if base.query:  # the SDK would append the path after it (see _litellm.split_query)
            query = dict(parse_qsl(base.query, keep_blank_values=True))
            url = urlunsplit(base._replace(query="", fragment=""))
        params: dict[str, Any] = {"model": model, "api_base": url, "max_retries": 0}
        if query:
            params["extra_query"] = query
        if api_key is not None:
            params["api_key"] = api_key
        deployments.append({"model_name": ROUTE, "litellm_params": params})
    router = lt.Router(model_list=deployments, num_retries=0)
    strategy = LeastBusy(registered_deployments(router))
    register = getattr(router, "register_plugin", None)
    if callable(register):
        register(strategy)
    else:
        router.set_custom_routing_strategy(strategy)
    return router, strategy


# litellm 1.110 moved the Router's deployments behind ``Router.registry()``, the routing strategy
# to ``register_plugin`` and ``discard`` to ``retire``, and deprecated the old members; releases
# before it have only those. Each helper below asks for the new member first.


def registered_deployments(router: Any) -> list[Mapping[str, Any]]:
    """The Router's deployments as it registered them (each with its ``model_info.id``)."""
    registry = getattr(router, "registry", None)
    if callable(registry):
        return list(registry().all())
    return list(router.model_list)


def deployment(router: Any, deployment_id: str) -> Any:
    """The Router's deployment ``deployment_id`` (``None`` when it has none)."""
    registry = getattr(router, "registry", None)
    if callable(registry):
        return registry().deployment(deployment_id)
    return router.get_deployment(model_id=deployment_id)


def retire(router: Any) -> None:
    """Take the Router's callbacks out of litellm's process-wide lists (the Router is not used again)."""
    retire_ = getattr(router, "retire", None)
    if callable(retire_):
        retire_()
    else:
        router.discard()


def connection_failed(lt: Any, exc: BaseException) -> bool:
    """No HTTP answer: the connection was refused, reset or could not be made (never a timeout).

    litellm reports a refused connection of an OpenAI-compatible server as an ``InternalServerError``
    (status 500, "Connection error."), so the exceptions it was raised from are looked at too.
    """
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 10:
        if isinstance(cause, (lt.Timeout, TimeoutError)) or "Timeout" in type(cause).__name__:
            return False
        if isinstance(cause, (lt.APIConnectionError, ConnectionError)) or type(cause).__name__ in (
                "APIConnectionError", "ConnectError", "ClientConnectorError", "RemoteProtocolError",
                "ServerDisconnectedError"):
            return True
        cause = cause.__cause__ or cause.__context__
        seen += 1
    # Through the Router the chain is lost: the InternalServerError it raises has no __cause__ and, as
    # __context__, a RuntimeError of litellm's own ('no running event loop'). What is left is the OpenAI
    # SDK's APIConnectionError text that litellm quotes ("OpenAIException - Connection error."), which a
    # server's own 500 never carries (its body's message is quoted instead).
    return isinstance(exc, lt.InternalServerError) and getattr(exc, "body", None) is None \
        and "Connection error." in str(exc)


def endpoint_broken(lt: Any, exc: BaseException) -> tuple[ErrorKind, str] | None:
    """(kind, why) when ``exc`` says the endpoint itself is wrong for every call: not found (404, a wrong
    path or model), or its key refused (401, 403); None otherwise."""
    status = getattr(exc, "status_code", None)
    if isinstance(exc, lt.NotFoundError) or status == 404:
        return ErrorKind.NOT_FOUND, "answered 404 not found (wrong path or model name?)"
    if isinstance(exc, (lt.AuthenticationError, lt.PermissionDeniedError)) or status in (401, 403):
        return ErrorKind.AUTH, f"refused the key ({status or 'auth error'})"
    return None


def endpoint_down(lt: Any, exc: BaseException) -> bool:
    """``exc`` says the endpoint failed, not the request: a connection error or a 5xx (never a timeout)."""
    if isinstance(exc, lt.Timeout):
        return False
    status = getattr(exc, "status_code", None)
    return isinstance(exc, lt.APIConnectionError) or (isinstance(status, int) and status >= 500)


def _diagnose(lt: Any, strategy: LeastBusy, deployment: str, exc: BaseException
              ) -> tuple[bool, tuple[ErrorKind, str] | None]:
    """Whether a failed call's connection was refused, and (kind, why) when its endpoint is broken for good (also
    when it has refused every connection for ``GRACE_S``); the strategy is told the endpoint refused or answered."""
    refused = connection_failed(lt, exc)
    broken = endpoint_broken(lt, exc)
    if refused:
        seconds = strategy.refused(deployment)
        if seconds >= GRACE_S:
            broken = (ErrorKind.CONNECTION, f"refused every connection for {seconds:.0f} s")
    else:
        strategy.answered(deployment)
    return refused, broken


async def send(lt: Any, router: Any, strategy: LeastBusy, kwargs: Mapping[str, Any]) -> Any:
    """``router.acompletion(**kwargs)``, failing over to another endpoint when the one chosen is down, and
    dropping an endpoint that is broken for good (``NoEndpointLeft`` when none is left)."""
    failovers = 0
    while True:
        if strategy.left() == 0:
            raise strategy.no_endpoint_left()
        chosen: list[str] = []
        token = _CHOSEN.set(chosen)
        try:
            response = await router.acompletion(**{**kwargs, "model": ROUTE})
            if chosen:
                strategy.answered(chosen[-1])
            return response
        except Exception as exc:
            if not chosen:
                raise
            deployment = chosen[-1]
            refused, broken = _diagnose(lt, strategy, deployment, exc)
            if broken is not None:
                strategy.remove(deployment, *broken)
                if strategy.left() == 0:
                    raise strategy.no_endpoint_left() from None
                continue  # the call goes to another endpoint at once (bounded: each endpoint is dropped once)
            if failovers >= len(strategy.deployments) - 1 or not (refused or endpoint_down(lt, exc)):
                raise
            strategy.cool_down(deployment)
            failovers += 1
        finally:
            _CHOSEN.reset(token)
            for deployment_id in chosen:
                strategy.release(deployment_id)

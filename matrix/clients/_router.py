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
- The Router's and the SDK's own retries are off (``num_retries=0``,
  ``max_retries=0`` on every deployment).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["COOLDOWN_S", "ROUTE", "LeastBusy", "endpoint_down", "make_router", "registered_deployments", "send"]

ROUTE = "promptgrid-endpoints"
"""The one model name every deployment of a Router is registered under (``send`` asks for it)."""

COOLDOWN_S = 5.0
"""Seconds an endpoint that was found down stays out of the rotation before it is tried again."""

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
        self._turn = 0

    @staticmethod
    def id(deployment: Mapping[str, Any]) -> str:
        return str(deployment["model_info"]["id"])

    def choose(self) -> Mapping[str, Any]:
        """The least busy endpoint not cooling down (ties rotate); counted in flight from now."""
        now = time.monotonic()
        live = [d for d in self.deployments if self.back_at.get(self.id(d), 0.0) <= now]
        if not live:  # all found down lately: try the one back soonest
            live = [min(self.deployments, key=lambda d: self.back_at[self.id(d)])]
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
        params: dict[str, Any] = {"model": model, "api_base": url, "max_retries": 0}
        if api_key is not None:
            params["api_key"] = api_key
        deployments.append({"model_name": ROUTE, "litellm_params": params})
    router = lt.Router(model_list=deployments, num_retries=0)
    strategy = LeastBusy(registered_deployments(router))
    router.set_custom_routing_strategy(strategy)
    return router, strategy


def registered_deployments(router: Any) -> list[Mapping[str, Any]]:
    """The Router's deployments as it registered them (each with its ``model_info.id``).

    litellm 1.110 moved them behind ``Router.registry().all()`` and deprecated the
    ``model_list`` attribute; releases before it have only the attribute.
    """
    registry = getattr(router, "registry", None)
    if callable(registry):
        return list(registry().all())
    return list(router.model_list)


def endpoint_down(lt: Any, exc: BaseException) -> bool:
    """``exc`` says the endpoint failed, not the request: a connection error or a 5xx (never a timeout)."""
    if isinstance(exc, lt.Timeout):
        return False
    status = getattr(exc, "status_code", None)
    return isinstance(exc, lt.APIConnectionError) or (isinstance(status, int) and status >= 500)


async def send(lt: Any, router: Any, strategy: LeastBusy, kwargs: Mapping[str, Any]) -> Any:
    """``router.acompletion(**kwargs)``, failing over to another endpoint when the one chosen is down."""
    failovers = 0
    while True:
        chosen: list[str] = []
        token = _CHOSEN.set(chosen)
        try:
            return await router.acompletion(**{**kwargs, "model": ROUTE})
        except Exception as exc:
            if failovers >= len(strategy.deployments) - 1 or not chosen or not endpoint_down(lt, exc):
                raise
            strategy.cool_down(chosen[-1])
            failovers += 1
        finally:
            _CHOSEN.reset(token)
            for deployment_id in chosen:
                strategy.release(deployment_id)

"""An ``initial_config`` checked against what each class's scenario loader reads, before anything runs.

bfcl-eval's classes load their state with ``_load_scenario(scenario)``: each reads
the keys it knows with ``scenario.get(key, default)`` and trusts their shape, so a
wrong shape (``"contents": 5`` in a folder, a ticket queue that is a string)
surfaces only when a call touches it, as an ``AttributeError`` in the middle of
a run. ``scenario_problems`` checks, per involved class, the keys its loader
reads: their JSON type (as the class's default state has it, ``null`` where the
default is ``None``, an integer where a number is read) and, where the methods
index into them, the shape of their items (the file system's tree, a ticket
queue of objects, an inbox of objects, a map of cards, bookings, stocks or
tweets). Keys a loader does not read are ignored, as the loaders ignore them
(BFCL's own data carries some, e.g. ``TravelAPI.current_location``).

``random_seed`` is an integer, or ``null`` as bfcl-eval's loaders allow: a
``null`` seed makes the class draw its ids from the system's entropy, so the
model's and the ground truth's environments draw different ids, and an
environment rebuilt after a call hit a bound replays to another state: that
episode then ends as an environment failure (``replay_differs``), the run goes
on.

The file system's tree is bounded (``MAX_TREE_NODES`` entries,
``MAX_TREE_DEPTH`` levels), checked iteratively. The schemas were written from
bfcl-eval 2026.3.23's loaders; every entry of the four BFCL multi-turn categories
and of ``mini-mt`` passes (a test checks it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["MAX_TREE_DEPTH", "MAX_TREE_NODES", "scenario_problems"]

MAX_TREE_NODES = 100_000
"""Most files and folders in one ``GorillaFileSystem`` initial tree (BFCL's largest has under 100)."""
MAX_TREE_DEPTH = 64
"""Deepest folder nesting in one ``GorillaFileSystem`` initial tree."""

_NUMBER = ("integer", "number")
# class -> key its loader reads -> (accepted JSON kinds, the kind of each item for a list/object, or None)
_SCHEMAS: dict[str, dict[str, tuple[tuple[str, ...], str | None]]] = {
    "MessageAPI": {
        "random_seed": (("integer", "null"), None),
        "generated_ids": ((), None),  # a set in the class: JSON has none, and a list breaks send_message
        "user_count": (("integer",), None),
        "user_map": (("object",), "string"),
        "inbox": (("array",), "object"),
        "message_count": (("integer",), None),
        "current_user": (("string", "null"), None),
    },
    "TwitterAPI": {
        "username": (("string",), None),
        "password": (("string",), None),
        "authenticated": (("boolean",), None),
        "tweets": (("object",), "object"),
        "comments": (("object",), "array"),
        "retweets": (("object",), "array"),
        "following_list": (("array",), None),
        "tweet_counter": (("integer",), None),
    },
    "TicketAPI": {
        "ticket_queue": (("array",), "object"),
        "ticket_counter": (("integer",), None),
        "current_user": (("string", "null"), None),
    },
    "TradingBot": {
        "orders": (("object",), None),
        "account_info": (("object",), None),
        "authenticated": (("boolean",), None),
        "market_status": (("string",), None),
        "order_counter": (("integer",), None),
        "stocks": (("object",), "object"),
        "watch_list": (("array",), None),
        "transaction_history": (("array",), "object"),
        "random_seed": (("integer", "null"), None),
    },
    "TravelAPI": {
        "random_seed": (("integer", "null"), None),
        "credit_card_list": (("object",), "object"),
        "booking_record": (("object",), "object"),
        "access_token": (("string", "null"), None),
        "token_type": (("string", "null"), None),
        "token_expires_in": (("integer", "null"), None),
        "token_scope": (("string", "null"), None),
        "user_first_name": (("string", "null"), None),
        "user_last_name": (("string", "null"), None),
        "budget_limit": (("integer", "number", "null"), None),
    },
    "VehicleControlAPI": {
        "random_seed": (("integer", "null"), None),
        **{key: (_NUMBER, None) for key in (
            "fuelLevel", "batteryVoltage", "acTemperature", "humidityLevel", "parkingBrakeForce", "slopeAngle",
            "brakePedalForce", "distanceToNextVehicle", "frontLeftTirePressure", "frontRightTirePressure",
            "rearLeftTirePressure", "rearRightTirePressure")},
        **{key: (("integer",), None) for key in ("remainingUnlockedDoors", "fanSpeed")},
        **{key: (("string",), None) for key in (
            "engineState", "acMode", "headLightStatus", "parkingBrakeStatus", "brakePedalStatus", "cruiseStatus",
            "destination")},
        "doorStatus": (("object",), "string"),
    },
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _tree_problems(root: Any) -> Iterator[tuple[str, str]]:
    """The file system's ``root``: its first entry is the top folder ``{"NAME": {"type": "directory", "contents":
    {...}}}`` (the loader reads only the first, so later entries are ignored, as in BFCL's ``multi_turn_base_33``);
    every entry below it a folder with ``contents`` (an object of entries) or a file with ``content`` (a string)."""
    if not isinstance(root, dict) or not root:
        yield "root", ('must be an object whose first entry is the top folder, e.g. {"workspace": {"type": '
                       '"directory", "contents": {}}}')
        return
    name, top = next(iter(root.items()))
    stack: list[tuple[str, Any, int]] = [(f"root.{name}", top, 1)]
    nodes = 0
    while stack:
        where, entry, depth = stack.pop()
        nodes += 1
        if nodes > MAX_TREE_NODES:
            yield "root", f"has more than {MAX_TREE_NODES} files and folders"
            return
        if depth > MAX_TREE_DEPTH:
            yield where, f"is nested deeper than {MAX_TREE_DEPTH} folders"
            return
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "directory" or (depth == 1 and isinstance(entry, dict) and "contents" in entry):
            contents = entry.get("contents")
            if not isinstance(contents, dict):
                yield f"{where}.contents", (f"must be an object of the folder's files and folders, not "
                                            f"{_kind(contents)}")
                return
            stack.extend((f"{where}.contents.{child}", value, depth + 1) for child, value in contents.items())
        elif kind == "file":
            if not isinstance(entry.get("content"), str):
                yield f"{where}.content", f"must be the file's text, not {_kind(entry.get('content'))}"
                return
        else:
            yield where, ('must be {"type": "directory", "contents": {...}} or {"type": "file", "content": '
                          '"..."}')
            return


def scenario_problems(classes: tuple[str, ...], initial_config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Per involved class, what its scenario loader would trip on: ``(field path, what is wrong)`` pairs (at most
    one per class), the path from ``initial_config`` (``initial_config.GorillaFileSystem.root.a.contents``)."""
    problems: list[tuple[str, str]] = []
    for name in classes:
        state = initial_config.get(name)
        if state is None or name == "MathAPI":  # absent: the class's default state; MathAPI loads none
            continue
        prefix = f"initial_config.{name}"
        if name == "GorillaFileSystem":
            if "root" in state:
                problems.extend((f"{prefix}.{where}", what) for where, what in _tree_problems(state["root"]))
            continue
        problem = _schema_problem(prefix, state, _SCHEMAS.get(name, {}))
        if problem is not None:
            problems.append(problem)
    return problems


def _schema_problem(prefix: str, state: Mapping[str, Any], schema: Mapping[str, tuple[tuple[str, ...], str | None]]
                    ) -> tuple[str, str] | None:
    """The first field of a class's state (``prefix``: its path) that the class's schema refuses, and why (a field
    it cannot be given, a value of another kind, a member of another kind); ``None`` when none."""
    for key, (kinds, items) in schema.items():
        if key not in state:
            continue
        value = state[key]
        kind = _kind(value)
        if not kinds:
            return (f"{prefix}.{key}", "cannot be given: the class keeps it as a set, which JSON cannot "
                                       "write (leave it out; the ids are drawn from random_seed)")
        if kind not in kinds:
            return (f"{prefix}.{key}", f"must be {' or '.join(kinds)}, not {kind}")
        if items is not None and isinstance(value, (list, dict)):
            members = value.items() if isinstance(value, dict) else enumerate(value)
            bad = next(((index, item) for index, item in members if _kind(item) != items), None)
            if bad is not None:
                return (f"{prefix}.{key}[{bad[0]!r}]", f"must be {items}, not {_kind(bad[1])}")
    return None

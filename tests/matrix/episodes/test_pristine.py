"""``_worker.Pristine``: what a reused worker puts back between environments, tested in this process on a module
made for the test (registered under a watched prefix)."""

from __future__ import annotations

import decimal
import random
import sys
import threading
import types
from collections.abc import Iterator

import pytest

from promptgrid.matrix.episodes import _worker as worker_module
from promptgrid.matrix.episodes._worker import Pristine, Unrestorable

_SOURCE = '''
SHARED = ["a", "b"]
TABLE = {"k": [1, 2]}
ALIAS = SHARED
LIMIT = 3

class Account:
    rate = [0.5]
    def add(self, item, into=[]):
        into.append(item)
        return into

def collect(item, *, bag={}):
    bag[item] = True
    return bag
'''


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    module = types.ModuleType("pg_pristine_probe")
    exec(compile(_SOURCE, "<probe>", "exec"), vars(module))  # noqa: S102 - the test's own source text
    monkeypatch.setitem(sys.modules, "pg_pristine_probe", module)
    monkeypatch.setattr(worker_module, "REUSE_PREFIXES", ("pg_pristine_probe",))
    context = decimal.getcontext().copy()
    state = random.getstate()
    yield module
    decimal.setcontext(context)
    random.setstate(state)


def test_module_class_and_default_state_is_put_back_in_place(probe: types.ModuleType) -> None:
    pristine = Pristine()
    shared, account = probe.SHARED, probe.Account
    probe.SHARED.append("c")  # in place, seen through ALIAS too
    probe.TABLE["k"].append(3)
    probe.LIMIT = 99  # rebound
    probe.EXTRA = "new"  # added
    account.rate.append(1.0)
    account.added = True
    account().add("x")  # the shared default list
    probe.collect("y")  # a keyword-only default dict
    decimal.getcontext().prec = 5
    random.seed(1234)
    assert pristine.restore() == 1
    assert probe.SHARED == ["a", "b"] and probe.SHARED is shared and probe.ALIAS is shared
    assert probe.TABLE == {"k": [1, 2]} and probe.LIMIT == 3 and not hasattr(probe, "EXTRA")
    assert account.rate == [0.5] and not hasattr(account, "added")
    assert account().add("z") == ["z"] and probe.collect("w") == {"w": True}
    assert decimal.getcontext().prec == 28


def test_nothing_changed_restores_nothing(probe: types.ModuleType) -> None:
    pristine = Pristine()
    assert pristine.restore() == 0
    probe.SHARED.append("c")
    assert pristine.restore() == 1 and pristine.restore() == 0


def test_a_module_imported_meanwhile_or_a_thread_left_running_ends_the_worker(probe: types.ModuleType,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pristine = Pristine()
    monkeypatch.setitem(sys.modules, "pg_pristine_new", types.ModuleType("pg_pristine_new"))
    with pytest.raises(Unrestorable, match="pg_pristine_new was imported"):
        pristine.restore()
    monkeypatch.delitem(sys.modules, "pg_pristine_new")
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with pytest.raises(Unrestorable, match="thread"):
            pristine.restore()
    finally:
        stop.set()
        thread.join()


def test_a_value_that_cannot_be_copied_makes_the_worker_single_use(probe: types.ModuleType) -> None:
    probe.LOCK = threading.Lock()
    with pytest.raises(Unrestorable, match="cannot be copied"):
        Pristine()


def test_reach_follows_the_modules_a_class_s_module_holds(probe: types.ModuleType, monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    other = types.ModuleType("pg_pristine_probe_data")
    exec("ITEMS = [1]\ndef helper():\n    ITEMS.append(2)\n", vars(other))  # noqa: S102
    monkeypatch.setitem(sys.modules, "pg_pristine_probe_data", other)
    probe.helper = other.helper
    pristine = Pristine()
    assert [module.module.__name__ for module in pristine.reach([probe.Account])] == \
        ["pg_pristine_probe", "pg_pristine_probe_data"]
    other.helper()
    assert pristine.restore([probe.Account]) == 1 and other.ITEMS == [1]


def test_a_worker_snapshots_only_what_its_classes_reach_and_adds_the_next_classes_modules(
        probe: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    other = types.ModuleType("pg_pristine_probe_other")
    exec("class Other:\n    table = [1]\n", vars(other))  # noqa: S102
    monkeypatch.setitem(sys.modules, "pg_pristine_probe_other", other)
    pristine = Pristine([probe.Account])
    assert set(pristine.modules) == {"pg_pristine_probe"}
    pristine.watch([other.Other])  # a later environment's class: its module is taken before it runs
    assert set(pristine.modules) == {"pg_pristine_probe", "pg_pristine_probe_other"}
    other.Other.table.append(2)
    assert pristine.restore([other.Other]) == 1 and other.Other.table == [1]

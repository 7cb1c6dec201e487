"""Job keys, plan streaming, and the store on its own."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptgrid.matrix.running.config import RunError
from promptgrid.matrix.running.plan import iter_jobs, job_key, repeat_params
from promptgrid.matrix.running.store import CallResult, RunStore, case_from_dict, case_to_dict
from promptgrid.records import Prompt
from support.builders import bfcl_variants, numbered_case, numbered_cases

params_st = st.dictionaries(st.sampled_from(["temperature", "max_tokens", "seed", "top_p"]),
                            st.integers(0, 1000), max_size=4)


@given(model=st.text(min_size=1, max_size=20), params=params_st, digest=st.text(min_size=1, max_size=64),
       repeat=st.integers(0, 20))
def test_key_changes_with_every_input(model: str, params: dict, digest: str, repeat: int) -> None:
    key = job_key(model, params, digest, repeat)
    assert key == job_key(model, dict(reversed(list(params.items()))), digest, repeat)  # order-free
    assert key != job_key(model + "x", params, digest, repeat)
    assert key != job_key(model, params, digest + "x", repeat)
    assert key != job_key(model, params, digest, repeat + 1)
    assert key != job_key(model, {**params, "stop": ["x"]}, digest, repeat)


def test_repeat_offsets_the_seed_only_when_given() -> None:
    assert repeat_params({"seed": 5, "temperature": 0.7}, 2) == {"seed": 7, "temperature": 0.7}
    assert repeat_params({"temperature": 0.7}, 2) == {"temperature": 0.7}


class CountingRenderer:
    def __init__(self) -> None:
        self.calls = 0

    def render(self, variant, case) -> Prompt:
        self.calls += 1
        return Prompt(variant.id, case.id, ({"role": "user", "content": f"{variant.id}|{case.id}"},))


def test_plan_is_lazy_and_case_major() -> None:
    renderer = CountingRenderer()
    jobs = iter_jobs("m", {"temperature": 0}, bfcl_variants(3), numbered_cases(1000), 2, renderer)
    first = [next(jobs) for _ in range(6)]
    assert renderer.calls == 3  # one case rendered so far, each prompt once for both repeats
    assert [(j.case.id, j.repeat) for j in first] == [("case_0", 0), ("case_0", 1)] * 3
    assert len({j.key for j in first}) == 6


def result(key: str, status: str = "done", **kw) -> CallResult:
    return CallResult(key=key, model="m", repeat=0, prompt_sha256="p" + key, params="{}", status=status, **kw)


def test_store_roundtrip_and_rows(tmp_path: Path) -> None:
    with RunStore(tmp_path, create=True) as store:
        mid = store.add_models(["m"])["m"]
        vids = store.add_variants(bfcl_variants(2))
        cids = store.add_cases([numbered_case(0, "de")])
        v0, v1 = (vids[v.id] for v in bfcl_variants(2))
        c0 = cids["case_0"]
        store.add_jobs([(mid, v0, c0, 0, "k1"), (mid, v1, c0, 0, "k1")])  # two rows, one call
        assert store.lookup(["k1", "k2"]) == {}
        store.record(result("k1", response="[f()]", input_tokens=3, output_tokens=2, cost_usd=0.5, latency_s=0.1),
                     [((mid, v0, c0, 0), json.dumps({"valid": True, "error_code": "VALID", "extra": 1}),
                       True, "VALID")])
        assert store.lookup(["k1", "k2"]) == {"k1": "done"}
        assert store.scored(["k1"]) == {(mid, v0, c0, 0)}
        rows = list(store.rows())
        assert len(rows) == 2 and {r.key for r in rows} == {"k1"}
        scored = [r for r in rows if r.valid is not None]
        assert scored[0].case_language == "de" and scored[0].case_group == "g0"
        assert not hasattr(scored[0], "extra")  # a verdict key that is no ResultRow field is not read
        assert store.spend() == 0.5  # the shared call is counted once
        # Changing a row's key clears its verdict.
        store.add_jobs([(mid, v0, c0, 0, "k9")])
        assert store.scored(["k1"]) == set()
        assert len(list(store.rows())) == 1 and len(list(store.rows(include_pending=True))) == 2


def test_case_roundtrip() -> None:
    case = numbered_case(3, "ja")
    back = case_from_dict(json.loads(json.dumps(case_to_dict(case))))
    assert (back.id, back.turns, back.functions, back.ground_truth, back.language, back.group) == (
        case.id, case.turns, case.functions, case.ground_truth, case.language, case.group)


def test_store_settings_and_errors(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="not a run directory"):
        RunStore(tmp_path / "nope")
    with RunStore(tmp_path, create=True) as store:
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    db = sqlite3.connect(tmp_path / "store.sqlite3")
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(RunError, match="schema 99"):
        RunStore(tmp_path)

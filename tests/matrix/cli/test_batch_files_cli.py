"""`promptgrid export-batch` and `import-batch` through the CLI entry point: the round trip through the fake
server's batch answerer, the run directory they start, messages and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from promptgrid.matrix.cli import main
from promptgrid.matrix.running.store import RunStore
from promptgrid.variants import load_grid

MODEL = "hosted_vllm/served"
VARIANTS = [v.id for v in load_grid("bfcl_v4").variants[:2]]


def _start(run_dir: Path, out: Path, *extra: str) -> list[str]:
    variants = [a for v in VARIANTS for a in ("--variant", v)]
    return ["export-batch", str(run_dir), "--model", MODEL, "--grid", "bfcl_v4", "--dataset", "mini:en",
            "--limit", "2", *variants, "-o", str(out), *extra]


def test_export_answer_import_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, requests, results = tmp_path / "run", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    assert main(_start(run_dir, requests)) == 0
    err = capsys.readouterr().err
    assert f"4 request line(s) for {MODEL} written to {requests}" in err
    assert f"promptgrid import-batch {run_dir} RESULTS.jsonl" in err
    record = json.loads((run_dir / "run.json").read_text())
    assert record["invocations"][-1]["export_batch"]["lines"] == 4
    assert record["config"]["models"][0]["name"] == MODEL

    # Without --grid the run directory's own config is used: the same pending calls, to standard output.
    assert main(["export-batch", str(run_dir), "--model", MODEL]) == 0
    out, err = capsys.readouterr()
    assert out.encode() == requests.read_bytes() and "written to standard output" in err

    from support.fake_server import SCRIPT, child_env

    proc = subprocess.run([sys.executable, str(SCRIPT), "--answer-batch", str(requests), str(results)],
                          capture_output=True, text=True, timeout=120, env=child_env())
    assert proc.returncode == 0, proc.stderr
    assert main(["import-batch", str(run_dir), str(results)]) == 0
    err = capsys.readouterr().err
    assert "import-batch: 4 line(s): 4 stored (4 answers, 0 errors), 0 already stored." in err
    with RunStore(run_dir, readonly=True) as store:
        assert store.counts()["done"] == 4 and [b.state for b in store.batches()] == ["collected", "collected"]
    assert main(["import-batch", str(run_dir), str(results)]) == 0
    assert "0 stored (0 answers, 0 errors), 4 already stored" in capsys.readouterr().err

    assert main(["export-batch", str(run_dir), "--model", MODEL, "-o", str(tmp_path / "none.jsonl")]) == 0
    assert "0 request line(s)" in capsys.readouterr().err and (tmp_path / "none.jsonl").read_bytes() == b""


def test_body_model_and_a_partial_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, requests, results = tmp_path / "run", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    assert main(_start(run_dir, requests, "--body-model", "meta-llama/Llama-3.1-8B-Instruct")) == 0
    lines = requests.read_bytes().splitlines()
    assert {json.loads(line)["body"]["model"] for line in lines} == {"meta-llama/Llama-3.1-8B-Instruct"}
    from support.fake_server import answer_batch_file

    results.write_bytes(answer_batch_file(b"\n".join(lines[:3]) + b"\n"))
    capsys.readouterr()
    assert main(["import-batch", str(run_dir), str(results)]) == 0
    err = capsys.readouterr().err
    assert "3 stored" in err and "1 exported call(s) still have no result" in err


def test_bad_import_files_exit_2_and_store_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from support.fake_server import answer_batch_file

    run_dir, requests, results = tmp_path / "run", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    assert main(_start(run_dir, requests)) == 0
    good = answer_batch_file(requests.read_bytes()).splitlines()
    foreign = json.dumps({**json.loads(good[0]), "custom_id": "not-ours"}).encode()
    results.write_bytes(b"\n".join([good[0], foreign, b"{oops", *good[1:], good[2]]) + b"\n")
    capsys.readouterr()
    assert main(["import-batch", str(run_dir), str(results)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("promptgrid: error: ") and "Traceback" not in err
    assert f"{results}:2: custom_id not-ours is not a job promptgrid export-batch wrote" in err
    assert f"{results}:3: not a JSON line" in err
    assert f"{results}:7: custom_id" in err and "is also on line 5" in err
    with RunStore(run_dir, readonly=True) as store:
        assert store.counts()["done"] == 0


def test_export_refuses_what_it_cannot_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export-batch", str(tmp_path / "new"), "--model", MODEL]) == 2
    assert "--grid GRID --dataset DS" in capsys.readouterr().err
    assert main(_start(tmp_path / "f", tmp_path / "q.jsonl")[:3] + ["fake/auto", *_start(
        tmp_path / "f", tmp_path / "q.jsonl")[4:]]) == 2
    assert "litellm model string" in capsys.readouterr().err
    assert main(["import-batch", str(tmp_path / "new"), str(tmp_path / "r.jsonl")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    run_dir = tmp_path / "run"
    assert main(_start(run_dir, tmp_path / "q.jsonl")) == 0
    assert main(["export-batch", str(run_dir), "--model", MODEL, "--grid", "bfcl_v4", "--dataset", "mini:de",
                 "--limit", "1", "-o", str(tmp_path / "q2.jsonl")]) == 2
    assert "--append" in capsys.readouterr().err  # another dataset into the directory: refused as run refuses it
    assert main(["export-batch", str(run_dir), "--model", MODEL, "-o", str(run_dir / "store.sqlite3")]) == 2


def test_export_from_a_run_uses_the_models_recorded_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from support.fake_server import FakeScript, FakeServer

    run_dir = tmp_path / "run"
    variants = [a for v in VARIANTS for a in ("--variant", v)]
    with FakeServer.thread(FakeScript(status=500)) as server:  # every call fails: the errors are stored
        assert main(["run", "bfcl_v4", "--dataset", "mini:en", "--limit", "2", *variants, "--model", MODEL,
                     "--api-base", server.url, "--temperature", "0.3", "--max-retries", "0", "--run-dir",
                     str(run_dir), "--no-progress"]) == 1
    capsys.readouterr()
    assert main(["export-batch", str(run_dir), "--model", MODEL, "-o", str(tmp_path / "q.jsonl")]) == 0
    assert "0 request line(s)" in capsys.readouterr().err  # the same keys (temperature 0.3): errors are final
    assert main(["export-batch", str(run_dir), "--model", MODEL, "--retry-errors", "-o",
                 str(tmp_path / "q.jsonl")]) == 0
    bodies = [json.loads(line)["body"] for line in (tmp_path / "q.jsonl").read_bytes().splitlines()]
    assert len(bodies) == 4 and {b["temperature"] for b in bodies} == {0.3}


def test_export_refuses_a_run_directory_whose_store_is_empty_or_gone(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a zero-byte (or deleted) store.sqlite3 was re-created empty in place, every job exported again,
    exit 0. Now: exit 2, one line naming the store, and the directory is left exactly as it was."""
    run_dir = tmp_path / "run"
    assert main(_start(run_dir, tmp_path / "q.jsonl")) == 0
    capsys.readouterr()
    store = run_dir / "store.sqlite3"
    for damage, words in (("empty", "is empty (0 bytes)"), ("missing", "is missing, but")):
        for p in run_dir.glob("store.sqlite3*"):
            p.unlink()
        if damage == "empty":
            store.write_bytes(b"")
        before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
        for argv in (["export-batch", str(run_dir), "--model", MODEL, "-o", str(tmp_path / "x.jsonl")],
                     _start(run_dir, tmp_path / "x.jsonl")):
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and str(store) in err and words in err, err
            assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
            assert not (tmp_path / "x.jsonl").exists()


def test_a_huge_provider_error_is_stored_cut_to_max_error_chars(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a batch line whose error code was 100 KB was stored whole (104,402 characters per call)."""
    from promptgrid.matrix.running.store import MAX_ERROR_CHARS

    run_dir, requests, results = tmp_path / "run", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    assert main(_start(run_dir, requests)) == 0
    ids = [json.loads(line)["custom_id"] for line in requests.read_text().splitlines()]
    results.write_text("".join(json.dumps({"id": "x", "custom_id": cid, "response": None,
                                           "error": {"code": "E" * 102400, "message": "m" * 5000}}) + "\n"
                               for cid in ids))
    assert main(["import-batch", str(run_dir), str(results)]) == 0
    capsys.readouterr()
    with RunStore(run_dir, readonly=True) as store:
        errors = [r.error for r in store.rows() if r.status == "error"]
    assert len(errors) == len(ids) == 4
    for error in errors:
        assert error is not None and error.startswith("EEEE")
        assert len(error) <= MAX_ERROR_CHARS + 50 and error.endswith("more characters cut]"), len(error)

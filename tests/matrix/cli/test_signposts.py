"""Where a user is stuck, the message says the way out: ``--constraints`` for unsupported constrained jobs (run
and dry run), what the dry run's cost figures are, and ``export -o``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import promptgrid as pg
from promptgrid.matrix.calling import call_request
from promptgrid.matrix.cli import main
from promptgrid.matrix.clients import make_client
from promptgrid.variants import Variant
from support.builders import make_case

JSON_CONSTRAINED = call_request(Variant(return_format="json", call_mode="constrained"), make_case().functions)


def test_the_unsupported_reason_names_the_flag_and_the_config_key() -> None:
    reason = make_client("openai/no-such-model-xyz").unsupported(JSON_CONSTRAINED)
    assert reason is not None and "--constraints vllm or llama.cpp" in reason and "run config" in reason


def test_the_dry_run_says_how_to_send_constrained_jobs_and_what_its_total_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "demo", "--dataset", "mini:en", "--model", "openai/served", "--api-base",
            "http://127.0.0.1:9/v1", "--limit", "1", "--run-dir", str(tmp_path / "r"), "--dry-run"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "model openai/served: 2 jobs would not be sent" in out
    assert "Constrained jobs are sent with --constraints vllm or llama.cpp" in out
    total = next(line for line in out.splitlines() if line.startswith("total:"))
    assert "input + output" not in total and "for their input, at most" in total and "max_tokens of output" in total


def test_export_takes_o_for_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = pg.run("demo", "mini:en", models=["fake/auto"], run_dir=tmp_path / "r", limit=1)
    out = tmp_path / "rows.jsonl"
    assert main(["export", str(run.path), "-o", str(out)]) == 0
    assert len([json.loads(line) for line in out.read_text().splitlines()]) == 4
    assert f"exported 4 jobs to {out}" in capsys.readouterr().err


def test_datasets_lists_the_conversation_datasets_beside_the_single_turn_ones(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `promptgrid datasets` listed no bfcl:multi_turn_*, no mini-mt and no jsonl: form for conversations."""
    pytest.importorskip("bfcl_eval")
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    single, _sep, conversations = out.partition("\nConversations:")
    assert out.startswith("Single-turn datasets:") and conversations
    assert "bfcl:simple_python" in single and "mini:LANG[,LANG...]" in single and "multi_turn" not in single
    names = [line.split()[0] for line in conversations.splitlines()[3:] if line and not line.startswith(" ")]
    assert names == ["bfcl:multi_turn_base", "bfcl:multi_turn_miss_func", "bfcl:multi_turn_miss_param",
                     "bfcl:multi_turn_long_context", "mini-mt", "mini-mt:LANG[,LANG...]", "jsonl:PATH"]
    assert "(pg.run;" in conversations and "docs/conversations.md" in conversations
    assert main(["datasets", "--bfcl-data", "/nowhere"]) == 0
    out = capsys.readouterr().out
    assert "bfcl:multi_turn_<...>" in out and "not available here" in out and "mini-mt" in out


@pytest.mark.parametrize("command", ["run", "render", "score-file"])
def test_run_and_render_help_name_the_conversation_datasets(command: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "bfcl:multi_turn_base (_miss_func, _miss_param, _long_context), mini-mt, mini-mt:de,ja" in text
    assert "promptgrid datasets lists them" in text and "mini, mini:de,ja" in text


def test_export_batch_help_names_both_kinds_and_the_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    """export-batch takes conversation datasets too, a round per export (test_batch_rounds.py)."""
    with pytest.raises(SystemExit):
        main(["export-batch", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    dataset_help = text[text.index("--dataset DS single-turn"):text.index("--bfcl-data PATH bfcl-eval")]
    assert "single-turn: mini" in dataset_help and "conversations: bfcl:multi_turn_base" in dataset_help
    assert "exported in rounds" in text

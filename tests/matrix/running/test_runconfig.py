"""Run config YAML: values, defaults, and errors that name file, line and key."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from promptgrid.matrix.cli import build_parser
from promptgrid.matrix.cli.run import build_config
from promptgrid.matrix.running.config import RunError, default_run_dir, load_run_config, model_params

GOOD = """\
grid: bfcl_v4
dataset: mini
repeats: 2
limit: 3
max_cost: 1.5
defaults:
  concurrency: 4
  params: {max_tokens: 256}
models:
  - openai/gpt-4o-mini
  - name: openai/local-vllm
    api_base: http://localhost:8000/v1
    api_key_env: VLLM_KEY
    params: {temperature: 0.2, seed: 7}
    rpm: 600
    timeout: 30
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "run.yaml"
    p.write_text(text)
    return p


def args_for(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *argv])


def test_good_config_and_flags_override(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    cfg = build_config(args_for(str(path)))
    assert cfg.grid == "bfcl_v4" and cfg.dataset == "mini" and cfg.repeats == 2 and cfg.limit == 3
    assert cfg.max_cost == 1.5
    a, b = cfg.models
    assert a.name == "openai/gpt-4o-mini" and a.concurrency == 4
    assert a.params == {"temperature": 0.7, "max_tokens": 256}  # repeats > 1: sampling default
    assert b.params == {"temperature": 0.2, "seed": 7, "max_tokens": 256}
    assert b.api_base == "http://localhost:8000/v1" and b.api_key_env == "VLLM_KEY" and b.rpm == 600
    assert b.timeout == 30
    cfg = build_config(args_for(str(path), "--temperature", "0", "--concurrency", "2", "--limit", "1"))
    assert all(m.params["temperature"] == 0 and m.concurrency == 2 for m in cfg.models) and cfg.limit == 1
    assert "api_key" not in str(cfg.to_dict()).replace("api_key_env", "")


def test_flags_only() -> None:
    cfg = build_config(args_for("bfcl_v4", "--dataset", "mini", "--model", "local/smollm2-135m", "--seed", "3"))
    assert cfg.run_dir == Path("runs/bfcl_v4__mini")
    (m,) = cfg.models
    assert m.concurrency == 1 and m.params == {"temperature": 0.0, "max_tokens": 512, "seed": 3}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("grid: bfcl_v4\ndataset: mini\nmodels: [openai/x]\nrepeat: 2\n",
         r"run.yaml:4: repeat: unknown key. Did you mean 'repeats'\?"),
        ("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    api_key: sk-123\n",
         r"run.yaml:5: models\[0\].api_key: never put a key in a config file"),
        ("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    concurency: 3\n",
         r"run.yaml:5: models\[0\].concurency: unknown key. Did you mean 'concurrency'\?"),
        ("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    concurrency: 0\n",
         r"run.yaml:5: models\[0\].concurrency: must be >= 1, got 0"),
        ("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    params: {max_tokens: many}\n",
         r"run.yaml:5: models\[0\].params.max_tokens: expected an integer, got str 'many'"),
        ("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    params: {timeout: 3}\n",
         r"params.timeout: not a generation parameter; write timeout: on the model"),
        ("grid: bfcl_v4\ndataset: mini\nmodels: []\n", r"run.yaml:3: models: empty list"),
        ("grid: bfcl_v4\nmodels: [openai/x]\n", r"run.yaml:1: dataset: missing"),
        ("grid: bfcl_v4\ndataset: mini\nmodels: [openai/x, openai/x]\n", r"model 'openai/x' is listed twice"),
        ("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    api_key_env: sk-abc-123\n",
         r"must be the NAME of an environment variable"),
        ("grid: [\n", r"run.yaml:\d+: invalid YAML"),
        ("grid: bfcl_v4\ndataset: mini\nmax_cost: -1\nmodels: [openai/x]\n", r"run.yaml:3: max_cost: must be > 0"),
        ("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    batch: {max_request: 5}\n",
         r"run.yaml:5: models\[0\].batch.max_request: unknown key. Did you mean 'max_requests'\?"),
        ("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    batch: {max_bytes: 0}\n",
         r"run.yaml:5: models\[0\].batch.max_bytes: must be >= 1, got 0"),
        ("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    batch: {role_arn: [a]}\n",
         r"run.yaml:5: models\[0\].batch.role_arn: expected a string"),
        ("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    batch: 3\n",
         r"run.yaml:5: models\[0\].batch: expected a mapping"),
    ],
)
def test_errors_name_file_line_key(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(RunError, match=match):
        load_run_config(write(tmp_path, text))


def test_paths_relative_to_the_config(tmp_path: Path) -> None:
    path = write(tmp_path, "grid: my_grid.yaml\ndataset: jsonl:cases.jsonl\nrun_dir: out/r1\nmodels: [fake/auto]\n")
    data = load_run_config(path)
    assert data["grid"] == str(tmp_path / "my_grid.yaml")
    assert data["dataset"] == f"jsonl:{tmp_path / 'cases.jsonl'}"
    assert data["run_dir"] == str(tmp_path / "out/r1")


def test_cli_errors_without_dataset_or_model(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="no dataset"):
        build_config(args_for("bfcl_v4", "--model", "fake/auto"))
    with pytest.raises(RunError, match="no model"):
        build_config(args_for("bfcl_v4", "--dataset", "mini"))
    with pytest.raises(RunError, match="repeats must be >= 1"):
        build_config(args_for("bfcl_v4", "--dataset", "mini", "--model", "fake/auto", "--repeats", "0"))


def test_defaults() -> None:
    assert model_params({}, 1) == {"temperature": 0.0, "max_tokens": 512}
    assert model_params({"temperature": 0}, 5) == {"temperature": 0, "max_tokens": 512}
    assert default_run_dir("path/to/g.yaml", "jsonl:/x/y z.jsonl").name == "g__jsonl_x_y_z.jsonl"


@pytest.mark.parametrize(("flags", "match"), [
    (["--temperature", "nan"], r"temperature must be a finite number, got nan \(--temperature\)"),
    (["--temperature", "inf"], r"temperature must be a finite number, got inf \(--temperature\)"),
    (["--temperature", "-0.5"], r"temperature must be >= 0, got -0.5 \(--temperature\)"),
    (["--concurrency", "0"], r"concurrency must be >= 1, got 0 \(--concurrency\)"),
    (["--concurrency", "-2"], r"concurrency must be >= 1, got -2 \(--concurrency\)"),
    (["--timeout", "-1"], r"timeout must be > 0, got -1.0 \(--timeout\)"),
    (["--timeout", "nan"], r"timeout must be a finite number, got nan \(--timeout\)"),
    (["--max-cost", "nan"], r"max_cost must be a finite number, got nan \(--max-cost\)"),
    (["--max-cost", "-1"], r"max_cost must be > 0, got -1.0 \(--max-cost\)"),
    (["--rpm", "-5"], r"rpm must be > 0, got -5.0 \(--rpm\)"),
    (["--tpm", "inf"], r"tpm must be a finite number, got inf \(--tpm\)"),
    (["--max-retries", "-1"], r"max_retries must be >= 0, got -1 \(--max-retries\)"),
    (["--limit", "0"], r"limit must be >= 1, got 0 \(--limit\)"),
    (["--max-tokens", "0"], r"max_tokens must be >= 1, got 0 \(--max-tokens\)"),
])
def test_out_of_range_options_name_the_option(flags: list[str], match: str) -> None:
    with pytest.raises(RunError, match=match) as info:
        build_config(args_for("bfcl_v4", "--dataset", "mini", "--model", "fake/auto", *flags))
    assert "\n" not in str(info.value)


def test_library_options_are_checked_too() -> None:
    """pg.run reaches the same checks through session.build_config (wrong types included)."""
    from promptgrid.matrix.running.session import build_config as build

    for kwargs, match in [({"params": {"temperature": float("nan")}}, "temperature must be a finite number"),
                          ({"concurrency": 0}, "concurrency must be >= 1"),
                          ({"timeout": float("inf")}, "timeout must be a finite number"),
                          ({"max_cost": "lots"}, "max_cost must be a number, got str 'lots'"),
                          ({"repeats": 1.5}, "repeats must be an integer, got float 1.5")]:
        with pytest.raises(RunError, match=match):
            build("bfcl_v4", "mini", models=["fake/auto"], **kwargs)


@pytest.mark.parametrize(("value", "match"), [
    (".nan", r"run.yaml:5: models\[0\].params.temperature: must be a finite number, got nan"),
    (".inf", r"run.yaml:5: models\[0\].params.temperature: must be a finite number, got inf"),
    ("-1", r"run.yaml:5: models\[0\].params.temperature: must be >= 0, got -1"),
])
def test_config_file_refuses_non_finite_numbers(tmp_path: Path, value: str, match: str) -> None:
    text = f"grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/x\n    params: {{temperature: {value}}}\n"
    with pytest.raises(RunError, match=match):
        load_run_config(write(tmp_path, text))


LAUGHS = "grid: bfcl_v4\ndataset: mini\nmodels: [fake/auto]\n" + "\n".join(
    [f"a: &a [{', '.join(['lol'] * 9)}]"]
    + [f"{k}: &{k} [{', '.join([f'*{p}'] * 9)}]" for p, k in zip("abcdefgh", "bcdefghi", strict=True)]
) + "\n"


@pytest.mark.parametrize(("text", "match"), [
    (LAUGHS, r"run.yaml: aliases \(\*name\) would expand the file to [\d,]+ values"),
    ("grid: bfcl_v4\ndataset: mini\nmodels: !!python/name:os.system\n", r"run.yaml:3: tag !!python/name:os.system"),
    ("grid: bfcl_v4\ndataset: mini\n? {a: 1}\n: x\n", r"run.yaml:3: a key must be a plain string"),
    ("grid: bfcl_v4\ndataset: mini\nmodels: &m [*m]\n", r"run.yaml:3: an alias refers to a value that contains it"),
])
def test_hostile_config_yaml_is_refused_fast(tmp_path: Path, text: str, match: str) -> None:
    path = write(tmp_path, text)
    start = time.perf_counter()
    with pytest.raises(RunError, match=match):
        build_config(args_for(str(path)))  # through is_run_config, as `promptgrid run CONFIG.yaml` does
    assert time.perf_counter() - start < 1.0

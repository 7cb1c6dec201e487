"""The run options are declared once (``config.RunOptions``): the flags of ``run`` and ``export-batch``, the keywords
of ``pg.run``/``pg.arun``/``pg.export_batch``, the run config's keys and the checks all come from that declaration."""

from __future__ import annotations

import argparse
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict, Unpack

import promptgrid as pg
from promptgrid.matrix import api
from promptgrid.matrix import cli as cli_module
from promptgrid.matrix.cli import build_parser
from promptgrid.matrix.cli.run import build_config as cli_build_config
from promptgrid.matrix.running import config, planning
from promptgrid.matrix.running.config import GOALS, PlanOptions, RunConfig, RunError, RunOptions
from promptgrid.matrix.running.options import (
    Option,
    add_flags,
    check_keywords,
    declared,
    docs,
    from_args,
    takes_options,
)
from promptgrid.matrix.running.session import build_config

# The flags of `run` and `export-batch` that are not run options (they say how this invocation behaves).
RUN_ONLY_FLAGS = {"-h", "--help", "--dataset", "--dry-run", "--batch", "--no-wait", "--poll", "--no-progress",
                  "--retry-errors", "--append"}
EXPORT_ONLY_FLAGS = {"-h", "--help", "--dataset", "--model", "-o", "--output", "--body-model", "--retry-errors",
                     "--grid", "--append"}


def _subparser(name: str, parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def _flags(options: type) -> dict[str, str]:
    """flag -> dest, as the declaration says (a mapping option's keys: their own dest)."""
    out = {}
    for name, option in declared(options).items():
        if option.flag:
            out[option.flag] = name
        out.update({sub.flag: key for key, sub in option.keys.items() if sub.flag})
    return out


def _parser_flags(parser: argparse.ArgumentParser, leave_out: set[str]) -> dict[str, str]:
    return {flag: a.dest for a in parser._actions for flag in a.option_strings if flag not in leave_out}


def test_the_cli_flags_are_the_declared_ones() -> None:
    assert _parser_flags(_subparser("run"), RUN_ONLY_FLAGS) == _flags(RunOptions)
    assert _parser_flags(_subparser("export-batch"), EXPORT_ONLY_FLAGS) == _flags(PlanOptions)
    assert set(declared(PlanOptions)) < set(declared(RunOptions))  # export-batch takes a part of run's


def test_the_keywords_are_the_declared_ones() -> None:
    for function, options in ((pg.run, RunOptions), (pg.arun, RunOptions), (pg.export_batch, PlanOptions)):
        hints = typing.get_type_hints(function, localns={"ExportSummary": object}, include_extras=True)
        assert hints["options"] == Unpack[options], function.__name__
        parameters = inspect.signature(function).parameters
        for name in declared(options):
            assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY and parameters[name].default is None
            assert f"``{name}``" in (function.__doc__ or ""), f"{function.__name__}'s docstring lacks {name}"
    # the invocation keywords are their own; none is also an option
    explicit = set(pg.run.__kwdefaults__ or {})
    assert explicit == {"retry_errors", "append", "progress", "batch", "batch_wait", "batch_poll_s"}
    assert not explicit & set(declared(RunOptions))


def test_the_run_config_keys_are_the_declared_ones() -> None:
    file_keys = [k for k, o in declared(RunOptions).items() if o.file]
    assert config._TOP_KEYS == ("grid", "dataset", *file_keys, "defaults")
    assert {"goal", "budget", "rounds", "limit", "models", "max_jobs"} <= set(file_keys)
    # a model's keys in a file are options for every model on the command line; the others are RunConfig fields
    fields = {f for f in RunConfig.__dataclass_fields__}
    for name, option in declared(RunOptions).items():
        if option.model:
            assert not option.file and name in config._MODEL_KEYS
        elif name != "models":
            assert name in fields, name


def test_every_option_has_a_docstring() -> None:
    assert all(docs(RunOptions).values()), [k for k, v in docs(RunOptions).items() if not v]


def test_a_field_added_to_the_declaration_is_a_flag_a_keyword_and_a_run_config_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Extended(RunOptions, total=False):
        colour: Annotated[int | None, Option("--colour", "N", bounds={"integer": True, "minimum": 1}, file=True,
                                             help="how colourful")]
        """How colourful the run is."""

    # argparse: the `run` command's parser, made by build_parser from the declaration
    monkeypatch.setattr(cli_module, "RunOptions", Extended)
    args = build_parser().parse_args(["run", "bfcl_v4", "--colour", "3", "--limit", "2"])
    assert from_args(args, Extended) == {"colour": 3, "limit": 2}
    # keywords: the signature and the docstring of a function that takes them
    @takes_options(Extended, "Options:")
    def run(grid: str, **options: Unpack[Extended]) -> dict[str, Any]:
        """Run."""
        check_keywords(options, Extended, "run()")
        return dict(options)

    assert run("g", colour=2) == {"colour": 2}
    assert inspect.signature(run).parameters["colour"].default is None
    assert "- ``colour`` (``--colour``; ``colour:`` in a run config): How colourful the run is." in (run.__doc__ or "")
    with pytest.raises(RunError, match="Did you mean 'colour'"):
        run("g", color=2)
    # the run config: a top-level key, checked with the declared bounds
    monkeypatch.setattr(config, "RunOptions", Extended)
    monkeypatch.setattr(config, "_TOP_KEYS", config._top_keys(Extended))
    path = tmp_path / "run.yaml"
    path.write_text("grid: bfcl_v4\ndataset: mini\ncolour: 4\nmodels: [fake/auto]\n")
    assert config.load_run_config(path)["colour"] == 4
    path.write_text("grid: bfcl_v4\ndataset: mini\ncolour: 0\nmodels: [fake/auto]\n")
    with pytest.raises(RunError, match=r"run.yaml:3: colour: must be >= 1, got 0"):
        config.load_run_config(path)


def test_a_declaration_without_option_is_refused() -> None:
    class Bad(TypedDict, total=False):
        plain: int

    with pytest.raises(TypeError, match="Bad.plain: declare it as Annotated"):
        declared(Bad)


# --------------------------------------------------------------------------- goal, budget, rounds


def _cli(*argv: str, command: str = "run") -> RunConfig:
    return cli_build_config(build_parser().parse_args([command, "bfcl_v4", "--dataset", "mini", "--model",
                                                       "fake/auto", *argv]))


def test_goal_budget_rounds_from_flags_and_the_seed_seeds_the_planner() -> None:
    cfg = _cli("--goal", "best-worst", "--budget", "50", "--rounds", "5", "--seed", "7")
    assert (cfg.goal, cfg.budget, cfg.rounds, cfg.plan_seed) == ("best-worst", 50, 5, 7)
    assert cfg.to_dict()["goal"] == "best-worst" and cfg.to_dict()["plan_seed"] == 7  # recorded in run.json
    cfg = _cli("--goal", "uniform", "--budget", "3")
    assert (cfg.goal, cfg.budget, cfg.rounds, cfg.plan_seed) == ("uniform", 3, None, 0)
    plain = _cli()
    assert (plain.goal, plain.budget, plain.rounds, plain.plan_seed) == (None, None, None, 0)
    assert _cli("--seed", "3").plan_seed == 3


def test_export_batch_takes_them_too() -> None:
    args = build_parser().parse_args(["export-batch", "runs/x", "--model", "hosted_vllm/m", "--goal", "distribution",
                                      "--budget", "9", "--rounds", "3"])
    assert from_args(args, PlanOptions) == {"goal": "distribution", "budget": 9, "rounds": 3}


def test_an_unknown_goal_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "bfcl_v4", "--goal", "best"])
    assert "invalid choice: 'best'" in capsys.readouterr().err


@pytest.mark.parametrize(("options", "match"), [
    ({"budget": 10}, r"budget 10 \(--budget\) .*give --goal"),
    ({"goal": "uniform"}, r"goal uniform \(--goal\) .*give --budget"),
    ({"rounds": 3}, r"rounds 3 \(--rounds\) applies to an adaptive run: give --goal"),
    ({"rounds": 3, "budget": 4}, r"budget 4 \(--budget\) .*give --goal"),
    ({"goal": "best_worst", "budget": 5}, r"goal 'best_worst' is not one of best-worst, distribution, uniform "
                                          r"\(--goal\)\. Did you mean 'best-worst'\?"),
    ({"goal": 3, "budget": 5}, r"goal 3 is not one of"),
    ({"goal": "uniform", "budget": 0}, r"budget must be >= 1, got 0 \(--budget\)"),
    ({"goal": "uniform", "budget": 2.5}, r"budget must be an integer, got float 2.5 \(--budget\)"),
    ({"goal": "uniform", "budget": 5, "rounds": 0}, r"rounds must be >= 1, got 0 \(--rounds\)"),
])
def test_the_adaptive_options_are_checked(options: dict[str, Any], match: str) -> None:
    with pytest.raises(RunError, match=match):
        build_config("bfcl_v4", "mini", models=["fake/auto"], **options)


def test_the_checks_hold_for_the_run_config_and_the_flags_over_it(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("grid: bfcl_v4\ndataset: mini\ngoal: distribution\nbudget: 40\nmodels: [fake/auto]\n")
    cfg = build_config(path)
    assert (cfg.goal, cfg.budget, cfg.rounds) == ("distribution", 40, None)
    assert build_config(path, budget=20, rounds=4, params={"seed": 2}).budget == 20  # options win
    path.write_text("grid: bfcl_v4\ndataset: mini\nbudget: 40\nmodels: [fake/auto]\n")
    with pytest.raises(RunError, match="give --goal"):
        build_config(path)
    assert build_config(path, goal="uniform").goal == "uniform"
    path.write_text("grid: bfcl_v4\ndataset: mini\ngoal: bestworst\nbudget: 4\nmodels: [fake/auto]\n")
    with pytest.raises(RunError, match=r"run.yaml:3: goal: 'bestworst' is not one of best-worst, distribution, "
                                       r"uniform\. Did you mean 'best-worst'\?"):
        config.load_run_config(path)
    path.write_text("grid: bfcl_v4\ndataset: mini\ngoal: uniform\nrounds: 0\nmodels: [fake/auto]\n")
    with pytest.raises(RunError, match=r"run.yaml:4: rounds: must be >= 1, got 0"):
        config.load_run_config(path)


def test_the_goals_are_the_planners() -> None:
    assert GOALS == planning.GOALS
    assert typing.get_args(typing.get_type_hints(RunOptions)["goal"]) == (typing.Literal[GOALS], type(None))


# --------------------------------------------------------------------------- keywords


@pytest.mark.parametrize(("call", "match"), [
    (lambda: pg.run("bfcl_v4", "mini", models=["fake/auto"], limt=2), r"run\(\) got an unknown option 'limt'\. "
                                                                     r"Did you mean 'limit'\?"),
    (lambda: pg.run("bfcl_v4", "mini", models=["fake/auto"], retry_error=True), "Did you mean 'retry_errors'"),
    (lambda: pg.run("bfcl_v4", "mini", models=["fake/auto"], budjet=3), "Did you mean 'budget'"),
    (lambda: pg.export_batch("runs/x", "hosted_vllm/m", "out.jsonl", concurrency=2),
     r"export_batch\(\) does not take 'concurrency': it is an option of run\(\) only"),
    (lambda: pg.export_batch("runs/x", "hosted_vllm/m", "out.jsonl", goall="uniform"), "Did you mean 'goal'"),
])
def test_an_unknown_keyword_names_the_closest(call: Callable[[], Any], match: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunError, match=match):
        call()
    assert not (tmp_path / "runs").exists()  # refused before anything was made


def test_arun_checks_its_keywords_too() -> None:
    import asyncio

    with pytest.raises(RunError, match=r"arun\(\) got an unknown option 'modles'\. Did you mean 'models'\?"):
        asyncio.run(pg.arun("bfcl_v4", "mini", modles=["fake/auto"]))


# --------------------------------------------------------------------------- built once


def test_a_built_config_builds_to_itself() -> None:
    """``promptgrid run`` builds the RunConfig once and passes it to ``api.run``, which derives the same one from its
    fields (every field: --max-jobs was once lost on the way)."""
    cfg = _cli("--max-jobs", "1000", "--goal", "uniform", "--budget", "5", "--rounds", "2", "--seed", "4",
               "--limit", "3", "--retry-after-cap", "7", "--max-cost", "2", "--case", "a", "--variant", "v")
    assert build_config(cfg) == cfg
    assert build_config(cfg, budget=6).budget == 6


def test_every_run_flag_reaches_the_config() -> None:
    cfg = _cli("--api-base", "http://h1:8000/v1", "--api-base", "http://h2:8000/v1", "--concurrency", "3",
               "--rpm", "60", "--tpm", "1000", "--timeout", "9", "--max-retries", "2", "--temperature", "0.5",
               "--max-tokens", "64", "--repeats", "2", "--store", "ts.sqlite3", "--run-dir", "out",
               "--bfcl-data", "bd", "--constraints", "none")
    (m,) = cfg.models
    assert m.api_bases == ("http://h1:8000/v1", "http://h2:8000/v1") and m.concurrency == 3 and m.rpm == 60
    assert m.tpm == 1000 and m.timeout == 9 and m.params == {"temperature": 0.5, "max_tokens": 64}
    assert cfg.max_retries == 2 and cfg.repeats == 2 and cfg.translation_store == "ts.sqlite3"
    assert cfg.run_dir == Path("out") and cfg.bfcl_data == "bd"


def test_flags_of_a_command_use_its_own_help() -> None:
    parser = argparse.ArgumentParser()
    add_flags(parser, PlanOptions, "export-batch", only=("max_jobs",))
    (action,) = [a for a in parser._actions if a.dest == "max_jobs"]
    assert action.help == declared(PlanOptions)["max_jobs"].help_for["export-batch"]
    assert api.export_batch.__doc__ and "``goal``" in api.export_batch.__doc__

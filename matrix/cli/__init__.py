"""The ``promptgrid`` command line.

Each subcommand's handler is a function below that imports the module doing
the work only when that subcommand runs, so ``promptgrid render`` never
imports litellm or matplotlib. Handlers call the library
(``promptgrid.matrix.api`` and the modules behind it), print, and return the
exit code. User errors (``PromptgridError``) print one message, no
traceback, and exit with the error's ``exit_code``.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import gc
import os
import sys
from collections.abc import Sequence

from promptgrid.display import escape_controls
from promptgrid.errors import PromptgridError
from promptgrid.matrix.running.config import PlanOptions, RunOptions
from promptgrid.matrix.running.options import add_flags
from promptgrid.providers import quiet_dependency_warnings

__all__ = ["build_parser", "main"]


# --------------------------------------------------------------------------- handlers
# Each imports the module that does the work only when its command runs, so that
# `promptgrid render` never imports litellm and `promptgrid run` never imports matplotlib.

def _grids(args: argparse.Namespace) -> int:
    from .inspect import cmd_grids

    return cmd_grids(args)


def _datasets(args: argparse.Namespace) -> int:
    from .inspect import cmd_datasets

    return cmd_datasets(args)


def _grid_show(args: argparse.Namespace) -> int:
    from .inspect import cmd_grid_show

    return cmd_grid_show(args)


def _render(args: argparse.Namespace) -> int:
    from .inspect import cmd_render

    return cmd_render(args)


def _score_file(args: argparse.Namespace) -> int:
    from .score import cmd_score_file

    return cmd_score_file(args)


def _run(args: argparse.Namespace) -> int:
    from .run import cmd_run

    return cmd_run(args)


def _score(args: argparse.Namespace) -> int:
    from .score import cmd_score

    return cmd_score(args)


def _export(args: argparse.Namespace) -> int:
    from .run import cmd_export

    return cmd_export(args)


def _status(args: argparse.Namespace) -> int:
    from .run import cmd_status

    return cmd_status(args)


def _export_batch(args: argparse.Namespace) -> int:
    from .batchfiles import cmd_export_batch

    return cmd_export_batch(args)


def _import_batch(args: argparse.Namespace) -> int:
    from .batchfiles import cmd_import_batch

    return cmd_import_batch(args)


def _report(args: argparse.Namespace) -> int:
    from .report import cmd_report

    return cmd_report(args)


def _compare(args: argparse.Namespace) -> int:
    from .report import cmd_compare

    return cmd_compare(args)


def _translate(args: argparse.Namespace) -> int:
    from .translate import cmd_translate

    return cmd_translate(args)


def _check_translations(args: argparse.Namespace) -> int:
    from .translate import cmd_check_translations

    return cmd_check_translations(args)


def _check_translation(args: argparse.Namespace) -> int:
    from .translate import cmd_check_translation

    return cmd_check_translation(args)


# --------------------------------------------------------------------------- parser


def _add_endpoint_options(p: argparse.ArgumentParser, command: str) -> None:
    """--api-base as ``promptgrid run`` declares it, and --api-key-env: the server of a ``--backend llm:MODEL``."""
    add_flags(p, PlanOptions, command, only=("api_base",))
    flag = "--back-translate" if command == "check-translations" else "--backend"
    p.add_argument("--api-key-env", default=None, metavar="VAR",
                   help=f"with {flag} llm:MODEL: the NAME of the environment variable holding the server's key "
                   "(as api_key_env in a run config); never the key itself")


_SINGLE_TURN_HELP = "single-turn: mini, mini:de,ja, bfcl:<category>, bfcl:format_sensitivity, jsonl:PATH"
_CONVERSATIONS_HELP = ("conversations: bfcl:multi_turn_base (_miss_func, _miss_param, _long_context), mini-mt, "
                       "mini-mt:de,ja, jsonl:PATH of conversations")


def _add_dataset_options(p: argparse.ArgumentParser, required: bool = True, bfcl_data: bool = True,
                         conversations: bool = True) -> None:
    """--dataset, and the run option --bfcl-data (``bfcl_data=False``: the command adds it with the others);
    ``conversations``: the command takes conversation datasets too (its help names them)."""
    forms = f"{_SINGLE_TURN_HELP}; {_CONVERSATIONS_HELP}" if conversations else _SINGLE_TURN_HELP
    p.add_argument("--dataset", required=required, metavar="DS",
                   help=f"{forms} (promptgrid datasets lists them)")
    if bfcl_data:
        add_flags(p, PlanOptions, only=("bfcl_data",))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="promptgrid",
        description="Measure how function-calling accuracy changes with the form and language of the prompt.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("grids", help="list built-in grids")
    p.set_defaults(handler=_grids)

    p = sub.add_parser("datasets", help="list the datasets: single-turn ones and conversations")
    add_flags(p, PlanOptions, only=("bfcl_data",))
    p.set_defaults(handler=_datasets)

    p = sub.add_parser("grid", help="inspect a grid")
    gsub = p.add_subparsers(dest="grid_command", metavar="ACTION", required=True)
    g = gsub.add_parser("show", help="list a grid's variants")
    g.add_argument("grid", help="built-in grid name or path to a grid YAML")
    g.add_argument("--json", action="store_true", help="print a JSON array")
    g.set_defaults(handler=_grid_show)

    p = sub.add_parser("render", help="render the prompts of a grid over a dataset, or a run's results as stored",
                       description="Print the prompts each variant of GRID sends for the cases of --dataset. For a "
                       "conversation dataset (bfcl:multi_turn_*, mini-mt, a jsonl: file of conversations), each "
                       "conversation in full as each variant sends it, along the ground truth's calls and their "
                       "results. Given a run's directory instead of GRID, its results as they happened, rebuilt "
                       "from the store (nothing is sent): a single-turn job's prompt, the model's answer and its "
                       "verdict; a conversation episode per turn: the user message, each answer of the model, the "
                       "calls it decoded to and their outputs, and the turn's verdict (--model, --variant, --case, "
                       "--repeat, --limit choose them; --dataset only says where to read the run's cases if they "
                       "moved).")
    p.add_argument("grid", metavar="GRID|RUN_DIR")
    _add_dataset_options(p, required=False)
    p.add_argument("--variant", action="append", default=[], metavar="ID")
    p.add_argument("--case", action="append", default=[], metavar="ID")
    p.add_argument("--model", action="append", default=[], metavar="M", help="RUN_DIR: this model's results only")
    p.add_argument("--repeat", action="append", default=[], type=int, metavar="R",
                   help="RUN_DIR: this repeat's results only")
    add_flags(p, PlanOptions, only=("limit",))
    p.add_argument("--jsonl", action="store_true",
                   help="one JSON object per line, with the tools / response_format / grammar of native and "
                   "constrained variants (default: readable text)")
    p.add_argument("--store", metavar="PATH", default=None, help="translation store to read")
    p.set_defaults(handler=_render)

    from .score import SCORE_FILE_INPUT

    p = sub.add_parser("score-file", help="score model responses from a JSONL file", description=SCORE_FILE_INPUT,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="INPUT.jsonl", help="the responses, one JSON object a line; - for standard input")
    _add_dataset_options(p)
    p.add_argument("--output", metavar="OUT.jsonl", default=None, help="default: standard output")
    p.add_argument("--grid", default=None, help="grid to resolve variant ids against (default: any canonical id)")
    p.add_argument("--variant", default=None, metavar="ID",
                   help="variant of the lines that name none (bfcl-eval's result lines outside format_sensitivity)")
    p.add_argument("--strict-arguments", action="store_true",
                   help="multi-turn datasets: refuse calls whose arguments do not validate against the function docs "
                        "(default: the method decides, as in bfcl-eval)")
    p.set_defaults(handler=_score_file)

    p = sub.add_parser("run", help="run models x variants x cases (or conversations)",
                       description="Send every (model, variant, case, repeat) not yet answered in the run directory, "
                       "score and store the answers; running it again resumes. With a conversation dataset "
                       "(bfcl:multi_turn_*, mini-mt, a jsonl: file of conversations; promptgrid datasets lists "
                       "them) each (model, variant, conversation, repeat) is an episode taken through its user "
                       "turns, the calls run against stateful APIs (docs/conversations.md).")
    p.add_argument("grid", help="grid name/path, or a run CONFIG.yaml")
    _add_dataset_options(p, required=False, bfcl_data=False)
    add_flags(p, RunOptions, "run")
    p.add_argument("--dry-run", action="store_true", help="print jobs, tokens and cost; call nothing")
    p.add_argument("--batch", action="store_true",
                   help="send the new calls through each model's batch API (OpenAI-compatible files + batches: "
                        "openai/, azure/, hosted_vllm/; Bedrock batch inference) at the batch price; results within "
                        "the provider's window (24 h). Re-running the same command, or promptgrid status RUN_DIR, "
                        "collects; a killed run resumes without sending a job twice (single-turn datasets: a "
                        "conversation's steps depend on the answers before them)")
    p.add_argument("--no-wait", action="store_true",
                   help="with --batch: return once the batches are submitted instead of polling until they end")
    p.add_argument("--poll", type=float, default=30.0, metavar="SECONDS",
                   help="with --batch: seconds between polls of the batches (default 30)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--retry-errors", action="store_true",
                   help="send again the calls that ended in an error in an earlier run (a conversation: play again "
                        "the episodes a step's error ended); errors are final otherwise")
    p.add_argument("--append", action="store_true",
                   help="combine another grid or dataset into an existing --run-dir on purpose (refused otherwise)")
    p.set_defaults(handler=_run)

    p = sub.add_parser("score", help="re-score a run offline")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.set_defaults(handler=_score)

    p = sub.add_parser("export", help="export a run")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--jsonl", action="store_true", help="one JSON object per job (the default)")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="default: standard output")
    p.set_defaults(handler=_export)

    p = sub.add_parser("report", help="format-sensitivity report of a run")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--out", default=None, metavar="DIR", help="write report files here (default: RUN_DIR/report)")
    p.add_argument("--baseline", default=None, metavar="VARIANT",
                   help="variant to test the others against: its id, or a label the report or the run's table "
                        "shows (default: the all-defaults variant)")
    p.add_argument("--format", default=None, choices=["md", "csv", "latex", "html", "json", "all"],
                   help="files to write (default: print the table only, unless --out is given: all)")
    p.add_argument("--episode", action="append", default=None, metavar="CONVERSATION[#REPEAT]",
                   help="conversation runs: show this conversation's episodes in conversations.html (repeatable; "
                        "default: per variant its first failed and first valid episode)")
    p.add_argument("--transcripts", type=int, default=None, metavar="N",
                   help="conversation runs: at most N transcripts in conversations.html (default 12; 0: none)")
    p.set_defaults(handler=_report)

    p = sub.add_parser("status", help="where a run directory stands; polls and collects its batches",
                       epilog="Exit code: 0 when every live batch was polled; 1 when one or more could not be "
                              "(batch API down or answering garbage: one line each on stderr, polled again next "
                              "time); 2 when the run directory is unusable.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--no-poll", action="store_true", help="only read the store (no provider call)")
    p.add_argument("--wait", action="store_true", help="poll until every batch is collected")
    p.add_argument("--poll", type=float, default=30.0, metavar="SECONDS",
                   help="with --wait: seconds between polls (default 30)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=_status)

    p = sub.add_parser("export-batch", help="write a model's new calls as an OpenAI batch file (vllm run-batch)",
                       description="Write the calls of MODEL in RUN_DIR that have no result yet as OpenAI batch "
                       "request lines (what vllm run-batch reads), one per call, its custom_id the job key. Store "
                       "the answers with promptgrid import-batch RUN_DIR RESULTS.jsonl. The run is RUN_DIR's "
                       "latest config (run.json), or the one --grid and --dataset make (this starts RUN_DIR). A "
                       "conversation dataset is exported in rounds: each export writes the next step of every "
                       "episode that needs one (the first round's --grid, --dataset and options are recorded for the "
                       "next ones); import its answers, "
                       "then export again, until nothing is left to export.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--model", required=True, metavar="M",
                   help="litellm model string of the run (hosted_vllm/NAME, openai/NAME, ...)")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="default: standard output")
    p.add_argument("--body-model", default=None, metavar="NAME",
                   help="the model field of every request (the name the vLLM server serves; default: M without "
                        "its provider prefix)")
    p.add_argument("--retry-errors", action="store_true",
                   help="write again the calls that ended in an error (errors are final otherwise)")
    p.add_argument("--grid", default=None, metavar="GRID",
                   help="grid name/path or run CONFIG.yaml: start RUN_DIR from these options, as promptgrid run "
                        "--run-dir RUN_DIR does")
    _add_dataset_options(p, required=False, bfcl_data=False)
    add_flags(p, PlanOptions, "export-batch")
    p.add_argument("--append", action="store_true",
                   help="with --grid: combine another grid or dataset into RUN_DIR on purpose")
    p.set_defaults(handler=_export_batch)

    p = sub.add_parser("import-batch", help="store the answers of an OpenAI batch output file",
                       description="Store the result lines of an OpenAI batch output file (vllm run-batch -o FILE) "
                       "for requests promptgrid export-batch wrote from RUN_DIR. The whole file is checked first: "
                       "a line that does not parse, a custom_id RUN_DIR did not export, or one given twice stores "
                       "nothing (exit 2). Importing the same file again changes nothing.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("results", metavar="RESULTS.jsonl")
    p.set_defaults(handler=_import_batch)

    p = sub.add_parser("compare", help="compare two runs of the same grid")
    p.add_argument("run_a", metavar="RUN_DIR_A")
    p.add_argument("run_b", metavar="RUN_DIR_B")
    p.add_argument("--out", default=None, metavar="DIR")
    p.set_defaults(handler=_compare)

    p = sub.add_parser("translate", help="translate instructions and function descriptions")
    p.add_argument("--to", required=True, metavar="LANGS", help="comma-separated language codes")
    p.add_argument("--backend", required=True, metavar="B",
                   help="amazon | llm:MODEL (any model promptgrid run takes: llm:openai/gpt-4o-mini, "
                   "llm:openai/NAME with --api-base URL, llm:local/smollm2-135m, llm:fake/auto offline) | "
                   "catalog | catalog:PATH")
    p.add_argument("--what", default="all", choices=["instructions", "descriptions", "all"])
    p.add_argument("--dataset", default=None, metavar="DS")
    p.add_argument("--bfcl-data", metavar="PATH", default=None)
    p.add_argument("--store", default=None, metavar="PATH",
                   help="translation store (default: ~/.cache/promptgrid/translations.sqlite3): what is translated "
                   "is kept there as it comes back and not paid for again")
    p.add_argument("--region", default=None)
    p.add_argument("--formality", default=None, choices=["FORMAL", "INFORMAL"])
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds each request to the backend may take (default 60); timeouts are retried")
    _add_endpoint_options(p, "translate")
    # conversations (promptgrid.matrix.datasets._translate_conversations)
    p.add_argument("--conversations-out", default=None, metavar="FILE.jsonl",
                   help="translate the conversations of --dataset (bfcl:multi_turn_*, jsonl:PATH, mini-mt) and "
                   "write them as jsonl: records; --what instructions translates the user turns only")
    p.set_defaults(handler=_translate)

    p = sub.add_parser("check-translations", help="check shipped catalogs and stored translations")
    p.add_argument("--lang", action="append", default=[], metavar="L")
    p.add_argument("--store", default=None, metavar="PATH")
    p.add_argument("--back-translate", default=None, metavar="BACKEND",
                   help="also score back-translation similarity with this backend")
    _add_endpoint_options(p, "check-translations")
    # conversations (promptgrid.matrix.datasets._translate_conversations)
    p.add_argument("--dataset", action="append", default=[], metavar="DS",
                   help="check translated conversations turn by turn instead: conversation datasets holding the "
                   "English sources and their translations (mini-mt; bfcl:multi_turn_base --dataset jsonl:de.jsonl)")
    p.add_argument("--bfcl-data", metavar="PATH", default=None)
    p.set_defaults(handler=_check_translations)

    p = sub.add_parser("check-translation", help="check translations from a JSONL file")
    p.add_argument("--jsonl", required=True, metavar="FILE")
    p.set_defaults(handler=_check_translation)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if argv is None:  # the promptgrid command (tests call main with argv, and go on running)
        # The interpreter's last garbage collection at exit walks every object still alive (litellm's
        # modules: about 1 s) only to free memory the exit frees anyway: objects frozen are left out of it.
        atexit.register(gc.freeze)
    quiet_dependency_warnings()  # a server's malformed answer must not print pydantic's warnings and paths
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
        sys.stdout.flush()  # a full disk or device behind standard output is this command's error
    except PromptgridError as exc:
        print(f"promptgrid: error: {escape_controls(str(exc))}", file=sys.stderr)  # may quote model/server text
        return exc.exit_code
    except KeyboardInterrupt:
        print("promptgrid: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `promptgrid render ... | head`: the reader went away; not an error.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        return 0
    except OSError as exc:
        # Writing standard output failed (`> /dev/full`, a full disk, a closed terminal): one line, exit 2,
        # never a traceback. Errors naming a file are another command's problem: raised as they are.
        if exc.filename is not None or exc.errno not in _OUTPUT_ERRNOS:
            raise
        print(f"promptgrid: error: cannot write standard output: {exc.strerror or exc}.", file=sys.stderr)
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the buffered rest would fail again at exit
        except OSError:
            pass
        return 2
    return int(code or 0)


_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO})
"""Errors of writing a stream that the user's redirection chose (not a bug of promptgrid's)."""

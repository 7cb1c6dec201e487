"""promptgrid: how an LLM's function-calling accuracy changes with the form and language of its prompt.

The public Python API, imported lazily so that ``import promptgrid`` stays
cheap (no litellm, numpy or matplotlib until a function that needs them is
called)::

    import promptgrid as pg

    grid = pg.load_grid("bfcl_v4")                  # built-in name or YAML path -> Grid
    cases = pg.load_dataset("mini:en")              # -> list[Case]
    for prompt in pg.render(grid, cases): ...       # Prompt: variant_id, case_id, messages
    run = pg.run(grid, "mini:en", models=["fake/auto"], run_dir="runs/x", limit=5)
    mt = pg.run(grid, "mini-mt:en", models=["fake/ground-truth"], run_dir="runs/mt")  # -> Run (kind "conversation")
    mt.to_pandas(); mt.report()                     # one row per episode; pass^k, per turn, failure modes
    run = pg.open_run("runs/x")                     # also on a read-only copy
    rows = run.results()                            # list[ResultRow]
    table = run.accuracy()                          # per model x variant, with 95% intervals
    pg.report(run, out="report/", formats=["md", "csv", "html"])
    verdict = pg.score(response_text, variant, case)
    checks = pg.check_translations(["de"])          # catalogs + stored translations -> TranslationChecks

The package root also holds what every layer shares: ``promptgrid.errors``
(the exception hierarchy), ``promptgrid.records`` (``Case``, ``Prompt``) and
``promptgrid.languages`` (language codes, scripts, the language identifier).
The four folders are its subpackages, with this dependency direction:
variants <- templates <- translate <- matrix (see docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptgrid._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it (imported on first access)
_EXPORTS: dict[str, str] = {
    # functions
    "load_grid": "promptgrid.variants",
    "load_dataset": "promptgrid.matrix.api",
    "render": "promptgrid.matrix.api",
    "run": "promptgrid.matrix.api",
    "arun": "promptgrid.matrix.api",
    "open_run": "promptgrid.matrix.api",
    "run_conversations": "promptgrid.matrix.api",
    "open_conversation_run": "promptgrid.matrix.api",
    "status": "promptgrid.matrix.api",
    "estimate": "promptgrid.matrix.api",
    "export_batch": "promptgrid.matrix.api",
    "import_batch": "promptgrid.matrix.api",
    "load_results": "promptgrid.matrix.api",
    "report": "promptgrid.matrix.api",
    "check_translations": "promptgrid.matrix.api",
    "translate_conversations": "promptgrid.matrix.api",
    "check_conversation_translations": "promptgrid.matrix.api",
    "score": "promptgrid.matrix.scoring",
    # records
    "Grid": "promptgrid.variants",
    "Variant": "promptgrid.variants",
    "Case": "promptgrid.records",
    "Prompt": "promptgrid.records",
    "Verdict": "promptgrid.matrix.scoring",
    "RunConfig": "promptgrid.matrix.running.config",
    "ModelSpec": "promptgrid.matrix.running.config",
    "Run": "promptgrid.matrix.api",
    "ConversationRun": "promptgrid.matrix.api",
    "ConversationRunSummary": "promptgrid.matrix.conversations",
    "RunSummary": "promptgrid.matrix.running.runner",
    "RunStatus": "promptgrid.matrix.running.session",
    "PlanEstimate": "promptgrid.matrix.running.estimate",
    "ExportSummary": "promptgrid.matrix.running.exchange",
    "ImportSummary": "promptgrid.matrix.running.exchange",
    "Result": "promptgrid.matrix.running.results",
    "ResultRow": "promptgrid.matrix.running.results",
    "AccuracyRow": "promptgrid.matrix.api",
    "TranslationChecks": "promptgrid.matrix.api",
    "ReportResult": "promptgrid.matrix.report",
    # errors (the hierarchy is drawn in promptgrid.errors)
    "PromptgridError": "promptgrid.errors",
    "GridError": "promptgrid.errors",
    "DatasetError": "promptgrid.errors",
    "TemplateError": "promptgrid.errors",
    "MissingTranslationError": "promptgrid.errors",
    "MissingDependencyError": "promptgrid.errors",
    "RunError": "promptgrid.errors",
    "StoreError": "promptgrid.errors",
    "StoreFullError": "promptgrid.errors",
    "LocalModelError": "promptgrid.errors",
    "UnknownReturnFormatError": "promptgrid.errors",
    "ReportError": "promptgrid.errors",
    "OutputError": "promptgrid.errors",
    "InputLimitError": "promptgrid.errors",
    "TranslationError": "promptgrid.errors",
    "CatalogError": "promptgrid.errors",
    "TranslationStoreError": "promptgrid.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from promptgrid.errors import (
        CatalogError as CatalogError,
    )
    from promptgrid.errors import (
        DatasetError as DatasetError,
    )
    from promptgrid.errors import (
        GridError as GridError,
    )
    from promptgrid.errors import (
        InputLimitError as InputLimitError,
    )
    from promptgrid.errors import (
        LocalModelError as LocalModelError,
    )
    from promptgrid.errors import (
        MissingDependencyError as MissingDependencyError,
    )
    from promptgrid.errors import (
        MissingTranslationError as MissingTranslationError,
    )
    from promptgrid.errors import (
        OutputError as OutputError,
    )
    from promptgrid.errors import (
        PromptgridError as PromptgridError,
    )
    from promptgrid.errors import (
        ReportError as ReportError,
    )
    from promptgrid.errors import (
        RunError as RunError,
    )
    from promptgrid.errors import (
        StoreError as StoreError,
    )
    from promptgrid.errors import (
        StoreFullError as StoreFullError,
    )
    from promptgrid.errors import (
        TemplateError as TemplateError,
    )
    from promptgrid.errors import (
        TranslationError as TranslationError,
    )
    from promptgrid.errors import (
        TranslationStoreError as TranslationStoreError,
    )
    from promptgrid.errors import (
        UnknownReturnFormatError as UnknownReturnFormatError,
    )
    from promptgrid.matrix.api import (
        AccuracyRow as AccuracyRow,
    )
    from promptgrid.matrix.api import ConversationRun as ConversationRun
    from promptgrid.matrix.api import (
        Run as Run,
    )
    from promptgrid.matrix.api import (
        TranslationChecks as TranslationChecks,
    )
    from promptgrid.matrix.api import (
        arun as arun,
    )
    from promptgrid.matrix.api import (
        check_conversation_translations as check_conversation_translations,
    )
    from promptgrid.matrix.api import (
        check_translations as check_translations,
    )
    from promptgrid.matrix.api import (
        estimate as estimate,
    )
    from promptgrid.matrix.api import (
        export_batch as export_batch,
    )
    from promptgrid.matrix.api import (
        import_batch as import_batch,
    )
    from promptgrid.matrix.api import (
        load_dataset as load_dataset,
    )
    from promptgrid.matrix.api import (
        load_results as load_results,
    )
    from promptgrid.matrix.api import (
        open_run as open_run,
    )
    from promptgrid.matrix.api import (
        render as render,
    )
    from promptgrid.matrix.api import (
        report as report,
    )
    from promptgrid.matrix.api import (
        run as run,
    )
    from promptgrid.matrix.api import (
        status as status,
    )
    from promptgrid.matrix.api import (
        translate_conversations as translate_conversations,
    )
    from promptgrid.matrix.conversations import ConversationRunSummary as ConversationRunSummary
    from promptgrid.matrix.report import ReportResult as ReportResult
    from promptgrid.matrix.running.config import ModelSpec as ModelSpec
    from promptgrid.matrix.running.config import RunConfig as RunConfig
    from promptgrid.matrix.running.estimate import PlanEstimate as PlanEstimate
    from promptgrid.matrix.running.exchange import ExportSummary as ExportSummary
    from promptgrid.matrix.running.exchange import ImportSummary as ImportSummary
    from promptgrid.matrix.running.results import Result as Result
    from promptgrid.matrix.running.results import ResultRow as ResultRow
    from promptgrid.matrix.running.runner import RunSummary as RunSummary
    from promptgrid.matrix.running.session import RunStatus as RunStatus
    from promptgrid.matrix.scoring import Verdict as Verdict
    from promptgrid.matrix.scoring import score as score
    from promptgrid.records import Case as Case
    from promptgrid.records import Prompt as Prompt
    from promptgrid.variants import Grid as Grid
    from promptgrid.variants import Variant as Variant
    from promptgrid.variants import load_grid as load_grid

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)

"""`madr explain`, `neighbours` and `search`: a model or an index, one query at a time."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from jobs import explain as views
from jobs.command_table import command
from jobs.explain import ExplainConfig, NeighboursConfig
from jobs.search import SearchCommand, run_search_command
from schemas.terminal_text import for_terminal


@command("explain", ExplainConfig)
def _explain(config: ExplainConfig, beam_options: PipelineOptions) -> None:
    """Per aspect: predicted value, confidence, presence and fusion weight; then the score."""
    product = config.product or views.catalog_product(config.products, config.product_id)
    print(views.explain(config.model, config.query, product, verify=config.verify).format())


@command("neighbours", NeighboursConfig)
def _neighbours(config: NeighboursConfig, beam_options: PipelineOptions) -> None:
    """Print the aspect values nearest to one value in the model's learned value table U_a (or, with
    --list, every value the model predicts for the aspect)."""
    if config.list:
        for value, count in views.vocabulary_listing(config.model, config.aspect, verify=config.verify):
            print(f"{count:>8}  {for_terminal(value)}")
        return
    nearest = views.neighbours(config.model, config.aspect, config.value, config.top, verify=config.verify)
    for value, similarity in nearest:
        print(f"({similarity:.3f}) {for_terminal(value)}")


@command("search", SearchCommand)
def _search(config: SearchCommand, beam_options: PipelineOptions) -> None:
    """Encode a query as the pipeline does, search the index artifact at the settings its schedule tuned for
    --k, and print rank, score, product id, title and each aspect's catalog value or prediction (with its
    confidence), optionally keeping only products with given aspect values."""
    run_search_command(config)

"""`madr search`: a query in words against an index artifact, with titles, annotations and filters."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.inference import TextToEncode
from pipelines.io.texts import read_query_texts
from pipelines.serve.search import (
    SearchConfig,
    format_hits,
    hits_table_rows,
    open_search,
    parse_filter,
    run_search,
)
from pipelines.settings.options import ConfidenceThreshold
from pipelines.settings.stage_config import nested, setting
from schemas import RUN_SCHEMA


@dataclass(frozen=True)
class SearchCommand:
    """`madr search`: its flags, the search they describe (`search`, built from them), and the run file
    its results go to (None: printed)."""

    index: str = setting("", "Index artifact folder (`madr build-index`, a nightly's)", required=True)
    model: str = setting("", "The model whose embeddings the index holds", required=True)
    query: tuple[str, ...] = setting((), "Query text (repeatable)", repeated=True)
    queries: str | None = setting(
        None,
        "Queries to search in a batch: a Parquet file with query_id and text (as `madr ingest` writes), or "
        "a text file of one query a line",
        metavar="FILE",
    )
    k: int = setting(10, "Results per query (default 10)")
    filter: tuple[str, ...] = setting(
        (),
        "Keep products whose catalog value, or else prediction at --min_confidence, is VALUE (case and "
        "accents aside); repeatable, all must hold (--filter brand=Nike --filter color=Red)",
        repeated=True,
        metavar="ASPECT=VALUE",
    )
    products: str | None = setting(
        None,
        "The catalog's product Parquet, for titles and catalog values (default: the products the index's "
        "embeddings were made from, as their manifest records)",
        metavar="GLOB",
    )
    # The one --min_confidence; search's default is enrich's, which fills the gaps.
    threshold: ConfidenceThreshold = nested(ConfidenceThreshold)
    lexical: str = setting(
        "true",
        "Where the index carries BM25 (`madr build-index --products`), fuse its ranking of the query's words "
        "with the dense one by reciprocal rank, k 60; scores are then the fused ones (default true)",
        choices=("true", "false"),
    )
    output: str | None = setting(
        None,
        "Write every result as a run file (query_id, product_id, rank, score; Parquet) instead of printing "
        "them",
        metavar="FILE",
    )
    search: SearchConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        queries = [TextToEncode(f"q{i}", text) for i, text in enumerate(self.query, start=1)]
        if self.queries:
            queries += read_query_texts(self.queries)
        search = SearchConfig(
            index=self.index,
            model=self.model,
            queries=tuple(queries),
            k=self.k,
            filters=tuple(parse_filter(text) for text in self.filter),
            products=self.products,
            threshold=self.threshold,
            lexical=self.lexical == "true",
        )
        object.__setattr__(self, "search", search)


def run_search_command(command: SearchCommand) -> None:
    config = command.search
    index, catalog = open_search(config)
    if catalog.warning:
        print(catalog.warning, file=sys.stderr)
    results = run_search(config, index, catalog)
    if command.output:
        pq.write_table(pa.Table.from_pylist(hits_table_rows(results), schema=RUN_SCHEMA), command.output)
        total = sum(len(r.hits) for r in results)
        print(f"wrote {total:,} results of {len(results):,} queries to {command.output}")
        return
    print("\n\n".join(format_hits(result) for result in results))

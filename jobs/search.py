"""`madr search`: a query in words against an index artifact, with titles, annotations and filters."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.command_table import Flags
from pipelines.inference import TextToEncode
from pipelines.options import ConfidenceThreshold
from pipelines.search import SearchConfig, format_hits, hits_table_rows, open_search, parse_filter, run_search
from pipelines.stage_config import add_config_arguments, config_from_values
from pipelines.texts import read_query_texts
from schemas import RUN_SCHEMA


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--index", required=True, help="Index artifact folder (`madr build-index`, a nightly's)"
    )
    parser.add_argument("--model", required=True, help="The model whose embeddings the index holds")
    parser.add_argument("--query", action="append", default=[], help="Query text (repeatable)")
    parser.add_argument(
        "--queries",
        default=None,
        metavar="FILE",
        help="Queries to search in a batch: a Parquet file with query_id and text (as `madr ingest` writes), "
        "or a text file of one query a line",
    )
    parser.add_argument("--k", type=int, default=10, help="Results per query (default 10)")
    parser.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="ASPECT=VALUE",
        help="Keep products whose catalog value, or else prediction at --min_confidence, is VALUE (case and "
        "accents aside); repeatable, all must hold (--filter brand=Nike --filter color=Red)",
    )
    parser.add_argument(
        "--products",
        default=None,
        metavar="GLOB",
        help="The catalog's product Parquet, for titles and catalog values (default: the products the "
        "index's embeddings were made from, as their manifest records)",
    )
    # The one --min_confidence (`ConfidenceThreshold`); search's default is enrich's, which fills the gaps.
    add_config_arguments(parser, ConfidenceThreshold)
    parser.add_argument(
        "--lexical",
        choices=("true", "false"),
        default="true",
        help="Where the index carries BM25 (`madr build-index --products`), fuse its ranking of the query's "
        "words with the dense one by reciprocal rank, k 60; scores are then the fused ones (default true)",
    )
    parser.add_argument(
        "--output",
        default=None,
        metavar="FILE",
        help="Write every result as a run file (query_id, product_id, rank, score; Parquet) instead of "
        "printing them",
    )


@dataclass(frozen=True)
class SearchCommand:
    """`madr search`: the search, and the run file its results go to (None: printed)."""

    search: SearchConfig
    output: str | None = None


def config_from_args(args: argparse.Namespace) -> SearchConfig:
    queries = [TextToEncode(f"q{i}", text) for i, text in enumerate(args.query, start=1)]
    if args.queries:
        queries += read_query_texts(args.queries)
    return SearchConfig(
        index=args.index,
        model=args.model,
        queries=tuple(queries),
        k=args.k,
        filters=tuple(parse_filter(text) for text in args.filter),
        products=args.products,
        min_confidence=config_from_values(ConfidenceThreshold, args).or_default(),
        lexical=args.lexical == "true",
    )


SEARCH_FLAGS = Flags(
    add_search_arguments, lambda line: SearchCommand(config_from_args(line.args), line.args.output)
)


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

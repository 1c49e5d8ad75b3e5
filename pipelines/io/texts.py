"""The query texts commands read from files.

Queries come from a queries Parquet (query_id, text[, split]) or a text file, one a line: `madr search
--queries` searches them; `madr build-index --tuning_queries` encodes them to tune the index on queries
like the ones it will serve (a dataset's test split left out, so an evaluation of the index on it is not
tuned on its own queries). What BM25 reads of a product is `pipelines.index.lexical_build`'s.
"""

from __future__ import annotations

import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipelines.inference import TextToEncode


def read_query_texts(
    path: str, exclude_split: str | None = None, limit: int | None = None
) -> list[TextToEncode]:
    """The file's queries in order (blank lines and texts skipped), without `exclude_split`'s, at most
    `limit`; FileNotFoundError naming the path when it does not exist."""
    if not FileSystems.exists(path):
        raise FileNotFoundError(
            f"no queries file at {path}: give a queries Parquet or a text file, one a line"
        )
    if path.endswith(".parquet"):
        with FileSystems.open(path) as handle:
            table = pq.read_table(handle)
        if not {"query_id", "text"} <= set(table.column_names):
            raise ValueError(f"{path} needs query_id and text columns, has {table.column_names}")
        rows = table.to_pylist()
        queries = [
            TextToEncode(str(row["query_id"]), str(row["text"]))
            for row in rows
            if row.get("text") and (exclude_split is None or row.get("split") != exclude_split)
        ]
    else:
        with FileSystems.open(path) as handle:
            lines = [line.strip() for line in handle.read().decode("utf-8").splitlines()]
        queries = [TextToEncode(f"q{i}", text) for i, text in enumerate((t for t in lines if t), start=1)]
    return queries[:limit] if limit is not None else queries


__all__ = ["read_query_texts"]

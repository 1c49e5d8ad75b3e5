"""Ingest: public datasets and catalog exports → validated madr records, bad rows → dead letters.

Plain Python, no Beam: each loader reads its source files and returns an `IngestResult`
whose counts reconcile (rows in = records out + rejected + skipped, per stream). The
per-row converters (`esci_product`, `wands_product`, `ColumnMapping.convert`, ...) are
pure functions, so a Beam stage can map them over a PCollection and route the
`InvalidRecord`s they raise to a dead-letter output.
"""

from product_data.ingest.common import (
    STREAMS,
    DeadLetter,
    IngestResult,
    StreamCounts,
    combine_results,
    drop_dangling_judgments,
)
from product_data.ingest.esci import (
    ESCI_FLOAT_GAINS,
    ESCI_GRADES,
    ESCI_POSITIVE_MIN_GRADE,
    EsciConfig,
    esci_product,
    load_esci,
)
from product_data.ingest.generic import ColumnMapping, load_generic
from product_data.ingest.splits import HashSplit
from product_data.ingest.wands import (
    DEFAULT_WANDS_SPLIT,
    WANDS_GRADES,
    WANDS_POSITIVE_MIN_GRADE,
    load_wands,
    wands_judgment,
    wands_product,
    wands_query,
)
from product_data.ingest.writer import DATASET_KIND, write_dataset

__all__ = [
    "DATASET_KIND",
    "DEFAULT_WANDS_SPLIT",
    "ESCI_FLOAT_GAINS",
    "ESCI_GRADES",
    "ESCI_POSITIVE_MIN_GRADE",
    "STREAMS",
    "WANDS_GRADES",
    "WANDS_POSITIVE_MIN_GRADE",
    "ColumnMapping",
    "DeadLetter",
    "EsciConfig",
    "HashSplit",
    "IngestResult",
    "StreamCounts",
    "combine_results",
    "drop_dangling_judgments",
    "esci_product",
    "load_esci",
    "load_generic",
    "load_wands",
    "wands_judgment",
    "wands_product",
    "wands_query",
    "write_dataset",
]

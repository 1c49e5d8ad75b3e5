"""Where things live: one definition of the dataset and run folder layouts.

A dataset folder (what `madr generate` and the ingest loaders write):
    products/products-*.parquet   queries.parquet   judgments.parquet
A run folder (what `madr demo` and `madr nightly` write):
    model/   embeddings/   index/   eval/
"""

from __future__ import annotations

from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

# Inside an evaluation folder: the backbone used zero-shot, evaluated beside the model
# (`pipelines.evaluate.zero_shot`): its embeddings/ and eval/, and the paired comparison.
ZERO_SHOT_FOLDER = "zero_shot"
ZERO_SHOT_FILE = "zero_shot.json"
# And BM25 and the BM25 + zero-shot hybrid (`pipelines.evaluate.lexical`): each's rows, and the comparisons.
LEXICAL_FOLDER = "lexical"
LEXICAL_FILE = "lexical.json"


@dataclass(frozen=True)
class DatasetLayout:
    root: str

    @property
    def products(self) -> str:
        return FileSystems.join(self.root, "products", "products-*.parquet")

    @property
    def queries(self) -> str:
        return FileSystems.join(self.root, "queries.parquet")

    @property
    def judgments(self) -> str:
        return FileSystems.join(self.root, "judgments.parquet")

    def require_products(self, flag: str = "--data") -> str:
        """The root, or FileNotFoundError saying it is no dataset folder (Beam's reader would only
        say that a file pattern matched nothing, deep inside the first stage that reads it)."""
        if not FileSystems.match([self.products])[0].metadata_list:
            raise FileNotFoundError(
                f"{flag} {self.root} is not a dataset folder: it has no products/products-*.parquet; "
                "give the folder that `madr generate` or `madr ingest` wrote"
            )
        return self.root


@dataclass(frozen=True)
class RunLayout:
    root: str

    @property
    def model(self) -> str:
        return FileSystems.join(self.root, "model")

    @property
    def embeddings(self) -> str:
        return FileSystems.join(self.root, "embeddings")

    @property
    def index(self) -> str:
        return FileSystems.join(self.root, "index")

    @property
    def evaluation(self) -> str:
        return FileSystems.join(self.root, "eval")

"""`madr explain` and `madr neighbours`: their configs and flags; the views are `pipelines.explain`'s."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.stage_config import input_checks, setting


@dataclass(frozen=True)
class ExplainConfig:
    model: str = setting("", "Trained model directory", required=True)
    query: str = setting("", "Query text, e.g. 'breville juicer'", required=True)
    product: str | None = setting(None, "Product title, or a product record as JSON in madr's field names")
    product_id: str | None = setting(None, "A product of the catalog --products, by its id")
    products: str | None = setting(None, "Catalog Parquet file, folder or glob that holds --product_id")
    verify: bool = input_checks()

    def __post_init__(self) -> None:
        if (self.product is None) == (self.product_id is None):
            raise ValueError("give one of --product and --product_id")


@dataclass(frozen=True)
class NeighboursConfig:
    model: str = setting("", "Trained model directory of a variant with aspect heads", required=True)
    aspect: str = setting("", "Aspect name, e.g. category", required=True)
    value: str | None = setting(None, "Aspect value, e.g. Bedding")
    list: bool = setting(False, "List the aspect's values, most frequent first, with counts")
    top: int = setting(5, "How many neighbours to list (5)")
    verify: bool = input_checks()

    def __post_init__(self) -> None:
        if (self.value is None) == (not self.list):
            raise ValueError("give one of --value and --list")

"""`madr extend-vocabulary`: a copy of a trained model that also predicts a catalog's own aspect values.

The values come from the catalog's `aspects` (its brands, colours, categories as `madr ingest` mapped
them) or from a JSON file `{"brand": ["Fellow", "Hario"], ...}`; each gets a row made from the model's
states for its name (`model.aspects.open_vocabulary`). Nothing is trained, so it takes seconds, and the
new model is a model like any other: embed, enrich and export-vertex read it. `madr adapt` trains on the
catalog instead (minutes), and does better where the text does not name the value.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from model import load_encoder
from model.aspects.open_vocabulary import add_aspect_values
from model.aspects.vocabulary import most_frequent_spelling, record_spellings
from pipelines.io.parquet_reading import parquet_rows
from pipelines.storage.verify import MODEL_KIND, verify_model
from schemas import write_manifest
from schemas.manifest import FILES_DIGEST


def catalog_values(products: str, aspects: tuple[str, ...]) -> dict[str, list[tuple[str, int]]]:
    """Per aspect, every value the catalog's products carry: (its most frequent spelling, products)."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    spellings: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for row in parquet_rows(products, ["aspects"]):
        for aspect, values in dict(row.get("aspects") or {}).items():
            if aspect not in aspects:
                continue
            for name, spelled in record_spellings(values or []).items():
                counts[aspect][name] += 1
                spellings[aspect][name][spelled] += 1
    return {
        aspect: [(most_frequent_spelling(spellings[aspect][name]), n) for name, n in found.most_common()]
        for aspect, found in counts.items()
    }


def extend_vocabulary(
    model: str,
    output: str,
    products: str | None = None,
    values: str | None = None,
    aspects: tuple[str, ...] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write `output`: `model` with rows for the new values; returns {aspect: {"before", "added"}}."""
    if not products and not values:
        raise ValueError("give --products (the catalog's own values) or --values (a JSON file), or both")
    target = Path(output)
    if target.exists() and any(target.iterdir()) and not overwrite:
        raise ValueError(f"{output} is not empty; pass --overwrite to replace it")
    source = verify_model(model) or {}
    encoder, tokenizer = load_encoder(model)
    vocabulary = getattr(encoder, "vocabulary", None)
    known = tuple(vocabulary.aspects) if vocabulary else ()
    wanted = aspects or known
    additions: dict[str, list[tuple[str, int]]] = catalog_values(products, wanted) if products else {}
    if values:
        listed = json.loads(Path(values).read_text(encoding="utf-8"))
        for aspect, names in listed.items():
            additions.setdefault(aspect, []).extend((str(name), 1) for name in names)
    before = {aspect: len(vocabulary.values(aspect)) for aspect in known} if vocabulary else {}
    added = add_aspect_values(encoder, tokenizer, additions)
    encoder.save_pretrained(target, tokenizer)
    own = ("kind", "files", FILES_DIGEST, "created_at", "model_fingerprint")  # written anew for this model
    kept = {k: v for k, v in source.items() if k not in own}
    summary = {a: {"before": before.get(a, 0), "added": added.get(a, 0)} for a in additions}
    write_manifest(
        target,
        MODEL_KIND,
        {**kept, "extended_from": model, "values_added": summary, "values_from": products or values},
    )
    return summary

"""`madr explain` and `madr neighbours` on a tiny MADRAL with a real vocabulary."""

from __future__ import annotations

import pytest
import torch

from jobs.cli import main
from jobs.explain import Explanation, explain, neighbours
from model import new_encoder
from model.annotations import RecordAnnotations
from model.aspects.vocabulary import AspectVocabulary
from schemas import write_manifest
from tests.conftest import tiny_backbone

RECORDS = [
    {"category": ["Juicers"], "brand": ["Breville"], "color": ["Silver"]},
    {"category": ["Bedding"], "brand": ["Casper"], "color": ["Pink"]},
    {"category": ["Comforters"], "brand": ["Casper"], "color": ["Light Pink"]},
    {"category": ["Books"], "brand": ["Simple Steps"], "color": ["White"]},
]


@pytest.fixture(scope="module")
def madral_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("madral")
    vocabulary = AspectVocabulary.from_records(RECORDS, ("category", "brand", "color"))
    torch.manual_seed(0)
    encoder, tokenizer = new_encoder(
        "madral", pretrained=False, backbone=tiny_backbone(), projection_dim=8, vocabulary=vocabulary
    )
    table = encoder.aspect_prediction.tables["category"].weight
    with torch.no_grad():  # make Comforters the nearest neighbour of Bedding, as in Table 9
        table[vocabulary.values("category").id_of("comforters")] = (
            table[vocabulary.values("category").id_of("bedding")] * 2
        )
    encoder.save_pretrained(directory, tokenizer)
    # explain and neighbours verify the model against its manifest before loading it.
    write_manifest(directory, "madr-model", {"variant": "madral", "model_version": "test"})
    return str(directory)


def test_explain_gives_table_8_for_both_sides(madral_dir: str) -> None:
    result = explain(madral_dir, "breville juicer", "Juicing with the Breville Juice Fountain: 101 recipes")
    for notes, text in ((result.query, "breville juicer"), (result.product, "Juicing with the Breville")):
        # As embed writes them: a brand or colour only where the text names it.
        assert "category" in notes.aspect_values and set(notes.aspect_values) <= {
            "category",
            "brand",
            "color",
        }
        for aspect in {"brand", "color"} & set(notes.aspect_values):
            assert notes.aspect_values[aspect].lower() in text.lower()
        assert set(notes.aspect_confidences) == {"category", "brand", "color"}
        assert all(0 < p <= 1 for p in notes.aspect_confidences.values())
        assert set(notes.fusion_weights) == {"category", "brand", "color", "other"}
        assert sum(notes.fusion_weights.values()) == pytest.approx(1.0, abs=1e-4)
    assert -1.0 <= result.score <= 1.0
    table = result.format()
    assert "prediction" in table and "presence" in table and "Score (cosine)" in table


def test_neighbours_lists_the_nearest_values_first(
    madral_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    found = neighbours(madral_dir, "category", "Bedding", top=3)
    assert found[0] == ("bedding", pytest.approx(1.0))
    assert found[1][0] == "comforters" and found[1][1] == pytest.approx(1.0, abs=1e-5)
    main(["neighbours", "--model", madral_dir, "--aspect", "category", "--value", "Bedding", "--top", "2"])
    assert capsys.readouterr().out.splitlines()[1].endswith("comforters")
    with pytest.raises(ValueError, match="not in the category vocabulary") as error:
        neighbours(madral_dir, "category", "Spaceships")
    assert "--list" in str(error.value) and "nearest names" not in str(error.value)
    # A near miss names the values it may have meant, as the catalog spells them.
    with pytest.raises(ValueError, match="nearest names: Comforters"):
        neighbours(madral_dir, "category", "comforter")


def test_neighbours_lists_the_vocabulary(madral_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["neighbours", "--model", madral_dir, "--aspect", "brand", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(maxsplit=1) for line in lines] == [
        ["2", "Casper"],
        ["1", "Breville"],
        ["1", "Simple Steps"],
    ]
    assert main(["neighbours", "--model", madral_dir, "--aspect", "material", "--list"]) != 0
    assert "no 'material' vocabulary" in capsys.readouterr().err


def test_explain_reads_a_product_of_the_catalog_by_id(
    madral_dir: str, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_embed_pipeline import catalog, write_catalog

    products = write_catalog(tmp_path / "catalog.parquet", catalog(5))
    title = catalog(5)[3]["title"]
    by_id = ["explain", "--model", madral_dir, "--query", "nike sock", "--products", products]
    assert main([*by_id, "--product_id", "p3"]) == 0
    shown = capsys.readouterr().out
    assert main(["explain", "--model", madral_dir, "--query", "nike sock", "--product", title]) == 0
    # The whole record reads as more than its title, so only the layout is compared.
    assert shown.splitlines()[0] == capsys.readouterr().out.splitlines()[0] == "Query:"
    assert main([*by_id, "--product_id", "p99"]) != 0
    assert "--product_id 'p99' is not in" in capsys.readouterr().err


def test_neighbours_needs_a_variant_with_value_tables(tiny_model_dir) -> None:
    with pytest.raises(ValueError, match="has no aspect value tables"):
        neighbours(str(tiny_model_dir), "category", "Bedding")


def test_the_table_shows_whole_value_names_and_no_empty_rows() -> None:
    long_name = "mattress toppers and pads"
    notes = RecordAnnotations(
        aspect_values={"category": long_name, "color": "red"},
        aspect_confidences={"category": 0.9, "color": 0.5},
        aspect_presence={"category": 0.8, "color": 0.7},
    )
    lines = Explanation(notes, notes, 0.5).format().splitlines()
    assert any(line.split()[1:] == ["mattress", "toppers", "and", "pads", "red"] for line in lines)
    assert not any(line.strip().startswith("weight") for line in lines)  # no fusion weights: no row

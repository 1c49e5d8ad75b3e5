"""The validation rules of schemas/validation.py (its docstring numbers them), one rule per test.

Each test changes one field of an otherwise valid record, so a failure names the rule that broke.
The last test runs the embed stage: bad records become dead letters with their reason, the counts
reconcile, and the text the model read (its content hash) is the NFC text.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from jobs.cli import parse_command
from model import content_hash, document_text
from pipelines.embed.stage import embed_catalog
from schemas import InvalidRecord, validate_judgment, validate_product, validate_query
from schemas.validation import MAX_ID_BYTES, clean_text
from tests.test_embed_pipeline import write_catalog

DECOMPOSED = "Cafe\u0301 cre\u0300me"  # "Café crème" typed as base letters + combining accents
COMPOSED = unicodedata.normalize("NFC", DECOMPOSED)


def product(**changes: object) -> dict:
    return {"product_id": "p1", "title": "Breville Juice Fountain", **changes}


def rejected(validate, record: dict) -> InvalidRecord:
    with pytest.raises(InvalidRecord) as raised:
        validate(record)
    return raised.value


# I1: a string or an integer, stripped, not empty.


@pytest.mark.parametrize("bad", [None, True, 1.5, ["p1"], "", "   "])
def test_i1_an_id_must_be_a_non_empty_string_or_integer(bad: object) -> None:
    error = rejected(validate_product, product(product_id=bad))
    assert error.record_id is None and "'product_id'" in error.reason


def test_i1_integer_ids_become_strings_and_ids_are_stripped() -> None:
    assert validate_product(product(product_id=7))["product_id"] == "7"
    assert validate_product(product(product_id="  p1 "))["product_id"] == "p1"


# I2: printable, no control, format (zero-width, bidi) or separator characters.


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ("p\n1", "U+000A LINE FEED"),
        ("p\t1", "U+0009 TAB"),
        ("p\x001", "U+0000 NUL"),
        ("p\x1b1", "U+001B"),
        ("p\u202e1", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("p\u2066", "U+2066 LEFT-TO-RIGHT ISOLATE"),
        ("p\u200b1", "U+200B ZERO WIDTH SPACE"),
        ("\ufeffp1", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
        ("p\u20281", "U+2028 LINE SEPARATOR"),
        ("p\u00a01", "U+00A0 NO-BREAK SPACE"),
        ("p\ud8001", "U+D800"),
    ],
)
def test_i2_an_id_must_be_printable(bad: str, named: str) -> None:
    error = rejected(validate_product, product(product_id=bad))
    assert error.record_id is None
    assert named in error.reason and "ids must be printable" in error.reason
    # The message escapes what it reports: no raw control or bidi character reaches a log line.
    assert str(error).isprintable()


def test_i2_printable_ids_keep_their_spaces_and_non_latin_letters() -> None:
    for good in ("B07 XYZ", "商品-42", "ürün_7", "id:a/b#c"):
        assert validate_product(product(product_id=good))["product_id"] == good


# I3: at most 256 bytes of UTF-8.


def test_i3_an_id_may_have_256_bytes_and_no_more() -> None:
    assert validate_product(product(product_id="x" * MAX_ID_BYTES))["product_id"] == "x" * MAX_ID_BYTES
    error = rejected(validate_product, product(product_id="x" * 10_000))
    assert "is 10000 bytes of UTF-8, more than the 256 allowed" in error.reason
    assert len(str(error)) < 300  # the message shows the start of the id, not all of it


def test_i3_bytes_are_counted_not_characters() -> None:
    three_bytes = "商" * 86  # 258 bytes in 86 characters
    assert "258 bytes" in rejected(validate_product, product(product_id=three_bytes)).reason


def test_ids_are_not_nfc_normalised() -> None:
    # An id is a join key: it stays byte for byte what the source sent.
    assert validate_product(product(product_id=DECOMPOSED))["product_id"] == DECOMPOSED


@pytest.mark.parametrize(
    ("validate", "record", "field"),
    [
        (validate_query, {"query_id": "q\n1", "text": "socks"}, "query_id"),
        (validate_judgment, {"query_id": "q\u202e", "product_id": "p", "grade": 1}, "query_id"),
        (validate_judgment, {"query_id": "q", "product_id": "p" * 300, "grade": 1}, "product_id"),
    ],
)
def test_the_id_rules_hold_for_queries_and_judgments(validate, record: dict, field: str) -> None:
    assert f"'{field}'" in rejected(validate, record).reason


# T1: text is NFC normalised, then stripped.


def test_t1_every_text_field_is_nfc_normalised() -> None:
    clean = validate_product(
        product(
            title=f" {DECOMPOSED} ",
            description=DECOMPOSED,
            bullet_points=[DECOMPOSED],
            brand=DECOMPOSED,
            category_path=[DECOMPOSED],
            aspects={"color": [DECOMPOSED]},
        )
    )
    assert clean["title"] == COMPOSED
    assert clean["description"] == clean["brand"] == COMPOSED
    assert clean["bullet_points"] == clean["category_path"] == [COMPOSED]
    assert clean["aspects"] == {"color": [COMPOSED]}
    assert validate_query({"query_id": "q", "text": DECOMPOSED})["text"] == COMPOSED
    assert (
        validate_judgment({"query_id": "q", "product_id": "p", "grade": 1, "label": DECOMPOSED})["label"]
        == COMPOSED
    )


def test_t1_the_model_reads_the_nfc_text() -> None:
    composed = validate_product(product(title=COMPOSED))
    decomposed = validate_product(product(title=DECOMPOSED))
    assert document_text(decomposed) == document_text(composed) == COMPOSED
    assert content_hash(document_text(decomposed)) == content_hash(document_text(composed))


# T2: no NUL anywhere in text.


@pytest.mark.parametrize(
    "changes",
    [
        {"title": "\x00\x00\x00"},
        {"title": "Juicer\x00"},
        {"description": "A juicer.\x00\x00"},
        {"bullet_points": ["850 W", "\x00"]},
        {"aspects": {"brand": ["Bre\x00ville"]}},
    ],
)
def test_t2_nul_in_any_text_field_rejects_the_record(changes: dict) -> None:
    error = rejected(validate_product, product(**changes))
    assert error.record_id == "p1"
    assert "U+0000 NUL" in error.reason and "binary or was cut short" in error.reason


def test_t2_nul_in_query_text_rejects_the_query() -> None:
    assert "U+0000 NUL" in rejected(validate_query, {"query_id": "q", "text": "socks\x00"}).reason


# T3: no lone surrogates.


def test_t3_a_lone_surrogate_rejects_the_record() -> None:
    error = rejected(validate_product, product(title="Juicer \udcff"))
    assert "U+DCFF" in error.reason and "re-export it as UTF-8" in error.reason


# T4: a value without a visible character counts as missing.


@pytest.mark.parametrize(
    "title",
    ["", "   ", "\t\n", "\u3000\u00a0", "\u200b", "\u200b\u200c\u200d\u2060\ufeff", " \u200b \u202e "],
)
def test_t4_a_title_without_a_visible_character_rejects_the_product(title: str) -> None:
    error = rejected(validate_product, product(title=title))
    assert (
        error.record_id == "p1"
        and "'title'" in error.reason
        and "every product needs a title" in error.reason
    )


def test_t4_the_reason_says_whether_the_title_was_empty_or_invisible() -> None:
    assert "'title' is missing or empty" in rejected(validate_product, product(title="")).reason
    assert "'title' is missing or empty" in rejected(validate_product, product(title=" \u3000 ")).reason
    assert "no visible character" in rejected(validate_product, product(title="\u200b")).reason


def test_t4_a_query_without_visible_text_is_rejected() -> None:
    assert "no visible character" in rejected(validate_query, {"query_id": "q", "text": "\u200b "}).reason


def test_t4_invisible_optional_values_are_dropped_not_rejected() -> None:
    clean = validate_product(
        product(
            description="\u200b",
            brand=" \ufeff ",
            bullet_points=["\u200b", "850 W", "  "],
            aspects={"color": ["\u200d"], "brand": ["Breville"]},
        )
    )
    assert clean["description"] is None and clean["brand"] is None
    assert clean["bullet_points"] == ["850 W"]
    assert clean["aspects"] == {"brand": ["Breville"]}


def test_t4_ascii_text_takes_the_same_rule_as_any_other() -> None:
    # ASCII text has a fast path; every ASCII character, alone or after an invisible one, must come out
    # as the general rule says: visible unless whitespace or a control character.
    for code in range(1, 128):
        char = chr(code)
        visible = not char.isspace() and unicodedata.category(char) != "Cc"
        for text in (char, f"\x01{char}", f" {char} \x7f"):
            expected = text.strip() if visible else None
            assert clean_text(text, "title", "product", "p1") == expected, (code, text)
    assert "no visible character" in rejected(validate_product, product(title="\x01\x1b\x7f")).reason


def test_t4_visible_text_keeps_its_inner_zero_width_characters() -> None:
    # Only all-invisible values are refused; a joiner inside a word (emoji, Indic scripts) is text.
    assert validate_product(product(title="Socks \u200d👍"))["title"] == "Socks \u200d👍"


# The stage: every rule's failure is a dead letter with its reason; nothing is lost; NFC is embedded.


def test_the_embed_stage_dead_letters_each_broken_rule_and_embeds_nfc_text(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    bad = {
        "id with a newline": product(product_id="a\nb"),
        "id with U+202E": product(product_id="a\u202eb"),
        "id of 10,000 characters": product(product_id="x" * 10_000),
        "NUL title": product(product_id="nul", title="\x00\x00"),
        "zero-width title": product(product_id="zw", title="\u200b\u200b"),
        "whitespace title": product(product_id="ws", title=" \u3000 "),
    }
    good = [product(product_id="nfc", title=DECOMPOSED), product(product_id="plain", title="Juicer")]
    path = write_catalog(tmp_path / "products.parquet", [*bad.values(), *good])
    out = tmp_path / "embeddings"
    flags = ["--products", path, "--model", str(tiny_model_dir), "--output", str(out)]
    counts = embed_catalog(*parse_command("embed", [*flags, "--max_dead_letter_fraction", "1"]))

    assert counts["products_read"] == len(bad) + len(good)
    assert counts["products_read"] == counts["products_embedded"] + counts["products_dead_lettered"]
    assert counts["products_dead_lettered"] == len(bad)
    letters = [
        json.loads(line) for f in out.glob("dead_letters*.jsonl") for line in f.read_text().splitlines()
    ]
    reasons = sorted(letter["reason"] for letter in letters)
    assert len(reasons) == len(bad)
    assert sum("ids must be printable" in r for r in reasons) == 2
    assert sum("more than the 256 allowed" in r for r in reasons) == 1
    assert sum("U+0000 NUL" in r for r in reasons) == 1
    assert sum("no visible character" in r for r in reasons) == 1
    assert sum("'title' is missing or empty" in r for r in reasons) == 1

    shards = sorted(out.glob("embeddings-*.parquet"))
    rows = {row["product_id"]: row for shard in shards for row in pq.read_table(shard).to_pylist()}
    assert sorted(rows) == ["nfc", "plain"]
    assert rows["nfc"]["content_hash"] == content_hash(COMPOSED) != content_hash(DECOMPOSED)

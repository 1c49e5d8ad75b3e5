"""The shared parts of ingest: counts that must reconcile, hash splits, and row readers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from product_data.ingest import DeadLetter, HashSplit, IngestResult, StreamCounts
from product_data.ingest.common import Skip, StreamTally
from product_data.ingest.readers import RawRow, read_delimited
from schemas import DEAD_LETTER_SCHEMA, InvalidRecord


def test_counts_must_reconcile() -> None:
    StreamCounts(rows_in=5, records_out=2, rejected=1, skipped={"other locale": 2})
    with pytest.raises(ValueError, match="do not reconcile"):
        StreamCounts(rows_in=5, records_out=2, rejected=1, skipped={})
    with pytest.raises(ValueError, match=">= 0"):
        StreamCounts(rows_in=0, records_out=1, rejected=-1)


def test_result_checks_its_own_books() -> None:
    counts = {"queries": StreamCounts(rows_in=1, records_out=1, rejected=0)}
    with pytest.raises(ValueError, match="counts say 1 records, got 0"):
        IngestResult(source="x", counts=counts)
    with pytest.raises(ValueError, match="dead letters"):
        letter = DeadLetter("ingest.x.queries", None, "bad", {})
        IngestResult(source="x", queries=({"query_id": "q"},), counts=counts, dead_letters=(letter,))
    with pytest.raises(ValueError, match="finite float"):
        IngestResult(source="x", gain_map={3: 1})  # an int gain would be truncated somewhere: floats only


def test_tally_routes_records_skips_and_dead_letters() -> None:
    def convert(fields: dict) -> dict:
        if fields.get("skip"):
            raise Skip("other locale")
        if fields.get("bad"):
            raise InvalidRecord("product", "p9", "'title' is missing or empty")
        if fields.get("weird"):
            raise TypeError("expected str")
        return {"id": fields["id"]}

    tally = StreamTally("ingest.test.products")
    rows = [
        RawRow("f row 1", {"id": "a"}),
        RawRow("f row 2", {"skip": True}),
        RawRow("f row 3", {"bad": True}),
        RawRow("f row 4", {"weird": True}),
        RawRow("f line 5", {"line": "x\ty"}, "has 2 fields but the header has 3"),
    ]
    assert list(tally.route(rows, convert)) == [{"id": "a"}]
    assert tally.counts() == StreamCounts(5, 1, 3, {"other locale": 1})
    reasons = [d.reason for d in tally.dead_letters]
    assert reasons == [
        "f row 3: product 'p9': 'title' is missing or empty",
        "f row 4: expected str",
        "f line 5: has 2 fields but the header has 3",
    ]
    assert tally.dead_letters[0].record_id == "p9"
    row = tally.dead_letters[0].to_row()
    assert list(row) == DEAD_LETTER_SCHEMA.names
    assert row["record_json"] == '{"bad": true}'


def test_hash_split_is_stable_and_proportional() -> None:
    split = HashSplit(valid_fraction=0.2, test_fraction=0.3)
    # Pinned: these must never change, or every dataset's splits silently move.
    assert HashSplit().position("0") == pytest.approx(0.017879862946898875)  # sha256(b"madr-split-v1:0")
    assert [split.assign(str(i)) for i in range(6)] == ["test", "test", "train", "train", "train", "train"]
    shares = Counter(split.assign(f"q{i}") for i in range(20_000))
    assert shares["test"] / 20_000 == pytest.approx(0.3, abs=0.02)
    assert shares["valid"] / 20_000 == pytest.approx(0.2, abs=0.02)
    assert HashSplit(test_fraction=1.0).assign("anything") == "test"
    assert HashSplit(salt="other").position("0") != HashSplit().position("0")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"valid_fraction": -0.1},
        {"test_fraction": 1.2},
        {"valid_fraction": 0.6, "test_fraction": 0.6},
        {"salt": ""},
    ],
)
def test_hash_split_validation(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        HashSplit(**kwargs)


def test_delimited_reader_survives_bad_bytes_and_names_lines(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_bytes(
        "\ufeffid,text\n".encode()
        + b"1,caf\xe9\n"  # latin-1, not UTF-8
        + b'2,"two\nlines"\n'
        + b"\n"
        + b"3,ok\n"
    )
    rows = list(read_delimited(path, required=("id", "text")))
    assert [(r.where, r.problem) for r in rows] == [
        ("q.csv line 2", "is not valid UTF-8 (line(s) [2])"),
        ("q.csv line 3-4", None),
        ("q.csv line 6", None),
    ]
    assert rows[1].fields == {"id": "2", "text": "two\nlines"}
    assert rows[0].fields == {"line": "1,caf\\xe9"}


def test_delimited_reader_rejects_a_wrong_file(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match="empty"):
        list(read_delimited(tmp_path / "empty.csv"))
    (tmp_path / "dup.csv").write_text("id,id\n1,2\n")
    with pytest.raises(ValueError, match="repeats"):
        list(read_delimited(tmp_path / "dup.csv"))

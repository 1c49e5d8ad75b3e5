"""BM25 over a catalog's text, scored with the whole catalog's statistics however the catalog is split.

Lucene's BM25 (Elasticsearch's scoring): a product d's score for a query is the sum over the query's
words t of idf(t) · tf / (tf + k1 · (1 − b + b · |d| / avgdl)), with idf(t) = ln(1 + (N − df + 0.5) /
(df + 0.5)) (Lucene 8 dropped the constant (k1 + 1) factor; it changes no ranking). N, df and avgdl are
the catalog's (`LexicalStatistics`), not the shard's: a partitioned index's shards each hold BM25 over
their own products, yet a product scores the same in a one-shard and a sixteen-shard index, so the
shards' rankings merge by score into the catalog's ranking (`index_builder.lexical.ShardedBm25`).

The scores are precomputed per (product, word) into a sparse column matrix (one column per word the
shard's products hold), as bm25s does, and saved as plain .npy arrays and JSON (no pickle). A search
sums the query words' columns: only products sharing a word with the query are ranked, as in Lucene,
so a ranking can be shorter than the depth asked for. tests/test_lexical.py checks the scores against
bm25s' own Lucene BM25.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from index_builder.analyzer import AUTO, DEFAULT_LANGUAGE, analyze, analyzer, check_language
from index_builder.product_keys import id_keys
from index_builder.term_counts import TermCounts, load_counts

SETTINGS_FILE = "bm25.json"
VOCABULARY_FILE = "vocabulary.json"
MATRIX_FILES = ("scores.npy", "rows.npy", "column_starts.npy")
FORMAT = "madr-bm25"
# 1 was bm25s' own files, scored with the shard's statistics; 2 saved no term counts (still read).
FORMAT_VERSION = 3
READABLE_VERSIONS = (2, 3)


@dataclass(frozen=True)
class Bm25Settings:
    """Lucene's BM25 parameters (Elasticsearch's defaults) and the analyzer's language: "auto" analyzes
    each product in its locale's language and queries in the catalog's main one (`index_builder.analyzer`)."""

    k1: float = 1.2
    b: float = 0.75
    language: str = AUTO

    def __post_init__(self) -> None:
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={self.k1}, b={self.b}")
        check_language(self.language)

    def describe(self) -> str:
        analyzer = (
            "each product's locale's Snowball analyzer"
            if self.language == AUTO
            else (f"the Snowball {self.language} analyzer" if self.language != "none" else "no analyzer")
        )
        return f"BM25 (Lucene scoring, k1 {self.k1:g}, b {self.b:g}, {analyzer})"


@dataclass(frozen=True)
class Ranking:
    """One query's ranking: corpus rows best first, and their scores."""

    rows: np.ndarray
    scores: np.ndarray


EMPTY_RANKING = Ranking(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))


@dataclass(frozen=True)
class LexicalStatistics:
    """What BM25 needs of the whole catalog: products, their total length in words, each word's document
    frequency, and how many products each language analyzed. Partial statistics of disjoint parts `merge`
    into the whole's (a Beam combine)."""

    documents: int = 0
    total_length: int = 0
    document_frequency: Mapping[str, int] = field(default_factory=dict)
    languages: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, words: Iterable[Sequence[str]], languages: Iterable[str]) -> LexicalStatistics:
        frequency: Counter[str] = Counter()
        documents = total = 0
        for document in words:
            documents += 1
            total += len(document)
            frequency.update(set(document))
        return cls(documents, total, dict(frequency), dict(Counter(languages)))

    @classmethod
    def merge(cls, parts: Iterable[LexicalStatistics]) -> LexicalStatistics:
        frequency: Counter[str] = Counter()
        languages: Counter[str] = Counter()
        documents = total = 0
        for part in parts:
            documents += part.documents
            total += part.total_length
            frequency.update(part.document_frequency)
            languages.update(part.languages)
        return cls(documents, total, dict(frequency), dict(languages))

    @property
    def average_length(self) -> float:
        return self.total_length / self.documents if self.documents else 0.0

    @property
    def main_language(self) -> str:
        """The language most products were analyzed in (ties: the first by name)."""
        if not self.languages:
            return DEFAULT_LANGUAGE
        return min(self.languages, key=lambda language: (-self.languages[language], language))

    def summary(self) -> dict[str, Any]:
        """What a manifest records: enough to tell two builds' statistics apart."""
        return {
            "documents": self.documents,
            "average_length": round(self.average_length, 6),
            "words": len(self.document_frequency),
            "languages": dict(sorted(self.languages.items())),
        }


def _scores(terms: TermCounts, statistics: LexicalStatistics, settings: Bm25Settings) -> np.ndarray:
    """Lucene's BM25 of each (word, product) pair of `terms`, in the matrix's order, from the catalog's
    `statistics` (float64 arithmetic, float32 scores)."""
    if statistics.documents < 1 or statistics.average_length <= 0:
        raise ValueError("BM25 needs text: every product's text is empty")
    df = np.array([statistics.document_frequency.get(word, 0) for word in terms.vocabulary], dtype=np.float64)
    if (df < 1).any():
        word = terms.vocabulary[int(np.argmax(df < 1))]
        raise ValueError(f"the catalog's statistics lack {word!r}: they were counted on other products")
    idf = np.log(1 + (statistics.documents - df + 0.5) / (df + 0.5))
    norms = settings.k1 * (1 - settings.b + settings.b * terms.lengths / statistics.average_length)
    tf = terms.counts.astype(np.float64)
    return (idf[terms.columns] * tf / (tf + norms[terms.rows])).astype(np.float32)


class Bm25Index:
    """BM25 over the products `product_ids` (corpus rows in that order); `search` ranks them for queries.

    `Bm25Index.from_texts` analyzes texts and scores with their own statistics (one corpus);
    `Bm25Index.of_words` takes words already analyzed and the whole catalog's statistics (a shard).
    """

    def __init__(
        self,
        product_ids: Sequence[str],
        settings: Bm25Settings,
        query_language: str,
        statistics: Mapping[str, Any],
        vocabulary: list[str],
        matrix: tuple[np.ndarray, np.ndarray, np.ndarray],
        terms: TermCounts | None = None,
    ) -> None:
        scores, rows, starts = matrix
        if len(starts) != len(vocabulary) + 1 or starts[-1] != len(scores) or len(rows) != len(scores):
            raise ValueError("the BM25 score matrix does not match its vocabulary")
        self.settings = settings
        self.product_ids = list(product_ids)
        self.query_language = check_language(query_language)
        self.statistics = dict(statistics)
        self.vocabulary = vocabulary
        self._scores, self._rows, self._starts = scores, rows, starts
        # The term counts the scores were computed from, which the next build of this shard reuses for
        # products whose text did not change (`index_builder.term_counts`); None when not loaded.
        self.terms = terms
        self._columns = {word: i for i, word in enumerate(vocabulary)}
        # Ties are ordered by the products' keys, so that a ranking does not depend on the sharding.
        self.keys = id_keys(self.product_ids)

    @classmethod
    def from_texts(
        cls,
        product_ids: Sequence[str],
        texts: Sequence[str],
        settings: Bm25Settings | None = None,
        locales: Sequence[str | None] | None = None,
    ) -> Bm25Index:
        """BM25 over `texts` (one per product id, in its locale's language) and their own statistics."""
        settings = settings or Bm25Settings()
        words, languages = analyze(texts, locales or [None] * len(texts), settings.language)
        return cls.of_words(product_ids, words, LexicalStatistics.of(words, languages), settings)

    @classmethod
    def of_words(
        cls,
        product_ids: Sequence[str],
        words: Sequence[Sequence[str]],
        statistics: LexicalStatistics,
        settings: Bm25Settings,
        query_language: str | None = None,
    ) -> Bm25Index:
        """BM25 over analyzed `words` (one list per product id), scored with `statistics`; queries are
        analyzed in `query_language` (default: the settings' language, else the catalog's main one)."""
        if len(product_ids) != len(words):
            raise ValueError(f"{len(product_ids)} product ids for {len(words)} texts")
        return cls.of_terms(product_ids, TermCounts.of_words(words), statistics, settings, query_language)

    @classmethod
    def of_terms(
        cls,
        product_ids: Sequence[str],
        terms: TermCounts,
        statistics: LexicalStatistics,
        settings: Bm25Settings,
        query_language: str | None = None,
    ) -> Bm25Index:
        """BM25 over products' term counts (a row per product id), scored with `statistics`."""
        if len(product_ids) != len(terms):
            raise ValueError(f"{len(product_ids)} product ids for {len(terms)} rows of term counts")
        if not product_ids:
            raise ValueError("BM25 needs at least one product")
        default = settings.language if settings.language != AUTO else statistics.main_language
        matrix = (_scores(terms, statistics, settings), terms.rows, terms.starts)
        return cls(
            product_ids,
            settings,
            query_language or default,
            statistics.summary(),
            terms.vocabulary,
            matrix,
            terms,
        )

    def __len__(self) -> int:
        return len(self.product_ids)

    def save(self, directory: str | Path) -> None:
        """The score matrix as .npy arrays, the vocabulary, and the settings and statistics as JSON."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name, array in zip(MATRIX_FILES, (self._scores, self._rows, self._starts), strict=True):
            np.save(directory / name, array, allow_pickle=False)
        if self.terms is not None:
            self.terms.save(directory)
        (directory / VOCABULARY_FILE).write_text(json.dumps(self.vocabulary, ensure_ascii=False), "utf-8")
        document = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "settings": dataclasses.asdict(self.settings),
            "query_language": self.query_language,
            "count": len(self.product_ids),
            "statistics": self.statistics,
        }
        (directory / SETTINGS_FILE).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path, product_ids: Sequence[str], counts: bool = False) -> Bm25Index:
        """The index `save` wrote, over `product_ids` in the order it was built with (checked by count);
        with `counts`, its term counts too (None in an index of format 2, which saved none)."""
        directory = Path(directory)
        document = json.loads((directory / SETTINGS_FILE).read_text(encoding="utf-8"))
        version = document.get("format_version")
        if document.get("format") != FORMAT or version not in READABLE_VERSIONS:
            raise ValueError(
                f"format {document.get('format')!r} v{version!r}, expected {FORMAT!r} v{FORMAT_VERSION}"
            )
        if document["count"] != len(product_ids):
            raise ValueError(
                f"{directory} indexes {document['count']} products, but {len(product_ids)} ids were given"
            )
        matrix = tuple(np.load(directory / name, allow_pickle=False) for name in MATRIX_FILES)
        vocabulary = json.loads((directory / VOCABULARY_FILE).read_text(encoding="utf-8"))
        terms = None
        if counts and version >= 3:
            terms = load_counts(directory, vocabulary, matrix[2], matrix[1])
        return cls(
            product_ids,
            Bm25Settings(**document["settings"]),
            str(document["query_language"]),
            document["statistics"],
            vocabulary,
            matrix,  # type: ignore[arg-type]
            terms,
        )

    def query_words(self, queries: Sequence[str]) -> list[list[str]]:
        return [analyzer(self.query_language).words(query) for query in queries]

    def search(self, queries: Sequence[str], depth: int) -> list[Ranking]:
        """Each query's matches (rows of `product_ids`), best first (ties by product key), at most `depth`."""
        return [self.rank(words, depth) for words in self.query_words(queries)]

    def rank(self, words: Sequence[str], depth: int) -> Ranking:
        """The ranking of one analyzed query; a word said twice counts twice, as in bm25s."""
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        columns = [self._columns[word] for word in words if word in self._columns]
        if not columns:
            return EMPTY_RANKING
        rows = np.concatenate([self._rows[self._starts[c] : self._starts[c + 1]] for c in columns])
        weights = np.concatenate([self._scores[self._starts[c] : self._starts[c + 1]] for c in columns])
        matched, inverse = np.unique(rows, return_inverse=True)
        # Summed in float64 in the query's word order: every shard count adds the same terms alike.
        totals = np.bincount(inverse, weights=weights.astype(np.float64), minlength=len(matched))
        totals = totals.astype(np.float32)
        if len(matched) > depth:
            keep = np.argpartition(-totals, depth - 1)[:depth]
            threshold = totals[keep].min()
            keep = np.flatnonzero(totals >= threshold)  # ties at the cut stay, then the sort cuts by key
            matched, totals = matched[keep], totals[keep]
        order = np.lexsort((self.keys[matched], -totals))[:depth]
        return Ranking(matched[order].astype(np.int64), totals[order])


__all__ = ["EMPTY_RANKING", "Bm25Index", "Bm25Settings", "LexicalStatistics", "Ranking"]

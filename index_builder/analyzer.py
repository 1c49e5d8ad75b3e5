"""BM25's analyzer: which language a product's text is in, and its words as BM25 indexes them.

A product's text is lower-cased, split into words of two or more word characters (bm25s' and
scikit-learn's pattern), stripped of the language's stop words and stemmed by its Snowball stemmer
(PyStemmer), as an Elasticsearch index configured for that language would. The language comes from the
product's `locale` ("nl_nl", "de", "en_gb", "us"): its language part, or for a bare country code the
country's language. A catalog of several languages is analyzed product by product; a query is analyzed
in the catalog's main language (the one most of its products are in) unless one is given.

On a Dutch store export madr never saw, BM25 with the Dutch analyzer scored NDCG@10 0.683 against 0.584
with the English one (issue 62), which is why the language is not fixed to English.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import bm25s.stopwords as bm25s_stopwords
import Stemmer

# Every catalog was analyzed as English before; a product whose locale names no language still is.
DEFAULT_LANGUAGE = "english"
AUTO = "auto"  # each product's language from its locale
NO_ANALYZER = "none"  # words as written: no stop words, no stemming
# bm25s' `(?u)\b\w\w+\b` finds the same words (a greedy run of word characters ends at a boundary),
# 20 % faster without the boundary tests.
WORD = re.compile(r"\w\w+")
# Part of each product's text fingerprint (`index_builder.term_counts`): change it with anything that
# changes the words a text gives, and every build after re-analyzes every product.
ANALYZER_VERSION = 1

# ISO 639-1 codes (the language part of a locale) of the Snowball languages PyStemmer stems.
_LANGUAGE_CODES = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech", "da": "danish",
    "nl": "dutch", "en": "english", "eo": "esperanto", "et": "estonian", "fi": "finnish", "fr": "french",
    "de": "german", "el": "greek", "hi": "hindi", "hu": "hungarian", "id": "indonesian", "ga": "irish",
    "it": "italian", "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "nb": "norwegian",
    "nn": "norwegian", "fa": "persian", "pl": "polish", "pt": "portuguese", "ro": "romanian",
    "ru": "russian", "sr": "serbian", "st": "sesotho", "es": "spanish", "sv": "swedish", "ta": "tamil",
    "tr": "turkish", "yi": "yiddish",
}  # fmt: skip
# A locale that is a bare country code ("us", the synthetic catalog's and ESCI's): its country's language.
_COUNTRY_LANGUAGES = {
    "us": "english", "gb": "english", "uk": "english", "au": "english", "ca": "english", "ie": "english",
    "nz": "english", "at": "german", "ch": "german", "be": "dutch", "br": "portuguese", "mx": "spanish",
    "se": "swedish", "dk": "danish", "jp": NO_ANALYZER, "cn": NO_ANALYZER,
    "kr": NO_ANALYZER,
}  # fmt: skip
# Languages without a Snowball stemmer: words are kept as written.
_UNSTEMMED_CODES = {"ja", "zh", "ko", "th", "vi"}
# bm25s' stop word lists, by Snowball language name.
_STOPWORDS = {
    "english": bm25s_stopwords.STOPWORDS_EN, "german": bm25s_stopwords.STOPWORDS_GERMAN,
    "dutch": bm25s_stopwords.STOPWORDS_DUTCH, "french": bm25s_stopwords.STOPWORDS_FRENCH,
    "spanish": bm25s_stopwords.STOPWORDS_SPANISH, "portuguese": bm25s_stopwords.STOPWORDS_PORTUGUESE,
    "italian": bm25s_stopwords.STOPWORDS_ITALIAN, "russian": bm25s_stopwords.STOPWORDS_RUSSIAN,
    "swedish": bm25s_stopwords.STOPWORDS_SWEDISH, "norwegian": bm25s_stopwords.STOPWORDS_NORWEGIAN,
    "turkish": bm25s_stopwords.STOPWORDS_TURKISH, "danish": bm25s_stopwords.STOPWORDS_DANISH,
}  # fmt: skip


def languages() -> tuple[str, ...]:
    """The languages an analyzer can be set to: Snowball's, "none", and "auto" (from each locale)."""
    return (AUTO, NO_ANALYZER, *sorted(set(Stemmer.algorithms()) - {"porter", "dutch_porter"}))


def check_language(language: str) -> str:
    """`language` when an analyzer knows it, else a ValueError listing those it knows."""
    if language not in languages():
        raise ValueError(f"unknown BM25 language {language!r}; one of {', '.join(languages())}")
    return language


def language_of_locale(locale: str | None) -> str:
    """The analyzer language of a product's locale: "nl_nl" and "nl-BE" -> dutch, "us" -> english,
    "ja_jp" -> none; a locale naming no language it knows (or none at all) -> `DEFAULT_LANGUAGE`."""
    if not locale:
        return DEFAULT_LANGUAGE
    parts = re.split(r"[_\-]", locale.strip().lower())
    code = parts[0]
    if code in _UNSTEMMED_CODES:
        return NO_ANALYZER
    if len(parts) == 1 and code in _COUNTRY_LANGUAGES:
        return _COUNTRY_LANGUAGES[code]
    return _LANGUAGE_CODES.get(code, DEFAULT_LANGUAGE)


class Analyzer:
    """One language's analysis: lower-case words, its stop words removed, its Snowball stems."""

    def __init__(self, language: str) -> None:
        check_language(language)
        if language == AUTO:
            raise ValueError("an analyzer is for one language; 'auto' picks one per product's locale")
        self.language = language
        self._stopwords = frozenset(_STOPWORDS.get(language, ())) if language != NO_ANALYZER else frozenset()
        self._stemmer = Stemmer.Stemmer(language) if language != NO_ANALYZER else None

    def words(self, text: str) -> list[str]:
        words = [word for word in WORD.findall(text.lower()) if word not in self._stopwords]
        return self._stemmer.stemWords(words) if self._stemmer is not None else words

    def __repr__(self) -> str:
        return f"Analyzer({self.language!r})"


@lru_cache(maxsize=64)
def analyzer(language: str) -> Analyzer:
    """The analyzer of `language`, one per process (a stemmer keeps a cache of the words it stemmed)."""
    return Analyzer(language)


def product_language(setting: str, locale: str | None) -> str:
    """The language a product's text is analyzed in: the setting's, or with "auto" its locale's."""
    return language_of_locale(locale) if setting == AUTO else setting


def analyze(
    texts: Sequence[str], locales: Sequence[str | None], setting: str
) -> tuple[list[list[str]], list[str]]:
    """Each text's words (`Analyzer.words`) and the language they were analyzed in."""
    if len(texts) != len(locales):
        raise ValueError(f"{len(texts)} texts for {len(locales)} locales")
    chosen = [product_language(setting, locale) for locale in locales]
    return [analyzer(language).words(text) for text, language in zip(texts, chosen, strict=True)], chosen


__all__ = [
    "ANALYZER_VERSION",
    "AUTO",
    "DEFAULT_LANGUAGE",
    "NO_ANALYZER",
    "Analyzer",
    "analyze",
    "analyzer",
    "check_language",
    "language_of_locale",
    "languages",
    "product_language",
]

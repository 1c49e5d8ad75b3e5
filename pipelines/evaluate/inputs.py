"""An evaluation's queries and judgments, read and validated before anything is embedded or searched.

An evaluation that cannot score a query is no evaluation: grades stored as strings dead-letter every
judgment, a queries file without `text` every query, and a pipeline that went on would report
`queries_scored 0` and exit 0, and a nightly would publish a night whose quality nobody measured. So
`madr evaluate` and `madr nightly` read both files first, with the validation the stage applies, and
refuse (exit 2, naming the file, the counts and the first reasons) when no query of the split has a
judgment, or when more than --max_dead_letter_fraction of the queries or judgments are rejected.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pipelines.io.parquet_reading import parquet_rows
from pipelines.refusals import StageRefused
from pipelines.settings.options import EvaluateSettings
from schemas import InvalidRecord, validate_judgment, validate_query

# The reasons a refusal quotes: enough to see the pattern, short enough for one line.
REASONS_SHOWN = 3


class EvaluationInputRefused(StageRefused):
    """The queries or judgments are not fit to evaluate with; the message says which file and why."""


@dataclass(frozen=True)
class InputFileCheck:
    """One input file: records read, rejected, and the commonest reasons (with one record's id each)."""

    path: str
    flag: str
    read: int
    rejected: int
    reasons: tuple[str, ...]

    def over(self, fraction: float) -> bool:
        return self.rejected > fraction * self.read

    def line(self) -> str:
        why = f" (first reasons: {'; '.join(self.reasons)})" if self.reasons else ""
        return f"{self.flag} {self.path}: {self.rejected:,} of {self.read:,} records rejected{why}"


def _rows(path: str, flag: str) -> Iterator[Mapping[str, Any]]:
    try:
        yield from parquet_rows(path)
    except FileNotFoundError:
        raise EvaluationInputRefused(
            f"{flag} {path} matches no Parquet file; give the file `madr ingest` wrote"
        ) from None
    except (OSError, ValueError) as error:  # Arrow: "Parquet file size is 0 bytes", a corrupt footer
        raise EvaluationInputRefused(
            f"{flag} {path} cannot be read as Parquet ({' '.join(str(error).split())}): rewrite it, e.g. "
            "with `madr ingest`"
        ) from None


def _checked(
    path: str, flag: str, validate: Callable[[Mapping[str, Any]], Any], keep: Callable[[Any], None]
) -> InputFileCheck:
    """Every record of `path` validated; what `validate` returns of a valid one goes to `keep`."""
    reasons: Counter[str] = Counter()
    example: dict[str, str] = {}
    read = rejected = 0
    for row in _rows(path, flag):
        read += 1
        try:
            keep(validate(row))
        except InvalidRecord as error:
            rejected += 1
            reason = str(error.reason)
            reasons[reason] += 1
            example.setdefault(reason, str(error.record_id))
    shown = tuple(
        f"{reason} ({count:,}×, e.g. {example[reason]!r})"
        for reason, count in reasons.most_common(REASONS_SHOWN)
    )
    return InputFileCheck(path, flag, read, rejected, shown)


def check_evaluation_inputs(settings: EvaluateSettings) -> None:
    """Both files of `settings` read and validated as the evaluation stage will; EvaluationInputRefused
    when the evaluation would score nothing or reject more than --max_dead_letter_fraction of either.
    Of a judgment only its query id is kept: a large judgments file is not held."""
    valid_queries: list[dict[str, Any]] = []
    judged: set[str] = set()
    query_check = _checked(settings.queries, "--queries", validate_query, valid_queries.append)
    judgment_check = _checked(
        settings.judgments, "--judgments", lambda row: validate_judgment(row)["query_id"], judged.add
    )
    split, limit = settings.split, settings.max_dead_letter_fraction
    in_split = {q["query_id"] for q in valid_queries if q["split"] == split}
    fix = (
        "fix the file (`madr ingest` writes both with the types the stage reads), or raise "
        "--max_dead_letter_fraction to evaluate with what is left"
    )
    for check in (query_check, judgment_check):
        if check.read == 0:
            raise EvaluationInputRefused(f"{check.flag} {check.path} holds no record: nothing to evaluate")
        if check.over(limit):
            raise EvaluationInputRefused(
                f"{check.line()}; more than --max_dead_letter_fraction={limit}: {fix}"
            )
    if not in_split & judged:
        splits = Counter(q["split"] for q in valid_queries)
        valid_judgments = judgment_check.read - judgment_check.rejected
        raise EvaluationInputRefused(
            f"no query can be scored: {len(in_split):,} valid queries of split {split!r} in "
            f"{settings.queries} (splits there: {dict(splits) or 'none'}), and {valid_judgments:,} valid "
            f"judgments in {settings.judgments}, none of them for one of those queries; check that the two "
            "files are of one dataset, or pass the split they share with --split"
        )


def require_scored(queries_scored: int, judgments_not_in_catalog: int) -> None:
    """After the search: EvaluationInputRefused when no query was scored after all (every judged
    product missing from the searched catalog, say), so that no metrics of nothing are written."""
    if not queries_scored:
        missing = (
            f" ({judgments_not_in_catalog:,} judgments name products it lacks)"
            if judgments_not_in_catalog
            else ""
        )
        raise EvaluationInputRefused(
            f"no query was scored: none has a judged product in the searched catalog{missing}; check that "
            "--judgments and the index are of one catalog. Nothing was written"
        )


__all__ = [
    "EvaluationInputRefused",
    "InputFileCheck",
    "check_evaluation_inputs",
    "require_scored",
]

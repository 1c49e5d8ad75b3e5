"""Which catalog files a stage read: each file's path, size and modification time, as one digest.

Cheap on an object store too (no byte is read). The nightly records it for its run folder (a run folder
started for another catalog is refused, `pipelines.nightly.inputs`), and the embed stage in its manifest,
so that `madr search`, which shows titles and catalog values from that catalog, can tell when the files
were rewritten since the vectors were made.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from apache_beam.io.filesystems import FileSystems

from pipelines.io.parquet_reading import parquet_pattern


@dataclass(frozen=True)
class CatalogFingerprint:
    """The files a catalog pattern matched, and one digest over their paths, sizes and times."""

    pattern: str
    files: int
    bytes: int
    digest: str

    @classmethod
    def of(cls, products: str) -> CatalogFingerprint:
        pattern = parquet_pattern(products)
        matched = sorted(FileSystems.match([pattern])[0].metadata_list, key=lambda m: m.path)
        if not matched:
            raise FileNotFoundError(
                f"--products {products} matches no Parquet file (give a file, a folder of .parquet "
                "files or a glob)"
            )
        digest = hashlib.sha256()
        for meta in matched:
            digest.update(f"{meta.path}\0{meta.size_in_bytes}\0{meta.last_updated_in_seconds}\n".encode())
        return cls(products, len(matched), sum(m.size_in_bytes for m in matched), digest.hexdigest())

    @classmethod
    def maybe(cls, products: str) -> CatalogFingerprint | None:
        """The fingerprint, or None when no file matches (the stage reading them names that error)."""
        try:
            return cls.of(products)
        except FileNotFoundError:
            return None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CatalogFingerprint:
        return cls(str(data["pattern"]), int(data["files"]), int(data["bytes"]), str(data["digest"]))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def difference(self, other: CatalogFingerprint) -> str:
        """How `other` (now) differs from this (then), in words; empty when they are equal."""
        if other.digest == self.digest:
            return ""
        return (
            f"{self.files:,} file(s) of {self.bytes:,} bytes then, {other.files:,} of {other.bytes:,} "
            "now, or the same sizes rewritten since"
        )


__all__ = ["CatalogFingerprint"]

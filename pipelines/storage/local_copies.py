"""Local copies for libraries that only read or write local files (ScaNN, pathlib code).

`localize` brings a folder (local or gs://) to local disk for reading; `local_output` gives a local
folder to write into that ends up at any path Beam's FileSystems knows, and `publish` copies one there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipelines.storage.staged_output import is_local
from schemas.manifest import MANIFEST_FILE


def localize(path: str, local_dir: str) -> str:
    """A local folder holding the files of `path`: `path` itself when local, else a copy in `local_dir`.

    For libraries that only open local files (ScaNN's `load_searcher`, pathlib code). Every file under
    `path`, subfolders included, is copied byte for byte (no decompression of .gz names) through Beam's
    FileSystems, so any filesystem Beam knows works. The caller owns `local_dir` and deletes it.
    """
    if is_local(path):
        return path
    prefix = path.rstrip("/") + "/"
    # Objects named ".../" are folder placeholders some GCS tools create, not files.
    found = [m for m in FileSystems.match([prefix + "**"])[0].metadata_list if not m.path.endswith("/")]
    if not found:
        raise FileNotFoundError(f"{path} holds no files")
    for metadata in found:
        target = os.path.join(local_dir, *metadata.path[len(prefix) :].split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with (
            FileSystems.open(metadata.path, compression_type=CompressionTypes.UNCOMPRESSED) as source,
            open(target, "wb") as sink,
        ):
            shutil.copyfileobj(source, sink, 1 << 20)
    return local_dir


def publish(local_dir: str, target: str) -> list[str]:
    """Copy every file under the local `local_dir` (subfolders included) into the folder `target`.

    The counterpart of `localize`, for code that can only write local files. Each object becomes visible
    whole when its upload closes, and a top-level manifest.json is copied last: a reader that finds it
    finds every file it lists. Returns the paths written.
    """
    relatives = [
        os.path.relpath(os.path.join(root, name), local_dir).replace(os.sep, "/")
        for root, _dirs, names in os.walk(local_dir)
        for name in names
    ]
    written = []
    for relative in sorted(relatives, key=lambda name: (name == MANIFEST_FILE, name)):
        destination = FileSystems.join(target, *relative.split("/"))
        with (
            open(os.path.join(local_dir, *relative.split("/")), "rb") as reader,
            FileSystems.create(destination, compression_type=CompressionTypes.UNCOMPRESSED) as writer,
        ):
            shutil.copyfileobj(reader, writer, 1 << 20)
        written.append(destination)
    return written


@contextlib.contextmanager
def local_output(target: str) -> Iterator[str]:
    """A local folder to write into that ends up in `target`: `target` itself when local, else a
    temporary folder published to `target` when the block succeeds (and deleted either way)."""
    if is_local(target):
        yield target
        return
    with tempfile.TemporaryDirectory(prefix="madr-output-") as staging:
        yield staging
        publish(staging, target)

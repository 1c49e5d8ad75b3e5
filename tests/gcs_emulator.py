"""A throw-away Google Cloud Storage for tests: the PyPI `gcp-storage-emulator`, on loopback.

How the clients are pointed at it (found by reading google-cloud-storage 3.17 and Beam 2.77's
``apache_beam/io/gcp/gcsio.py`` and ``apache_beam/internal/gcp/auth.py``):

* google-cloud-storage: ``storage.Client`` uses ``STORAGE_EMULATOR_HOST`` as its API endpoint when no
  ``client_options.api_endpoint`` is given, and with the emulator set it falls back to
  ``AnonymousCredentials`` and to the project in ``GOOGLE_CLOUD_PROJECT``. Nothing else is needed.
* Beam's GCS filesystem: ``GCSFileSystem._gcsIO()`` builds a new ``GcsIO`` for every operation, and
  ``GcsIO`` calls ``create_storage_client(options)``, which always asks
  ``auth.get_service_credentials`` first. There is no way to hand it a client or credentials, and the
  ``--no_auth`` pipeline option does NOT help: in 2.77 only the Dataflow API client and the container
  builder read it. ``get_service_credentials`` calls ``google.auth.default()`` under
  ``retry.with_exponential_backoff(num_retries=4, initial_delay_secs=2)``; on a machine without
  application default credentials that is ~22 s of retries (measured) before Beam logs "Connecting
  anonymously" and uses ``storage.Client.create_anonymous_client()``, which does honour
  ``STORAGE_EMULATOR_HOST``. On a machine WITH credentials (a developer's gcloud login) Beam would send
  real tokens, refreshed over the network, to the emulator.
  So `pointed_at` replaces ``google.auth.default`` (the one hook Beam resolves credentials through) by
  one returning ``AnonymousCredentials`` and a fixed project: Beam then builds
  ``storage.Client(credentials=AnonymousCredentials(), project=<--project>)`` at once, and the client's
  endpoint comes from ``STORAGE_EMULATOR_HOST``. Beam passes ``project=`` explicitly, so without
  ``--project`` the client has no project (``project=None`` means "none", not "infer"); reading, writing,
  listing, copying and deleting objects need none. Beam caches the credentials per process
  (``auth._Credentials``); the cache is cleared on entry and exit so the lookup happens under the patch
  and nothing after the tests inherits anonymous credentials.

The emulator runs as a subprocess (not a thread of the test process): its single-threaded HTTP server
then never competes for the GIL with Beam's and torch's threads, and a hung server can be killed.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import google.auth
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

PROJECT = "madr-test"
# The emulator with GCS's generation preconditions (`ifGenerationMatch`), which it ignores by itself.
CAS_LAUNCHER = str(Path(__file__).with_name("gcs_emulator_cas.py"))
START_TIMEOUT_SECONDS = 15.0


class EmulatorError(RuntimeError):
    """The emulator did not start (or stopped) — the message says why and shows its log."""


@dataclass(frozen=True)
class GcsEmulator:
    """A running emulator: its endpoint, the project clients use, and a way to make a client."""

    endpoint: str
    project: str

    def client(self) -> storage.Client:
        """A real google-cloud-storage client for this emulator, independent of the environment."""
        return storage.Client(
            project=self.project,
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": self.endpoint},
        )

    def create_bucket(self, name: str) -> storage.Bucket:
        return self.client().create_bucket(name)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(endpoint: str, project: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/storage/v1/b?project={project}", timeout=0.5) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _log_tail(log_path: str) -> str:
    with open(log_path, errors="replace") as log:
        return log.read()[-2000:] or "(empty)"


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@contextlib.contextmanager
def running_emulator(
    project: str = PROJECT, timeout: float = START_TIMEOUT_SECONDS, attempts: int = 3
) -> Iterator[GcsEmulator]:
    """Start the emulator (`gcs_emulator_cas.py start --in-memory`: the PyPI emulator with generation
    preconditions) on 127.0.0.1 and a free port; stop it after.

    A port picked free can be taken before the emulator binds it, so an emulator that exits at once is
    retried on a new port (`attempts` times). One that neither answers nor exits within `timeout`
    seconds raises `EmulatorError` with its log instead of letting a test hang.
    """
    with tempfile.TemporaryDirectory(prefix="gcs-emulator-") as log_dir:
        log_path = os.path.join(log_dir, "emulator.log")
        for attempt in range(1, attempts + 1):
            port = _free_port()
            endpoint = f"http://127.0.0.1:{port}"
            with open(log_path, "wb") as log:
                process = subprocess.Popen(
                    [sys.executable, CAS_LAUNCHER, "start", "--host", "127.0.0.1",
                     "--port", str(port), "--in-memory", "--quiet"],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )  # fmt: skip
            deadline = time.monotonic() + timeout
            try:
                while not _answers(endpoint, project):
                    if process.poll() is not None:
                        break
                    if time.monotonic() > deadline:
                        raise EmulatorError(
                            f"the GCS emulator did not answer on {endpoint} within {timeout:.0f}s; "
                            f"its log:\n{_log_tail(log_path)}"
                        )
                    time.sleep(0.05)
                else:
                    yield GcsEmulator(endpoint, project)
                    return
            finally:
                _stop(process)
            if attempt == attempts:
                raise EmulatorError(
                    f"the GCS emulator exited with code {process.returncode} on {endpoint} "
                    f"({attempts} attempts); its log:\n{_log_tail(log_path)}"
                )


def _reset_beam_credentials_cache() -> None:
    """Forget the credentials Beam cached for this process (a private class of Beam 2.77; skipped if gone)."""
    with contextlib.suppress(ImportError):
        from apache_beam.internal.gcp import auth

        cache = getattr(auth, "_Credentials", None)
        if cache is not None and hasattr(cache, "_credentials_init"):
            with cache._credentials_lock:
                cache._credentials_init = False
                cache._credentials = None


@contextlib.contextmanager
def pointed_at(emulator: GcsEmulator) -> Iterator[None]:
    """Make every GCS client of this process — google-cloud-storage and Beam's gcsio — use `emulator`."""

    def anonymous_default(*_args: object, **_kwargs: object) -> tuple[AnonymousCredentials, str]:
        return AnonymousCredentials(), emulator.project

    environment = {"STORAGE_EMULATOR_HOST": emulator.endpoint, "GOOGLE_CLOUD_PROJECT": emulator.project}
    with (
        mock.patch.dict(os.environ, environment),
        mock.patch.object(google.auth, "default", anonymous_default),
    ):
        _reset_beam_credentials_cache()
        try:
            yield
        finally:
            _reset_beam_credentials_cache()

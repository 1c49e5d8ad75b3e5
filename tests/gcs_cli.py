"""`madr` pointed at the GCS emulator named by STORAGE_EMULATOR_HOST: the processes of the reliability
suite's gs:// cases (`bench/reliability_object_store.py`) run `python -m tests.gcs_cli nightly ...`.

`tests.gcs_emulator.pointed_at` is what a test process does in-process: Beam's GCS filesystem then uses
anonymous credentials at once instead of retrying google.auth for ~22 s per process."""

from __future__ import annotations

import os
import sys

from jobs.cli import main
from tests.gcs_emulator import PROJECT, GcsEmulator, pointed_at

if __name__ == "__main__":
    emulator = GcsEmulator(
        os.environ["STORAGE_EMULATOR_HOST"], os.environ.get("GOOGLE_CLOUD_PROJECT", PROJECT)
    )
    with pointed_at(emulator):
        sys.exit(main(sys.argv[1:]))

"""`gcp-storage-emulator` with generation preconditions, started by `tests.gcs_emulator.running_emulator`.

The emulator (2026.7) ignores `ifGenerationMatch`: every conditional write succeeds, so two writers
that GCS itself would keep apart both win. madr's object-store root relies on the condition (the LATEST
swap and the writer lock, `pipelines.storage.object_store`), so its tests need an emulator that honours it, as
GCS does (https://cloud.google.com/storage/docs/request-preconditions): on an upload (media, multipart,
or the start of a resumable one) and on a delete, `ifGenerationMatch=G` goes through only when the
object's live generation is G, where 0 means "no live object"; otherwise 412 Precondition Failed and
nothing changes. The emulator's server handles one request at a time, so the check and the write are
one step, as on GCS.

Run as a script (`python tests/gcs_emulator_cas.py start --port N --in-memory`): it patches the
emulator's handlers before its server module reads them, then hands over to the emulator's own main.
"""

from __future__ import annotations

import sys
from http import HTTPStatus
from typing import Any

from gcp_storage_emulator.exceptions import NotFound
from gcp_storage_emulator.handlers import objects


def _object_name(request: Any) -> str | None:
    if "name" in request.query:
        return request.query["name"][0]
    data = request.data
    if isinstance(data, dict):
        return (data.get("meta") or {}).get("name") or data.get("name")
    return request.params.get("object_id")


def _live_generation(storage: Any, bucket: str, name: str) -> int:
    try:
        return int(storage.get_file_obj(bucket, name)["generation"])
    except NotFound:
        return 0


def _conditional(handler: Any) -> Any:
    def checked(request: Any, response: Any, storage: Any, *args: Any, **kwargs: Any) -> Any:
        wanted = request.query.get("ifGenerationMatch")
        if wanted and "upload_id" not in request.query:  # a resumable upload is checked when it starts
            name = _object_name(request)
            if name is not None and int(wanted[0]) != _live_generation(
                storage, request.params["bucket_name"], name
            ):
                response.status = HTTPStatus.PRECONDITION_FAILED
                response.json(
                    {
                        "error": {
                            "code": 412,
                            "message": "At least one of the pre-conditions you specified did not hold.",
                            "errors": [{"reason": "conditionNotMet", "domain": "global"}],
                        }
                    }
                )
                return None
        return handler(request, response, storage, *args, **kwargs)

    return checked


def main() -> None:
    objects.insert = _conditional(objects.insert)
    objects.delete = _conditional(objects.delete)
    from gcp_storage_emulator import __main__ as emulator  # its server module reads the handlers now

    sys.argv[0] = "gcp-storage-emulator"
    emulator.main()


if __name__ == "__main__":
    main()

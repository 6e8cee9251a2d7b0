"""The API's save file endpoints: export a save as one file, import a file as a new save.

`GET /saves/{save_id}/export` answers the file itself (application/json, or application/gzip
with `?compress=gzip`), not a JSON envelope. `POST /universes/{slug}/saves/import` takes the
file as the raw body (JSON or gzip, told apart by its magic bytes; at most
AXIOM_SAVE_FILE_MAX_BYTES, before and after decompression) and answers 201 with the new save.
A malformed file is 400 `invalid_save_file` with every problem and its location in
`details.problems`, and nothing is written. Both need the playtester role (403) and
membership of the universe (404).
"""

from __future__ import annotations

from django.http import HttpRequest, FileResponse, JsonResponse
from ninja import Query

from studio.api import schemas as S
from studio.api import serializers
from studio.api.errors import ApiError
from studio.api.http import body_too_large
from studio.api.ninja_api import router
from studio.api.openapi import SAVE_FILE_BODY, SAVE_FILE_RESPONSE
from studio.saves import portable
from studio.saves.access import Access, save_for, universe_for

IMPORT_CONTENT_TYPES = ("application/json", "application/gzip", "application/x-gzip", "application/octet-stream")
READ_CHUNK = 64 * 1024


@router.get(
    "/saves/{str:save_id}/export",
    response={400: S.Error, 401: S.Error, 403: S.Error, 404: S.Error, 503: S.Error},
    url_name="save_export",
    tags=["Saves"],
    operation_id="exportSave",
    summary="Download the save as one portable file.",
    description="Needs the playtester role. Vector chunks are not in the file; an import rebuilds them.",
    openapi_extra={"responses": {"200": SAVE_FILE_RESPONSE}},
)
def save_export(request: HttpRequest, save_id: str, params: Query[S.ExportQuery]):
    save = save_for(
        user=request.user, save_id=save_id, access=Access.PLAY
    )  # a read, but a playtester's, like an import
    export = portable.save_export(game_save=save, compress=params.compress == "gzip")
    return FileResponse(export.file, as_attachment=True, filename=export.filename, content_type=export.content_type)


def _read_body(request: HttpRequest, limit: int) -> bytes:
    """Read the raw body, at most `limit` bytes (413 beyond), whatever its declared length."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "bad_request", "Content-Length is not a number.") from None
    if declared > limit:
        raise body_too_large(limit)
    chunks, size = [], 0
    while True:
        chunk = request.read(READ_CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise body_too_large(limit)
    return b"".join(chunks)


@router.post(
    "/universes/{str:slug}/saves/import",
    response={
        201: S.SaveImported,
        400: S.Error,
        401: S.Error,
        403: S.Error,
        404: S.Error,
        409: S.Error,
        413: S.Error,
        415: S.Error,
        503: S.Error,
    },
    url_name="save_import",
    tags=["Saves"],
    operation_id="importSave",
    summary="Create a new save from a save file; the file is checked whole first and written all or nothing.",
    description=(
        "The body is the file as exported (JSON, or gzip: told apart by the magic bytes), at most "
        "AXIOM_SAVE_FILE_MAX_BYTES before and after decompression (413 beyond). A malformed file is 400 "
        "`invalid_save_file` with every problem in `details.problems`. The save's lore sync and turn embeddings "
        "are queued when the import commits."
    ),
    openapi_extra={"requestBody": SAVE_FILE_BODY},
)
def save_import(request: HttpRequest, slug: str, params: Query[S.ImportQuery]):
    universe = universe_for(user=request.user, slug=slug, access=Access.PLAY)
    name = params.name
    content_type = request.content_type or ""
    if content_type not in IMPORT_CONTENT_TYPES:
        raise ApiError(
            415,
            "unsupported_media_type",
            "Send the save file as the body: application/json, or application/gzip when compressed.",
            {"content_type": content_type},
        )
    data = _read_body(request, portable.max_file_bytes())
    try:
        result = portable.save_import(universe=universe, data=data, name=name)
    except portable.SaveFileTooLarge as exc:
        raise ApiError(413, "body_too_large", str(exc), {"max_bytes": portable.max_file_bytes()}) from exc
    except portable.SaveFileError as exc:
        raise ApiError(
            400,
            "invalid_save_file",
            "The save file was refused and nothing was imported: " + str(exc),
            {"problems": [p.as_json() for p in exc.problems]},
        ) from exc
    return JsonResponse(
        {
            "save": serializers.save_json(result.game_save),
            "counts": result.counts,
            "warnings": result.warnings,
            "jobs_queued": result.jobs_queued,
        },
        status=201,
    )

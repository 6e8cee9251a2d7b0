"""The API's body field types for the fields with declared limits (`studio/limits.py`).

`limited("turn.narrative")` is the type of a JSON body field that stores into that field:
strict (the JSON type as sent: `true` is not a number, `"1"` is not a number, `1.5` is not
a whole number), with the limit's length or range in the OpenAPI document, and checked by
the limit itself, so the API refuses exactly what the pages, the proxy, the importers and
the save file refuse, with the same message (a 400 `validation_error` naming the field).
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import AfterValidator, Field, Strict
from pydantic_core import PydanticCustomError

from studio import limits

BASE_TYPES = {"text": str, "name": str, "integer": int, "number": float}


def limited(field: str, *, description: str = "", empty_ok: bool = False):
    """Return the pydantic type of a body field that stores into `field` (None allowed if the limit is nullable).

    `empty_ok`: "" means "not given" (an optional name whose default the service picks).
    """
    declared = limits.limit(field)

    def check(value):
        message = "" if empty_ok and value == "" else declared.problem(value)
        if message:
            raise PydanticCustomError("limit", "{message}", {"message": message[0].upper() + message[1:]})
        return value

    constraints = {"description": description} if description else {}
    if declared.kind in ("text", "name") and declared.max_chars:
        constraints["max_length"] = declared.max_chars
    if declared.low is not None:
        constraints["ge"] = declared.low
    if declared.high is not None:
        constraints["le"] = declared.high
    kind = Annotated[BASE_TYPES[declared.kind], Strict(), Field(**constraints), AfterValidator(check)]
    return Optional[kind] if declared.nullable else kind

"""Ids and display names as the API accepts them, checked before anything reaches the database.

Every id the service issues (datasets, fits, API keys) is a UUID (``str(uuid.uuid4())``). A request carrying
something else — not a UUID, a NUL byte or another control character (PostgreSQL refuses NUL in text: a 500
before these checks) — never reaches a query:

* an id in the **path** is a 404: the routes match only ids of the form the service issues (the ``id`` path
  convertor, ``/v1/datasets/{dataset_id:id}``), so a malformed id is a path the API does not have — and never
  shadows a sibling route: ``DELETE /v1/datasets/duplicates`` is a 405, not a lookup of dataset "duplicates".
  The visibility checks (:mod:`privfit.api.auth`) check the form again before any query;
* an id in a **body or query** parameter is a 422 naming the field (:data:`ResourceId`).

Display names (datasets, keys) follow the rules of every name (:mod:`privfit.text`): stored in Unicode NFC, and
refused with a 422 naming the field and the character if they contain a control character (Cc: C0, DEL, C1), a
lone surrogate (Cs, which cannot be stored as UTF-8), a bidirectional control or another invisible character
(:data:`DisplayName`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Path
from pydantic import AfterValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError
from starlette.convertors import Convertor, register_url_convertor

from privfit.text import checked_name, name_pattern

_UUID_REGEX = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_UUID = re.compile(_UUID_REGEX)

#: What a display name may not contain, as a JSON-schema (ECMA-262) pattern (:func:`privfit.text.name_pattern`).
NAME_PATTERN = name_pattern()
NAME_MAX_LENGTH = 200

ID_EXAMPLE = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


def is_resource_id(value: str) -> bool:
    """Whether ``value`` has the form of an id the service issues (a UUID in its 36-character form)."""
    return _UUID.fullmatch(value) is not None


def normalize_id(value: str) -> str:
    """An id in the form the service stores (lower case); only for values :func:`is_resource_id` accepts."""
    return value.lower()


def _check_id(value: str) -> str:
    if not is_resource_id(value):
        raise PydanticCustomError(
            "resource_id", "must be an id issued by this service: a UUID such as {example}", {"example": ID_EXAMPLE}
        )
    return normalize_id(value)


#: An id in a request body or query string: a UUID, else 422 naming the field.
ResourceId = Annotated[
    str,
    AfterValidator(_check_id),
    WithJsonSchema({"type": "string", "format": "uuid", "examples": [ID_EXAMPLE]}),
]

#: A dataset's or key's display name: at most 200 characters, nothing hidden (:func:`privfit.text.checked_name`),
#: stored in NFC.
DisplayName = Annotated[
    str,
    Field(max_length=NAME_MAX_LENGTH),
    AfterValidator(checked_name),
    WithJsonSchema({"type": "string", "maxLength": NAME_MAX_LENGTH, "pattern": NAME_PATTERN}),
]


class IdConvertor(Convertor[str]):
    """The ``{name:id}`` path convertor: a UUID in its 36-character form (either case), given to the route in the
    lower case the service stores."""

    regex = _UUID_REGEX

    def convert(self, value: str) -> str:
        return normalize_id(value)

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("id", IdConvertor())


def id_path(what: str) -> Any:
    """A path parameter holding the id of ``what`` (a ``{name:id}`` segment of the route's path): documented as a
    UUID; a malformed one answers 404, not 422 (module docstring)."""
    return Path(
        description=f"The {what}'s id (a UUID). A malformed id answers 404.",
        json_schema_extra={"format": "uuid"},
    )

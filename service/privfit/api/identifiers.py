"""Ids and display names as the API accepts them, checked before anything reaches the database.

Every id the service issues (datasets, fits, API keys) is a UUID (``str(uuid.uuid4())``). A request carrying
something else — not a UUID, a NUL byte or another control character (PostgreSQL refuses NUL in text: a 500
before these checks) — never reaches a query:

* an id in the **path** is a 404: the routes match only ids of the form the service issues (the ``id`` path
  convertor, ``/v1/datasets/{dataset_id:id}``), so a malformed id is a path the API does not have — and never
  shadows a sibling route: ``DELETE /v1/datasets/duplicates`` is a 405, not a lookup of dataset "duplicates".
  The visibility checks (:mod:`privfit.api.auth`) check the form again before any query. That 404 says what was
  wrong (:func:`malformed_path_id`): the path parameter, that it takes an id, and where the ids are listed —
  ``GET /v1/datasets /loans/budget`` is a name where an id belongs, not a missing page;
* an id in a **body or query** parameter is a 422 naming the field (:data:`ResourceId`).

Display names (datasets, keys) follow the rules of every name (:mod:`privfit.text`): stored in Unicode NFC, and
refused with a 422 naming the field and the character if they contain a control character (Cc: C0, DEL, C1), a
lone surrogate (Cs, which cannot be stored as UTF-8), a bidirectional control or another invisible character
(:data:`DisplayName`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Path
from pydantic import AfterValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError
from starlette.convertors import Convertor, register_url_convertor
from starlette.routing import compile_path

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
        description=f"The {what}'s id (a UUID). A malformed id (e.g. a name) answers 404 with `code` malformed_id, "
        "naming this parameter and where its ids are listed.",
        json_schema_extra={"format": "uuid"},
    )


#: What each id path parameter holds and where a caller finds its ids (the 404 of a malformed id says both).
_PATH_IDS: dict[str, tuple[str, str]] = {
    "dataset_id": ("a dataset id", "GET /v1/datasets (privfit datasets list; the privfit command and Python client "
                   "also take a dataset's name)"),
    "job_id": ("a fit id", "GET /v1/fits (privfit fits list)"),
    "key_id": ("an API key id", "GET /v1/keys (privfit keys list; admins)"),
    "api_key_id": ("an analyst key id", "GET /v1/datasets/{dataset_id}/grants (privfit datasets grants DATASET)"),
}  # fmt: skip
_SHOWN_CHARACTERS = 80  # of the malformed value, in the answer


@dataclass(frozen=True)
class MalformedId:
    """A path segment where a route takes an id (``{name:id}``) but the request has something else."""

    parameter: str
    value: str

    @property
    def detail(self) -> str:
        """What was wrong and what to send instead: the parameter, that it takes an id, where the ids are listed."""
        what, listed = _PATH_IDS.get(self.parameter, ("an id", ""))
        shown = self.value if len(self.value) <= _SHOWN_CHARACTERS else self.value[:_SHOWN_CHARACTERS] + "…"
        listing = f"; list the ids with {listed}" if listed else ""
        return (
            f"{self.parameter}: {shown!r} is not an id. This path takes {what}, a UUID such as {ID_EXAMPLE} (not a "
            f"name){listing}"
        )

    def problem_members(self) -> dict[str, Any]:
        """The members the 404 adds to its problem document: ``code`` and ``errors`` (the ``loc`` of a 422's)."""
        message = f"must be {_PATH_IDS.get(self.parameter, ('an id',))[0]} (a UUID)"
        return {"code": "malformed_id", "errors": [{"loc": ["path", self.parameter], "msg": message,
                                                    "type": "resource_id"}]}  # fmt: skip


def malformed_path_id(route_paths: Iterable[str], path: str) -> MalformedId | None:
    """Why no route matched ``path``, when the reason is a malformed id: the first route (of ``route_paths``, the
    app's path templates) that would match if its ``{name:id}`` segments took any segment, and the first of those
    segments whose value is not an id. None when no such route exists (the path is unknown for another reason)."""
    for template in route_paths:
        if ":id}" not in template:
            continue
        match = _loose(template).fullmatch(path)
        if match is None:
            continue
        for name, value in match.groupdict().items():
            if f"{{{name}:id}}" in template and not is_resource_id(value):
                return MalformedId(name, value)
    return None


@functools.lru_cache(maxsize=256)
def _loose(template: str) -> re.Pattern[str]:
    """``template``'s pattern with each ``{name:id}`` segment taking any segment (``[^/]+``), other parameters
    unchanged."""
    regex, _, _ = compile_path(template.replace(":id}", "}"))
    return regex

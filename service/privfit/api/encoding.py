"""JSON for API responses: FastAPI's encoder, with non-finite floats (an ε of +∞: "no bound", "not admissible")
written as ``null`` — JSON has no Infinity, and Starlette refuses to render one."""

from __future__ import annotations

import math
from typing import Any

from fastapi.encoders import jsonable_encoder


def public_json(value: Any) -> Any:
    """``value`` as JSON-ready data; +∞, −∞ and NaN become ``None``."""
    return _finite(jsonable_encoder(value))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value

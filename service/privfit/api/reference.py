"""The service's front door (``GET /``) and its API reference (``GET /docs``), served from the package alone.

Services that hold private data often run where there is no route to the internet, so nothing here loads from a
CDN (FastAPI's default ``/docs`` and ``/redoc`` pages fetch their scripts and styles from one, and are off): the
Swagger UI and ReDoc assets come from the ``fastapi-offline`` package (MIT; Swagger UI 5 and ReDoc, Apache-2.0 and
MIT, which render OpenAPI 3.1 — the bundle of ``swagger-ui-bundle``, Swagger UI 4, cannot) and are served under
``/docs/assets/``. The pages' favicon is the dashboard's, Swagger UI's only remote fetch of its own — the validator
badge from validator.swagger.io — is switched off, and ReDoc is told not to load Google Fonts. ReDoc's bundle has
one remote fetch built in, the Redocly logo of its "API docs by Redocly" credit (from cdn.redoc.ly, with no option
to turn it off): the bundle is served with that URL replaced by an inline transparent image (:data:`REDOC_LOGO`),
so the credit's text stays and nothing is fetched.

``GET /`` says where things are: the dashboard, the API reference, the OpenAPI document and the health checks —
an HTML page for a browser, JSON for everything else.
"""

from __future__ import annotations

import hashlib
import html
from functools import cache
from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.staticfiles import StaticFiles

from privfit import __version__

ASSETS = "/docs/assets"
ASSET_DIR = Path(fastapi_offline.__file__).parent / "static"  # Swagger UI and ReDoc bundles
FAVICON = "/ui/static/favicon.svg"
REDOC_JS = f"{ASSETS}/redoc.standalone.js"
#: the URL ReDoc's bundle loads its credit's logo from, and what the served bundle loads instead: a 1×1 transparent
#: SVG inline (percent-encoded, so it fits in the bundle's double-quoted string), which the page draws as a gap
REDOC_REMOTE_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
REDOC_LOGO = b"data:image/svg+xml,%3Csvg%20xmlns=%27http://www.w3.org/2000/svg%27%20width=%271%27%20height=%271%27/%3E"

#: What ``GET /`` lists: (key, path, what it is).
LINKS = (
    ("dashboard", "/ui", "the dashboard: datasets, budgets, fits (log in with an API key)"),
    ("api_reference", "/docs", "the HTTP API reference (Swagger UI: try requests)"),
    ("api_reference_redoc", "/redoc", "the HTTP API reference (ReDoc: one page to read)"),
    ("openapi", "/openapi.json", "the OpenAPI document"),
    ("health", "/healthz", "liveness: the process is up"),
    ("readiness", "/readyz", "readiness: database (and broker) reachable, schema current"),
)


def install_api_reference(app: FastAPI) -> None:
    """``GET /``, ``GET /docs``, ``GET /redoc`` and their assets under ``/docs/assets/`` (none in the OpenAPI
    schema). Create ``app`` with ``docs_url=None, redoc_url=None`` so that FastAPI's CDN-backed pages are not served.
    ReDoc's bundle is the one asset not served as shipped (:func:`redoc_bundle`); its route comes before the mount
    of the assets, which would otherwise answer for it."""

    @app.get(REDOC_JS, include_in_schema=False)
    def redoc_script(request: Request) -> Response:
        body, etag = redoc_bundle()
        headers = {"ETag": etag, "Cache-Control": "no-cache"}  # revalidated: the package may be upgraded in place
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="text/javascript; charset=utf-8", headers=headers)

    app.mount(ASSETS, StaticFiles(directory=ASSET_DIR), name="api-reference-assets")

    @app.get("/docs", include_in_schema=False)
    def api_reference() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} {app.version} — API reference",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=FAVICON,
            # Swagger UI's one remote fetch of its own: the spec-validator badge (validator.swagger.io)
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/redoc", include_in_schema=False)
    def api_reference_redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} {app.version} — API reference",
            redoc_js_url=REDOC_JS,
            redoc_favicon_url=FAVICON,
            with_google_fonts=False,
        )

    @app.get("/", include_in_schema=False)
    def front_door(request: Request) -> Response:
        if "text/html" in request.headers.get("accept", ""):
            return HTMLResponse(_front_page())
        return JSONResponse(_front_json())


@cache
def redoc_bundle() -> tuple[bytes, str]:
    """ReDoc's standalone bundle with its one built-in remote fetch (:data:`REDOC_REMOTE_LOGO`) replaced by
    :data:`REDOC_LOGO`, and its ETag; read once per process (1 MB), on the first request for it."""
    body = (ASSET_DIR / "redoc.standalone.js").read_bytes().replace(REDOC_REMOTE_LOGO, REDOC_LOGO)
    return body, f'"{hashlib.sha256(body).hexdigest()[:32]}"'


def _front_json() -> dict[str, Any]:
    return {"service": "privfit", "version": __version__, **{key: path for key, path, _ in LINKS}}


def _front_page() -> str:
    items = "\n".join(
        f'    <li><a href="{path}">{html.escape(path)}</a> — {html.escape(what)}</li>' for _, path, what in LINKS
    )
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n  <meta charset="utf-8">\n'
        f'  <title>privfit {html.escape(__version__)}</title>\n  <link rel="icon" href="{FAVICON}">\n</head>\n'
        f"<body>\n  <h1>privfit {html.escape(__version__)}</h1>\n"
        "  <p>Differentially private model fitting with a Rényi-DP privacy ledger.</p>\n"
        f"  <ul>\n{items}\n  </ul>\n</body>\n</html>\n"
    )

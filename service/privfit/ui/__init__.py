"""The browser dashboard at ``/ui``: a static shell and its assets, served by the API process.

Auth model
----------
The page is a static shell that contains no data: ``GET /ui`` returns the same ``index.html`` to everyone, and
the assets under ``/ui/static/`` are plain files shipped inside the package (vanilla ES modules, one stylesheet,
hand-written SVG charts; no build step, no CDN, no request leaves the origin). Every datum the dashboard shows is
fetched by the browser from the v1 API with the user's own API key, sent as ``Authorization: Bearer <key>``, so
the API's roles, grants and 404-for-strangers rules apply to the dashboard exactly as they do to any other client.

The login form checks the key against ``GET /v1/me`` and, if it is accepted, keeps it in ``sessionStorage``:
it survives reloads of the tab but is gone when the tab closes, and it is never written to a cookie (so the
API cannot be driven cross-site by ambient credentials) nor to ``localStorage``. "Log out" clears it.

The responses of ``/ui`` carry a strict Content-Security-Policy (scripts, styles and connections from this
origin only; no inline script or style; no framing) and ``X-Content-Type-Options: nosniff``; the scripts put
server-provided strings into the page with ``textContent`` only, never as HTML.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).parent / "static"
"""The dashboard's assets, shipped as package data (``privfit.ui.static`` in pyproject.toml)."""

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; "
    "frame-ancestors 'none'"
)

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
"""Headers on every response of the dashboard (the page and its assets)."""


class _SecuredStaticFiles(StaticFiles):
    """:class:`StaticFiles` that adds :data:`SECURITY_HEADERS` and asks browsers to revalidate (ETag) each load,
    so a server upgrade never leaves a tab running a stale mix of modules."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        response.headers.setdefault("Cache-Control", "no-cache")
        return response


def _page() -> FileResponse:
    """The static shell (no data in it; see the module docstring)."""
    return FileResponse(
        STATIC_DIR / "index.html",
        media_type="text/html; charset=utf-8",
        headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"},
    )


def mount_ui(app: FastAPI) -> None:
    """Serve the dashboard on ``app``: ``GET /ui`` and ``GET /ui/`` (the page) and ``/ui/static/…`` (assets).

    None of these routes appears in the OpenAPI schema.
    """

    @app.get("/ui", include_in_schema=False)
    def ui_page() -> FileResponse:
        return _page()

    @app.get("/ui/", include_in_schema=False)
    def ui_page_slash() -> FileResponse:
        return _page()

    app.mount("/ui/static", _SecuredStaticFiles(directory=STATIC_DIR), name="ui-static")

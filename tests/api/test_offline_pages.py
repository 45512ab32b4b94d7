"""Issue 24: the API reference and the dashboard work on a machine with no route to the internet — no page the
service serves loads anything from another host — and ``GET /`` says where things are."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from privfit.api.reference import ASSET_DIR, REDOC_LOGO, REDOC_REMOTE_LOGO

#: an absolute or protocol-relative URL of another host (XML/SVG namespace identifiers are names, never fetched)
EXTERNAL = re.compile(r"""(?:https?:)?//(?!www\.w3\.org/)[a-z0-9-]+(?:\.[a-z0-9-]+)+""", re.I)


def _loads(html: str) -> list[str]:
    """What an HTML page loads: its src/href attributes and CSS url(…) references."""
    return re.findall(r"""(?:src|href)=["']([^"']+)""", html) + re.findall(r"""url\(["']?([^"')]+)""", html)


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/ui", "/"])
def test_no_page_loads_anything_from_another_host(idle_client: TestClient, path: str) -> None:
    """Every src/href of the page is a same-origin path that answers 200 (so the page renders offline)."""
    page = idle_client.get(path, headers={"accept": "text/html"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for reference in _loads(page.text):
        assert not EXTERNAL.match(reference), f"{path} loads {reference}"
        if reference.startswith("/"):
            assert idle_client.get(reference.split("#")[0]).status_code == 200, reference


def test_the_dashboards_own_assets_name_no_other_host(idle_client: TestClient) -> None:
    """privfit's own scripts and styles (not the third-party Swagger bundle) contain no URL of another host."""
    page = idle_client.get("/ui").text
    assets = [ref for ref in _loads(page) if ref.startswith("/ui/static/")]
    assert any(ref.endswith(".js") for ref in assets) and any(ref.endswith(".css") for ref in assets)
    for asset in assets:
        text = idle_client.get(asset).text
        assert not EXTERNAL.search(text), (asset, EXTERNAL.search(text))


def test_the_api_reference_is_served_from_the_package(idle_client: TestClient) -> None:
    page = idle_client.get("/docs").text
    assert "/docs/assets/swagger-ui-bundle.js" in page and "/openapi.json" in page
    assert '"validatorUrl": null' in page  # Swagger UI's own remote fetch (the validator badge) is off
    script = idle_client.get("/docs/assets/swagger-ui-bundle.js")
    assert script.status_code == 200 and len(script.content) > 500_000  # the real bundle, not a stub
    redoc = idle_client.get("/redoc").text
    assert "/docs/assets/redoc.standalone.js" in redoc and "fonts.googleapis" not in redoc


def test_redocs_bundle_is_served_without_its_remote_logo(idle_client: TestClient) -> None:
    """Issue 36: ReDoc's bundle fetches the logo of its "API docs by Redocly" credit from cdn.redoc.ly; the bundle
    served is the shipped one with that URL (and only it) replaced by an inline image, and it revalidates by ETag."""
    shipped = (ASSET_DIR / "redoc.standalone.js").read_bytes()
    assert shipped.count(REDOC_REMOTE_LOGO) == 1  # the fetch this test is about is still in the package's bundle
    served = idle_client.get("/docs/assets/redoc.standalone.js")
    assert served.status_code == 200 and served.headers["content-type"].startswith("text/javascript")
    assert b"cdn.redoc.ly" not in served.content and served.content.count(REDOC_LOGO) == 1
    assert served.content == shipped.replace(REDOC_REMOTE_LOGO, REDOC_LOGO)  # nothing else changed
    etag = served.headers["etag"]
    again = idle_client.get("/docs/assets/redoc.standalone.js", headers={"if-none-match": etag})
    assert again.status_code == 304 and again.headers["etag"] == etag and not again.content
    assert idle_client.get("/docs/assets/swagger-ui.css").status_code == 200  # the other assets as shipped


def test_the_front_door_says_where_things_are(idle_client: TestClient) -> None:
    as_json = idle_client.get("/", headers={"accept": "application/json"})
    assert as_json.status_code == 200
    body = as_json.json()
    assert body["service"] == "privfit" and body["dashboard"] == "/ui" and body["api_reference"] == "/docs"
    assert body["health"] == "/healthz" and body["openapi"] == "/openapi.json"
    for path in (body["dashboard"], body["api_reference"], body["health"], body["openapi"]):
        assert idle_client.get(path).status_code == 200, path
    page = idle_client.get("/", headers={"accept": "text/html,application/xhtml+xml"})
    assert page.headers["content-type"].startswith("text/html") and 'href="/ui"' in page.text

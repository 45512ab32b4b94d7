"""Uploads encoded while their body arrives (``privfit.api.upload_stream``, issue 40): a CSV whose schema comes
first is encoded by the upload's thread from the body's bytes and gives the dataset the file gives when encoded
whole; any other upload (schema after the file, Parquet, errors, caps) is encoded from the spooled part as before,
with the same answers; nothing is left behind; the event loop's pipe is bounded and never left waiting."""

from __future__ import annotations

import asyncio
import io
import json
import threading

import pytest
from api_helpers import SMALL_SCHEMA, small_csv
from test_api_bad_input import assert_nothing_stored, assert_problem

from privfit.api import upload_stream
from privfit.api.upload_stream import BodyPipe, StreamedUpload
from privfit.datasets.columnar import encode_csv_upload


@pytest.fixture
def outcomes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each upload's endpoint got a streamed encoding (True) or encoded the spooled file (False)."""
    seen: list[bool] = []
    original = StreamedUpload.encoded

    def spy(self, schema_text):  # type: ignore[no-untyped-def]
        result = original(self, schema_text)
        seen.append(result is not None)
        return result

    monkeypatch.setattr(StreamedUpload, "encoded", spy)
    return seen


def multipart(parts: list[tuple[str, str | None, bytes, str | None]], boundary: str = "b0undary") -> bytes:
    """A multipart/form-data body of (name, filename, content, content type) in this order."""
    out = io.BytesIO()
    for name, filename, content, content_type in parts:
        out.write(f"--{boundary}\r\n".encode())
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out.write(f"Content-Disposition: {disposition}\r\n".encode())
        if content_type:
            out.write(f"Content-Type: {content_type}\r\n".encode())
        out.write(b"\r\n" + content + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue()


FORM = "multipart/form-data; boundary=b0undary"


def post_parts(client, keys, parts, headers=None):  # type: ignore[no-untyped-def]
    return client.post(
        "/v1/datasets", content=multipart(parts), headers={**(headers or keys.owner), "content-type": FORM}
    )


SCHEMA = json.dumps(SMALL_SCHEMA).encode()


def test_a_csv_after_its_schema_is_encoded_as_it_arrives_into_the_same_dataset(client, keys, outcomes):
    csv = small_csv(20000)  # several of Arrow's blocks
    expected = encode_csv_upload(io.BytesIO(csv), SMALL_SCHEMA)
    first = post_parts(client, keys, [("schema", None, SCHEMA, None), ("allow_duplicate", None, b"true", None),
                                      ("file", "d.csv", csv, "text/csv")])  # fmt: skip
    assert first.status_code == 201, first.text
    after = post_parts(client, keys, [("file", "d.csv", csv, "text/csv"), ("schema", None, SCHEMA, None),
                                      ("allow_duplicate", None, b"true", None)])  # fmt: skip
    assert after.status_code == 201, after.text
    assert outcomes == [True, False]  # the schema after the file: encoded from the spool
    for response in (first, after):
        body = response.json()
        assert (body["n"], body["d"], body["content_hash"]) == (20000, 5, expected.content_hash)
        assert body["name"] == "d.csv"


def test_clipped_cells_are_counted_by_the_streamed_encoding(client, keys, outcomes):
    csv = small_csv(500).replace(b"\n0.", b"\n7.", 3)  # three x1 cells above the declared upper bound 1
    response = post_parts(client, keys, [("schema", None, SCHEMA, None), ("file", "d.csv", csv, "text/csv")])
    assert response.status_code == 201, response.text
    assert outcomes == [True]
    assert response.json()["clipped_cells"]["x1"] == 3


def test_a_schema_sent_twice_is_encoded_with_the_one_the_endpoint_takes(client, keys, outcomes):
    other = json.dumps({**SMALL_SCHEMA, "budget": {**SMALL_SCHEMA["budget"], "epsilon": 3.5}}).encode()
    response = post_parts(client, keys, [("schema", None, SCHEMA, None), ("file", "d.csv", small_csv(300), None),
                                         ("schema", None, other, None)])  # fmt: skip
    assert response.status_code == 201, response.text
    assert response.json()["schema"]["budget"]["epsilon"] == 3.5
    assert outcomes == [False]  # the last schema (FastAPI's) is not the one the thread encoded with


@pytest.mark.parametrize(
    ("content", "status", "needle"),
    [
        (small_csv(3000).replace(b"red", b"purple", 1), 422, "color"),  # an unknown level: column and line
        (small_csv(3000) + b"1,2\n", 422, "line 3002"),  # a short record at the end
        (small_csv(3000).replace(b"\n", b'\n"q",', 1), 422, "line"),  # quoting: the exact path decides
        (b"x1,x2,color,y\n", 422, "no data rows"),
        (b"", 422, ""),
    ],
)
def test_streamed_refusals_are_the_ones_of_the_spooled_file(client, keys, outcomes, content, status, needle):
    response = post_parts(client, keys, [("schema", None, SCHEMA, None), ("file", "d.csv", content, "text/csv")])
    assert_problem(response, status, needle)
    assert outcomes == [False]
    assert_nothing_stored(client)


def test_a_long_cell_after_an_invalid_one_is_refused_by_the_cap_first(client, keys, outcomes):
    client.app.state.settings.max_cell_bytes = 64
    csv = small_csv(3000).replace(b"red", b"purple", 1) + b"0.1,0.2," + b"r" * 100 + b",yes\n"
    response = post_parts(client, keys, [("schema", None, SCHEMA, None), ("file", "d.csv", csv, "text/csv")])
    assert_problem(response, 422, "max_cell_bytes")
    assert outcomes == [False]
    assert_nothing_stored(client)


def test_a_matrix_over_the_cap_is_refused_with_413(client, keys, outcomes):
    client.app.state.settings.max_matrix_bytes = 1000 * 6 * 8
    response = post_parts(client, keys, [("schema", None, SCHEMA, None), ("file", "d.csv", small_csv(3000), None)])
    assert_problem(response, 413, "max_matrix_bytes")
    assert outcomes == [False]
    assert_nothing_stored(client)


def test_a_stranger_gets_401_and_no_streamed_work(client, keys, outcomes, monkeypatch):
    started = []
    monkeypatch.setattr(upload_stream, "StreamedUpload", lambda **kw: started.append(kw))
    response = post_parts(client, keys, [("schema", None, SCHEMA, None), ("file", "d.csv", small_csv(100), None)],
                          headers={"Authorization": "Bearer nope"})  # fmt: skip
    assert response.status_code == 401
    analyst = post_parts(client, keys, [("schema", None, SCHEMA, None), ("file", "d.csv", small_csv(100), None)],
                         headers=keys.analyst)  # fmt: skip
    assert analyst.status_code == 403
    assert started == [] and outcomes == []


def test_a_malformed_form_is_a_400(client, keys, outcomes):
    body = multipart([("schema", None, SCHEMA, None), ("file", "d.csv", small_csv(100), None)])
    response = client.post("/v1/datasets", content=body[:-40],  # cut inside the file part: no closing boundary
                           headers={**keys.owner, "content-type": FORM})  # fmt: skip
    assert response.status_code in (400, 422), response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert_nothing_stored(client)
    assert not [t for t in threading.enumerate() if t.name == "privfit-upload"]  # no thread left waiting


def test_the_pipe_is_bounded_spools_everything_and_unblocks_on_abort(tmp_path):
    async def scenario() -> None:
        spool = (tmp_path / "spool").open("w+b")
        pipe = BodyPipe(asyncio.get_running_loop(), spool, limit=100)
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.extend(iter(lambda: pipe.read(7), b"")))
        await pipe.put(b"x" * 150)  # over the limit: accepted (the buffer was below it)
        put = asyncio.ensure_future(pipe.put(b"y" * 10))
        await asyncio.sleep(0.05)
        assert not put.done()  # waits for room
        reader.start()
        await asyncio.wait_for(put, 5)
        pipe.finish()
        await asyncio.get_running_loop().run_in_executor(None, reader.join)
        assert b"".join(got) == b"x" * 150 + b"y" * 10 and all(len(g) == 7 for g in got[:-1])
        spool.seek(0)
        assert spool.read() == b"x" * 150 + b"y" * 10
        blocked = BodyPipe(asyncio.get_running_loop(), spool, limit=1)
        await blocked.put(b"ab")
        waiting = asyncio.ensure_future(blocked.put(b"c"))
        await asyncio.sleep(0.01)
        blocked.abort()  # the reader went away: the loop must not wait forever
        await asyncio.wait_for(waiting, 5)
        with pytest.raises(upload_stream._Aborted):
            blocked.read(1)
        spool.close()

    asyncio.run(scenario())

"""The one upload seam through its HTTP endpoint: streamed with the size limit enforced
while reading, collision-free sanitised names, types sniffed from the bytes, and the
conversation checked to be the caller's (seed 001 "Multimodal attachments"; check F3)."""

from __future__ import annotations

import asyncio
import os
from urllib.parse import quote

import httpx
import pytest

from skald_host.core.files.service import UploadTooLarge

from tests.chat.support import new_conversation

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 64
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64


async def upload(client, conversation_id: str, name: str, body, content_type: str = "application/octet-stream"):
    return await client.post(
        f"/api/conversations/{conversation_id}/uploads",
        content=body,
        headers={"X-Filename": quote(name), "Content-Type": content_type},
    )


async def announce_only(files, path: str, length: int) -> int:
    """Send only the request head with a ``Content-Length`` and read the status line:
    a server that waited for the body would never answer."""
    host, port = files.host.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = {"Host": f"{host}:{port}", "Content-Length": str(length), "X-Filename": "big.bin", **files.alice.headers("POST")}
    writer.write((f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode())
    await writer.drain()
    try:
        line = await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()
    return int(line.split()[1])


async def stream_chunked(files, path: str, total: int, chunk: int = 16384) -> int | None:
    """Send a chunked body of up to ``total`` bytes, stopping when the server answers;
    the status, or None when the server reset the connection first (a raw socket: an
    HTTP client treats an early answer on a closed connection as an error)."""
    host, port = files.host.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = {"Host": f"{host}:{port}", "Transfer-Encoding": "chunked", "X-Filename": "big.bin", **files.alice.headers("POST")}
    writer.write((f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode())
    answer = asyncio.ensure_future(reader.readline())
    sent = 0
    try:
        while sent < total and not answer.done():
            writer.write(f"{chunk:x}\r\n".encode() + b"b" * chunk + b"\r\n")
            sent += chunk
            await writer.drain()
            await asyncio.sleep(0.001)
        line = await asyncio.wait_for(answer, 10)
    except (ConnectionResetError, BrokenPipeError):
        try:
            line = await asyncio.wait_for(answer, 10)
        except (ConnectionResetError, BrokenPipeError):
            return None
    finally:
        writer.close()
    return int(line.split()[1]) if line else None


def uploads_dir(files, member, conversation_id: str):
    return files.core.files.home(member.id) / "uploads" / conversation_id


async def test_upload_lands_in_the_home_with_a_sniffed_type_and_the_agent_path(files):
    alice = await files.member("alice")
    cid = await new_conversation(files.alice)
    response = await upload(files.alice, cid, "photo.png", PNG, "image/png")
    assert response.status_code == 201, response.text
    saved = response.json()
    assert saved == {"path": f"uploads/{cid}/photo.png", "name": "photo.png", "mime": "image/png", "size": len(PNG), "is_image": True}
    on_disk = uploads_dir(files, alice, cid) / "photo.png"
    assert on_disk.read_bytes() == PNG
    if os.geteuid() == 0:  # the sandbox uid owns it, so the member's commands can use it
        assert on_disk.stat().st_uid == files.core.files.uid_for(alice.id) >= 20000


async def test_types_come_from_the_bytes_not_the_name_or_the_claim(files):
    cid = await new_conversation(files.alice)
    cases = {
        "fake.png": (b"this is not a picture\n", "text/plain", False),
        "real.txt": (JPEG, "image/jpeg", True),
        "doc.pdf": (b"%PDF-1.7\n...", "application/pdf", False),
        "bundle.zip": (b"PK\x03\x04rest", "application/zip", False),
        "noise.png": (bytes(range(256)) * 4, "application/octet-stream", False),
        "umlaut.txt": ("Grüße aus Köln\n".encode(), "text/plain", False),
    }
    for name, (body, mime, is_image) in cases.items():
        response = await upload(files.alice, cid, name, body, "image/png")
        assert response.status_code == 201, response.text
        assert (response.json()["mime"], response.json()["is_image"]) == (mime, is_image), name


async def test_names_are_sanitised_and_never_collide(files):
    alice = await files.member("alice")
    cid = await new_conversation(files.alice)
    names = [(await upload(files.alice, cid, "report.txt", b"x")).json()["name"] for _ in range(3)]
    assert names == ["report.txt", "report (2).txt", "report (3).txt"]
    # The number goes before an extension, and at the end of a name with none ("v1.2" is no extension's dot).
    other = await new_conversation(files.alice)
    odd = [(await upload(files.alice, other, "notes v1..=2Fdraft", b"x")).json()["name"] for _ in range(2)]
    assert odd == ["notes v1..=2Fdraft", "notes v1..=2Fdraft (2)"]
    hostile = {
        "../../etc/passwd": "passwd",
        "/etc/shadow": "shadow",
        "..\\..\\win.ini": "_.._win.ini",  # not a Windows absolute path: its backslashes are characters
        "C:\\Windows\\win.ini": "win.ini",  # one: what old browsers sent, its last part is the name
        ".bashrc": "bashrc",
        "a\u202egnp.exe": "agnp.exe",
        "tab\tand\nnewline.txt": "tabandnewline.txt",
        "..": "upload",
        "%2e%2e%2fescape.txt": "%2e%2e%2fescape.txt",
        "\uff0e\uff0e\uff0fetc\uff0fpasswd": "\uff0e\uff0e\uff0fetc\uff0fpasswd",  # fullwidth lookalikes stay one name
        "x" * 400 + ".txt": "x" * 196 + ".txt",
    }
    for raw, expected in hostile.items():
        response = await upload(files.alice, cid, raw, b"data")
        assert response.status_code == 201, (raw, response.text)
        assert response.json()["name"] == expected, raw
        assert response.json()["path"] == f"uploads/{cid}/{expected}"
    folder = uploads_dir(files, alice, cid)
    assert sorted(p.name for p in folder.iterdir()) == sorted(["report.txt", "report (2).txt", "report (3).txt", *hostile.values()])


async def test_a_body_over_the_limit_is_refused_and_leaves_no_partial_file(files):
    alice = await files.member("alice")
    cid = await new_conversation(files.alice)
    limit = files.core.settings.files.upload_max_bytes
    folder = files.core.files.home(alice.id)
    before = sorted(str(p) for p in folder.rglob("*"))

    # Announced too large: refused from the headers alone, before any body is sent.
    status = await announce_only(files, f"/api/conversations/{cid}/uploads", limit + 1)
    assert status == 413

    # Chunked (no Content-Length): refused once past the limit, while the client is still
    # sending; the rest of the body is never read.
    # The answer is a 413 or, when the server's close overtakes it (its socket still
    # held unread body), a reset connection; either way nothing is stored.
    status = await stream_chunked(files, f"/api/conversations/{cid}/uploads", limit * 8)
    assert status in (413, None)
    assert (await files.alice.get("/api/auth/session")).status_code == 200  # the server is fine

    # The seam itself stops reading at the limit: the rest of the stream is never pulled.
    pulled = 0

    async def endless():
        nonlocal pulled
        while True:
            pulled += 1
            yield b"d" * 4096

    with pytest.raises(UploadTooLarge):
        await files.core.files.save_upload(alice.id, cid, "endless.bin", endless())
    assert pulled == limit // 4096 + 1
    after = sorted(str(p) for p in folder.rglob("*"))
    leftovers = [p for p in after if p not in before and not p.endswith(f"uploads/{cid}") and not p.endswith("uploads")]
    assert leftovers == []

    # Exactly the limit is fine.
    response = await upload(files.alice, cid, "ok.bin", b"c" * limit)
    assert response.status_code == 201, response.text
    assert response.json()["size"] == limit


async def test_uploads_need_the_callers_own_conversation_and_a_readable_name(files):
    alice_cid = await new_conversation(files.alice)
    response = await upload(files.bob, alice_cid, "x.txt", b"hi")
    assert response.status_code == 404
    response = await upload(files.bob, "nonexistent", "x.txt", b"hi")
    assert response.status_code == 404
    bob_cid = await new_conversation(files.bob)
    response = await files.bob.post(f"/api/conversations/{bob_cid}/uploads", content=b"hi")
    assert response.status_code == 201 and response.json()["name"] == "upload"
    response = await files.bob.post(f"/api/conversations/{bob_cid}/uploads", content=b"hi", headers={"X-Filename": "%ff%fe"})
    assert response.status_code == 400 and response.json()["field"] == "filename"
    anonymous = httpx.AsyncClient(base_url=files.host.url)
    try:
        response = await anonymous.post(f"/api/conversations/{bob_cid}/uploads", content=b"hi", headers={"X-Filename": "x"})
        assert response.status_code == 401
    finally:
        await anonymous.aclose()
    bob = await files.member("bob")
    assert not (files.core.files.home(bob.id) / "uploads" / alice_cid).exists()


async def test_a_raw_utf8_file_name_is_refused_with_what_to_send_never_saved_garbled(files):
    """HTTP header values are Latin-1: a client that puts ``rawé`` in X-Filename as
    raw UTF-8 bytes would have the file saved as ``rawÃ©``. It is refused (400, with a
    code the reader's language words) and nothing is saved; percent-encoded, the same
    name is kept as sent."""
    cid = await new_conversation(files.bob)
    response = await files.bob.post(f"/api/conversations/{cid}/uploads", content=b"hi", headers={"X-Filename": "rawé".encode()})
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["field"] == "filename" and body["code"] == "filename_not_encoded" and body["values"] == {"header": "X-Filename"}
    assert "percent-encoded" in body["error"]
    english, german = (files.core.strings.lookup("core.error.filename_not_encoded", locale) for locale in ("en", "de"))
    assert "{header}" in english and "{header}" in german and german.startswith("Der Dateiname")
    bob = await files.member("bob")
    assert not (files.core.files.home(bob.id) / "uploads" / cid).exists()
    response = await upload(files.bob, cid, "rawé", b"hi")
    assert response.status_code == 201 and response.json()["name"] == "rawé"


async def test_an_uploads_folder_made_a_link_from_the_sandbox_is_refused_not_followed(files, tmp_path):
    """The sandbox owns the home: it can turn ``~/uploads`` (or a conversation's folder
    in it) into a link. The upload is refused with the reason; nothing is made or
    given to the member's uid where the link points."""
    alice = await files.member("alice")
    cid = await new_conversation(files.alice)
    outside = tmp_path / "outside"
    outside.mkdir()
    home = files.core.files.home(alice.id)
    for link in (home / "uploads", home / "uploads" / cid):
        if (home / "uploads").is_symlink():
            (home / "uploads").unlink()
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(outside)
        response = await upload(files.alice, cid, "photo.png", PNG, "image/png")
        assert response.status_code == 400, response.text
        assert "is not a folder" in response.json()["error"]
        assert list(outside.iterdir()) == []
        link.unlink()
    response = await upload(files.alice, cid, "photo.png", PNG, "image/png")
    assert response.status_code == 201, response.text


async def test_an_upload_over_the_limit_is_refused_with_the_limit_named(files):
    cid = await new_conversation(files.alice)
    limit = files.core.settings.files.upload_max_bytes
    response = await upload(files.alice, cid, "huge.bin", b"h" * (limit + 1))
    assert response.status_code == 413
    assert (response.json()["code"], response.json()["values"]) == ("upload_too_large", {"limit": limit, "size": "256 KiB", "size_bytes": limit})
    for locale, words in (("en", "upload limit of 256 KiB"), ("de", "Upload-Grenze von 256 KiB")):
        text = files.core.strings.lookup("core.error.upload_too_large", locale).format(**response.json()["values"])
        assert words in text, text


async def test_an_empty_file_is_refused_as_the_phone_app_refuses_it(files):
    """The web chat stored a 0-byte attachment and told the model of it (newcomer
    probe); the phone app already refused one."""
    alice = await files.member("alice")
    cid = await new_conversation(files.alice)
    response = await upload(files.alice, cid, "empty.txt", b"", "text/plain")
    assert response.status_code == 400 and response.json()["code"] == "upload_empty", response.text
    assert not uploads_dir(files, alice, cid).exists() or not any(uploads_dir(files, alice, cid).iterdir())


def test_a_limit_reads_in_the_largest_whole_unit():
    from skald_host.web.routes.files import size_text

    assert [size_text(n) for n in (512, 256 * 1024, 256 * 1024**2, 1536 * 1024**2)] == ["512 B", "256 KiB", "256 MiB", "1.5 GiB"]
    assert size_text(1536 * 1024**2, "de") == "1,5 GiB"  # the reader's decimal comma


def test_a_size_in_a_refusal_reads_in_the_readers_number_format(files):
    """A German reader read "größer als die Upload-Grenze von 1.5 GiB", an English
    decimal point (German-member probe): the refusal carries the byte count beside the
    text (``size_bytes``, ``left_bytes``), and the reader's language says it in its own
    format, here as in the shell (``errorString`` with ``formatSize``)."""
    from skald_host.core.files.service import UploadTooLarge
    from skald_host.core.refusal import Refusal
    from skald_host.web.routes.files import _files_error, upload_too_large

    strings, limit = files.core.strings, 1536 * 1024**2
    refused = upload_too_large(limit)
    assert refused.values == {"limit": limit, "size": "1.5 GiB", "size_bytes": limit}
    said = strings.reason({"code": "upload_too_large", "values": refused.values}, "de")
    assert said == "Die Datei ist größer als die Upload-Grenze von 1,5 GiB.", said
    assert strings.reason({"code": "upload_too_large", "values": refused.values}, "en").endswith("upload limit of 1.5 GiB.")
    # A channel words a refusal so too (``strings.refusal``).
    assert "1,5 GiB" in strings.refusal(Refusal("too large", code="upload_too_large", **refused.values), "de")

    answer = _files_error(UploadTooLarge("the home is full", left=1536 * 1024))
    assert answer.values == {"left": "1.5 MiB", "left_bytes": 1536 * 1024}
    assert "nur noch 1,5 MiB frei" in strings.reason({"code": "home_full", "values": answer.values}, "de")


async def test_an_upload_that_does_not_fit_the_home_says_how_much_room_is_left(skald):
    """Under the upload cap but over what the member's home may still hold: a code and
    the room left, in the member's language, not the English message alone."""
    settings = skald.settings(files={"upload_max_bytes": 8 * 1024 * 1024}, sandbox={"home_quota_mib": 1})
    host = await skald.start(settings=settings)
    await host.admin()
    alice = await host.member("alice")
    cid = await new_conversation(alice)
    response = await upload(alice, cid, "big.bin", b"b" * (2 * 1024 * 1024))
    assert response.status_code == 413, response.text
    body = response.json()
    assert body["code"] == "home_full" and body["values"]["left"].endswith(("KiB", "MiB", " B")), body
    text = host.core.strings.lookup("core.error.home_full", "de").format(**body["values"])
    assert text.startswith("Die Datei passt nicht mehr") and body["values"]["left"] in text


async def test_a_backslash_in_a_name_is_a_character_but_a_windows_path_keeps_its_last_part(files):
    """``Käse \\ "quotes" <b>.txt`` was stored as ``" <b>.txt``: everything before a
    backslash was cut off as if it were a folder. Only a Windows absolute path (old
    browsers sent C:\\…\\name) is cut at its last backslash; any other backslash is
    replaced."""
    cid = await new_conversation(files.alice)
    cases = {
        'Käse & \\"quotes" <b>.txt': 'Käse & _"quotes" <b>.txt',
        "a\\b\\c.txt": "a_b_c.txt",
        "C:\\Users\\alice\\Desktop\\report.txt": "report.txt",
        "\\\\fileserver\\share\\minutes.txt": "minutes.txt",
    }
    for sent, stored in cases.items():
        response = await upload(files.alice, cid, sent, b"hi")
        assert response.status_code == 201, (sent, response.text)
        assert response.json()["name"] == stored, sent

"""The host's reader of a model's server-sent events (``skald_host.core.llm.sse``): the
same events however the network splits the bytes."""

from __future__ import annotations

import json

import pytest

from skald_host.core.llm.sse import SSEParser

#: One stream with what providers send and the standard allows: a comment, named events,
#: ids, a multi-line data field, a field without a value, CRLF and lone CR line ends,
#: two-byte and four-byte UTF-8 characters, and an event that ends only with the stream.
STREAM = (
    "\ufeff: keep-alive comment\n\n"
    'data: {"choices":[{"delta":{"content":"Grüße"}}]}\n\n'
    "event: message\r\nid: 7\r\n"
    'data: {"choices":[{"delta":{"content":" 🌍"}}]}\r\n\r\n'
    "data: first line\rdata:second line\r\rdata\n\n"
    "data: one\r\ndata: two\r\n\r\n"
    "retry: 100\nevent: ping\n\n"
    "data: [DONE]\n\n"
    "data: cut off by the stream's end"
).encode()

EXPECTED = [
    '{"choices":[{"delta":{"content":"Grüße"}}]}',
    '{"choices":[{"delta":{"content":" 🌍"}}]}',
    "first line\nsecond line",
    "",
    "one\ntwo",
    "[DONE]",
]


def parse(chunks: list[bytes]) -> list[str]:
    parser = SSEParser()
    return [data for chunk in chunks for data in parser.feed(chunk)]


def test_a_whole_stream_in_one_chunk_gives_every_event_in_order():
    assert parse([STREAM]) == EXPECTED
    assert json.loads(parse([STREAM])[1])["choices"][0]["delta"]["content"] == " 🌍"


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_a_stream_split_anywhere_in_two_gives_the_same_events(cut):
    """Every split: inside a field name, between CR and LF, inside a UTF-8 character."""
    assert parse([STREAM[:cut], STREAM[cut:]]) == EXPECTED


def test_a_stream_fed_byte_by_byte_gives_the_same_events():
    assert parse([STREAM[i:i + 1] for i in range(len(STREAM))]) == EXPECTED


def test_an_event_completes_on_the_chunk_that_brings_its_blank_line():
    parser = SSEParser()
    assert parser.feed(b'data: {"a":') == []
    assert parser.feed(b"1}\n") == []
    assert parser.feed(b"\n") == ['{"a":1}']
    assert parser.feed(b"data: x\r") == []  # a CR: the line has ended, the event has not
    assert parser.feed(b"\r") == ["x"]


def test_a_long_line_over_many_chunks_is_read_whole():
    value = "x" * 100_000
    raw = f"data: {value}\n\n".encode()
    assert parse([raw[i:i + 1000] for i in range(0, len(raw), 1000)]) == [value]


def test_invalid_utf8_is_refused_not_guessed():
    with pytest.raises(UnicodeDecodeError):
        parse([b"data: \xff\n\n"])

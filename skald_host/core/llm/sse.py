"""Server-sent events read from a model's streamed answer, a network chunk at a time.

The host's own reader, not the SDK's private ``openai._streaming.SSEDecoder``: that one
is not the SDK's public surface (it may change in any release), and it handles each
line on its own, through a generator per line and a decode per line, ~15 us per token
event under 200 streams. This one takes a whole chunk as it came off the socket and
returns the data of every event the chunk completes, in order, so the client handles a
chunk's events together (one delta, one socket event).

It follows the HTML standard's event-stream interpretation for what a model's stream
uses: lines end in LF, CRLF or CR (a CR at a chunk's end may be the first half of a
CRLF split across chunks: the line ends there, and an LF first in the next chunk is
skipped); a blank line dispatches the event; ``data:`` lines join with
LF; one space after the colon is dropped; comments (``:``) and the ``event``, ``id``
and ``retry`` fields are not needed and are skipped; an event without data is not
dispatched; a leading byte-order mark is dropped; an event the stream ends in the
middle of (no blank line after it) is discarded. Bytes are decoded only in whole lines,
so a UTF-8 character split between two chunks is read whole.
"""

from __future__ import annotations

_BOM = "\ufeff"


class SSEParser:
    """Feed it the stream's bytes as they arrive: ``feed`` returns the data of each event
    completed so far (oldest first)."""

    __slots__ = ("_pending", "_skip_lf", "_data", "_started")

    def __init__(self) -> None:
        #: The start of a line not ended yet, in pieces: a line longer than a chunk is
        #: joined once, when it ends.
        self._pending: list[bytes] = []
        self._skip_lf = False  # the last chunk ended in CR: an LF first in the next is its CRLF's
        self._data: list[str] = []  # the data lines of the event being read
        self._started = False  # past the stream's first line (its byte-order mark)

    def feed(self, chunk: bytes) -> list[str]:
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if self._pending:
            self._pending.append(chunk)
            if b"\n" not in chunk and b"\r" not in chunk:
                return []  # still inside one line
            text = b"".join(self._pending)
        else:
            text = chunk
        if b"\r" in text:
            self._skip_lf = text.endswith(b"\r")
            text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = text.rfind(b"\n")
        self._pending = [text[end + 1:]] if end + 1 < len(text) else []
        if end < 0:
            return []
        lines = text[:end].decode("utf-8").split("\n")
        if not self._started:
            self._started = True
            if lines[0].startswith(_BOM):
                lines[0] = lines[0][1:]
        events: list[str] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append("\n".join(data))
                    data.clear()
            elif line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
            elif line == "data":  # a field name alone: an empty value
                data.append("")
        return events

"""The request log's outbox (``store.RequestOutbox``): a row rides into the member's
file with the next commits of history until the registry has committed it, so a crash
while the registry gathers rows loses none (README "Models and chat").

Two commits may be in flight with the same row (the file's one queue holds them in
order; each took its snapshot as it was submitted). A crash-kill probe found the second
one's landing taken for the registry's commit: the file's copy was dropped by the next
commit while the registry was still gathering the row, and a crash in that moment lost
it — the model server had a request the request log never got."""

from __future__ import annotations

import json

from skald_host.core.agent.store import RequestOutbox


def entry(request_id: str, status: str = "ok") -> str:
    return json.dumps({"row": [request_id, "m", "model-a", status, 200, 1, 1, 1, 1], "at": "2026-01-01T00:00:00.000Z"})


class File:
    """The outbox table of the member's file, as the commits leave it."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}

    def commit(self, outbox: RequestOutbox, snapshot) -> None:
        if snapshot is not None:
            rows, unbox = snapshot
            self.rows.update(dict(rows))
            for request_id in unbox:
                self.rows.pop(request_id, None)
            outbox.carried(snapshot)


def test_a_row_two_commits_in_flight_carry_stays_in_the_file_until_the_registry_has_it():
    outbox, file = RequestOutbox(), File()
    outbox.add("a", entry("a"))
    first = outbox.snapshot()  # a round's commit, submitted
    second = outbox.snapshot()  # another conversation's commit, queued behind it
    file.commit(outbox, first)
    file.commit(outbox, second)
    file.commit(outbox, outbox.snapshot())  # the next commit of history
    assert "a" in file.rows, "the file's copy went while the registry was still gathering the row"
    outbox.logged("a")  # the registry committed it
    file.commit(outbox, outbox.snapshot())
    assert file.rows == {}


def test_a_row_the_registry_committed_while_its_commit_was_in_flight_leaves_the_file_next():
    outbox, file = RequestOutbox(), File()
    outbox.add("a", entry("a"))
    in_flight = outbox.snapshot()
    outbox.logged("a")
    assert outbox.snapshot() is None  # nothing more to carry
    file.commit(outbox, in_flight)
    assert "a" in file.rows
    file.commit(outbox, outbox.snapshot())
    assert file.rows == {}


def test_a_row_written_ahead_is_replaced_by_the_requests_own():
    """A compaction's request: its row goes into the file as interrupted before it is
    sent (``ConversationStore.ahead``); once it ends, its own row takes that place."""
    outbox, file = RequestOutbox(), File()
    outbox.add("c", entry("c", "interrupted"))
    file.commit(outbox, outbox.snapshot())
    assert json.loads(file.rows["c"])["row"][3] == "interrupted"
    outbox.add("c", entry("c", "ok"))
    file.commit(outbox, outbox.snapshot())
    assert json.loads(file.rows["c"])["row"][3] == "ok"
    outbox.logged("c")
    file.commit(outbox, outbox.snapshot())
    assert file.rows == {}


def test_a_row_written_ahead_leaves_the_file_once_the_registry_has_the_requests_own():
    outbox, file = RequestOutbox(), File()
    outbox.add("c", entry("c", "interrupted"))
    file.commit(outbox, outbox.snapshot())
    outbox.add("c", entry("c", "error"))
    outbox.logged("c")  # before any commit carried the request's own row
    file.commit(outbox, outbox.snapshot())
    assert file.rows == {}


def test_a_row_the_registry_failed_to_write_stays_until_it_is_written_again():
    """The registry's disk full: the row is stranded, kept in the file and given to the
    registry again; only that write lets it go (before, the failure was only logged)."""
    outbox, file = RequestOutbox(), File()
    outbox.add("a", entry("a", "stopped"))
    outbox.stranded("a")  # the registry's commit failed
    assert outbox.stranded_entries() == [("a", entry("a", "stopped"))]
    file.commit(outbox, outbox.snapshot())  # ``keep_outbox``
    assert "a" in file.rows
    outbox.logged("a", entry("a", "stopped"))  # written again
    assert outbox.stranded_entries() == []
    file.commit(outbox, outbox.snapshot())
    assert file.rows == {}


def test_a_resend_of_an_older_row_does_not_let_a_newer_row_of_the_request_go():
    outbox = RequestOutbox()
    outbox.add("c", entry("c", "interrupted"))
    outbox.stranded("c")
    [(_, older)] = outbox.stranded_entries()
    outbox.add("c", entry("c", "ok"))  # its own row, on its way to the registry
    outbox.logged("c", older)
    assert outbox.snapshot() is not None and outbox.stranded_entries() == []

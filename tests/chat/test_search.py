"""Full-text search over the member's own conversations (issue 19): FTS5 inside their
encrypted file, by title or by words from any message, with a snippet; nothing of it
leaves that file."""

from __future__ import annotations

from skald_host.testing import Hang, Reply

from .support import MODEL_A, ChatSocket, configure_models, new_conversation


async def search(client, text: str) -> list[dict]:
    response = await client.get("/api/conversations", params={"search": text})
    assert response.status_code == 200, response.text
    return response.json()["conversations"]


async def answered(chat, member, answer: str, question: str = "Show me") -> str:
    """A new conversation of ``member`` in which the model answered ``answer``; its id."""
    chat.server.script(MODEL_A, [Reply(answer)])
    async with ChatSocket(member) as sock:
        cid = await new_conversation(member)
        await sock.send(cid, question)
        await sock.turn(cid)
    return cid


async def test_search_finds_words_of_any_message_in_the_members_own_conversations_only(chat):
    await configure_models(chat.admin, chat.server)
    alice, bob = await chat.host.member("alice"), await chat.host.member("bob")
    chat.server.responder = lambda request: Reply(
        "Rhubarb wants a sunny spot." if "garden" in request.last_user_text else "Your café budget is fine."
    )
    async with ChatSocket(alice) as sock:
        garden = await new_conversation(alice, title="Spring plans")
        money = await new_conversation(alice)
        await sock.send(garden, "What should I plant in the garden?")
        await sock.turn(garden)
        await sock.send(money, "Check my spending")
        await sock.turn(money)
    async with ChatSocket(bob) as sock:
        theirs = await new_conversation(bob)
        await sock.send(theirs, "My garden has rhubarb too")
        await sock.turn(theirs)

    found = await search(alice, "rhubarb")  # a word of the assistant's answer
    assert [(c["id"], c["snippet"]) for c in found] == [(garden, "Rhubarb wants a sunny spot.")]
    assert [c["id"] for c in await search(alice, "RHUB")] == [garden]  # a prefix, any case
    assert [c["id"] for c in await search(alice, "cafe")] == [money]  # accents folded
    assert [c["id"] for c in await search(alice, "spring")] == [garden]  # by title too
    assert [c["id"] for c in await search(alice, "sunny garden")] == [garden]  # every word, in any of its messages
    assert await search(alice, "sunny budget") == []
    for hostile in ('"', "NEAR(a b)", "a OR", "*", "-x", "col:rhubarb", "(", "'"):
        assert isinstance(await search(alice, hostile), list)  # typed words, never FTS syntax
    assert [c["id"] for c in await search(alice, "sunny\x00spot")] == [garden]  # a NUL was a 500 (FTS5 refuses it)
    assert [c["id"] for c in await search(bob, "rhubarb")] == [theirs]

    # A streaming answer is found once it is complete, not from its checkpoints.
    chat.server.responder = lambda request: Hang(text="quinoa " * 5, token_delay=0.05)
    async with ChatSocket(alice) as sock:
        await sock.send(money, "Slow")
        await sock.wait_event(money, "token")
        assert await search(alice, "quinoa") == []
        await sock.stop(money)
        await sock.turn(money)
    assert [c["id"] for c in await search(alice, "quinoa")] == [money]  # the stopped answer is kept, and found
    assert (await alice.delete(f"/api/conversations/{money}")).status_code == 200
    assert await search(alice, "quinoa") == []


async def test_a_match_only_in_an_earlier_version_says_so_and_one_on_screen_comes_first(chat):
    """Regenerated, the old answer is kept as an earlier version: search still finds its
    words, but says they are in an earlier version (opened, the conversation shows the
    new answer); words on screen are quoted from the answer shown."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("Elephants never forget."), Reply("Elephants are large; owls are wise.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Tell me about animals")
        await sock.turn(cid)
        assert (await alice.post(f"/api/conversations/{cid}/regenerate")).status_code == 202
        await sock.turn(cid)
    [hit] = await search(alice, "forget")
    assert (hit["snippet"], hit["snippet_in_earlier_version"]) == ("Elephants never forget.", True)
    [hit] = await search(alice, "elephants")
    assert (hit["snippet"], hit["snippet_in_earlier_version"]) == ("Elephants are large; owls are wise.", False)


async def test_a_snippet_shows_the_words_of_a_markdown_answer_not_its_syntax(chat):
    """A hit in an answer written in Markdown showed "# Hello Here is a **table**: | a |
    b | |---|---|…" in the list: the snippet is plain words."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    answer = (
        "# Hello\n\nHere is a **table** with _emphasis_ and `code` and a [link](https://example.com):\n\n"
        "| a | b |\n|---|:---:|\n| 1 | 2 |\n\n> quoted\n\n- first item\n1. numbered\n\n~~gone~~ snake_case_name 2 * 3"
    )
    await answered(chat, alice, answer)
    [hit] = await search(alice, "hello")
    snippet = hit["snippet"]
    for syntax in ("#", "**", "|", "---", "`", "](", "https://", "> ", "~~", "_emphasis_"):
        assert syntax not in snippet, (syntax, snippet)
    assert snippet.startswith("Hello Here is a table with emphasis and code and a link"), snippet
    [hit] = await search(alice, "snake")
    assert "snake_case_name 2 * 3" in hit["snippet"] and "gone" in hit["snippet"] and "~" not in hit["snippet"], hit["snippet"]
    [hit] = await search(alice, "quoted")
    assert "quoted first item numbered" in hit["snippet"], hit["snippet"]

    # Code, escapes, tasks and fences: `__init__` lost its underscores (__ went
    # everywhere), \*stars\* became \stars\, and [x] and ```python stayed.
    await answered(chat, alice, (
        "Call `__init__` with `a | b` before my__var and __strong__ words.\n\n\\*literal stars\\* and a back\\\\slash\n\n"
        "- [x] shipped release\n- [ ] pending notes\n\n```python\nprint(fenced)\n```\n\n~~~\nechoed tilde\n~~~"
    ), "More")
    [hit] = await search(alice, "call")
    assert hit["snippet"].startswith("Call __init__ with a | b before my__var and strong words."), hit["snippet"]
    [hit] = await search(alice, "literal slash")
    assert "*literal stars* and a back\\slash" in hit["snippet"], hit["snippet"]
    [hit] = await search(alice, "shipped")
    assert "shipped release pending notes print(fenced" in hit["snippet"] and "[" not in hit["snippet"], hit["snippet"]
    [hit] = await search(alice, "fenced")
    assert "print(fenced) echoed tilde" in hit["snippet"], hit["snippet"]
    assert "python" not in hit["snippet"] and "`" not in hit["snippet"] and "~" not in hit["snippet"], hit["snippet"]


async def test_a_send_is_acknowledged_while_a_search_is_running(chat, monkeypatch):
    """A search reads beside the member's writes (the file's reader connection), with
    nothing to index by then (each message is indexed by the commit that finishes it):
    a scale probe saw a send wait ~400 ms, up to 1.7 s, behind another tab's searches,
    each a write transaction on the file's one thread."""
    import asyncio
    import threading

    from skald_host.core.agent import store as store_module

    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply("Rhubarb wants a sunny spot.")
    entered, release = threading.Event(), threading.Event()
    fold = store_module.search_form

    def held_fold(text: str) -> str:  # the search's own read, held open until released
        entered.set()
        assert release.wait(60)
        return fold(text)

    async with ChatSocket(alice) as sock:
        garden = await new_conversation(alice)
        await sock.send(garden, "What should I plant in the garden?")
        await sock.turn(garden)
        monkeypatch.setattr(store_module, "search_form", held_fold)
        searching = asyncio.ensure_future(search(alice, "rhubarb"))
        try:
            assert await asyncio.to_thread(entered.wait, 30), "the search never started"
            ack = await sock.send(garden, "And tomatoes?")  # waits for the ack, not for the search
            assert ack["type"] == "ack" and not searching.done(), ack
        finally:
            release.set()
        monkeypatch.undo()
        assert [c["id"] for c in await searching] == [garden]
        await sock.turn(garden)


async def test_a_snippet_keeps_maths_tex_and_says_which_words_matched_accents_folded(chat):
    """A newcomer's walk: "$$\\int_0^1 x^2\\,dx$$" showed as "$$\\int_0^1 x^2,dx$$" (the
    TeX's thin space read as an escaped comma), and nothing said which words matched.
    ``snippet_parts`` alternates text and matched words, as written ("Café" for "cafe")."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    await answered(chat, alice, (
        "## Area\n\nThe **integral** $$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$ and inline $a\\,b$ cost \\$5 at the Café on the Straße."
    ))
    [hit] = await search(alice, "integral")
    # The snippet's end cut the math: its TeX as written up to there.
    assert hit["snippet"] == "Area The integral \\int_0^1 x^2\\,dx = \\frac{1}{3…", hit["snippet"]
    assert hit["snippet_parts"] == ["Area The ", "integral", " \\int_0^1 x^2\\,dx = \\frac{1}{3…"]
    [hit] = await search(alice, "inline")
    assert "\\frac{1}{3} and inline a\\,b cost $5 at the" in hit["snippet"], hit["snippet"]  # its start cut
    assert "$$" not in hit["snippet"] and "$a" not in hit["snippet"], hit["snippet"]
    [hit] = await search(alice, "cafe strasse")
    assert "".join(hit["snippet_parts"]) == hit["snippet"]
    assert hit["snippet_parts"][1::2] == ["Café", "Straße"], hit["snippet_parts"]
    assert "**" not in hit["snippet"] and "$$" not in hit["snippet"] and "#" not in hit["snippet"], hit["snippet"]

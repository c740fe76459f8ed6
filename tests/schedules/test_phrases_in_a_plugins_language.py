"""A language brings its recurrence phrases in its locale file: the grammar's words are
``recurrence.words.*`` strings, and the words of every loaded language count (a member
may type English in a French interface). A plugin's ``core`` bundle that adds French —
files alone, no code — makes "tous les jours à 8h" a schedule, on the page's API and in
the model's tool; a language without such words still reads English and German."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from skald_hookspecs import hookimpl
from skald_hookspecs.types import I18nBundle
from skald_host.core import schedules
from tests.catalog.support import Routed

UTC = dt.timezone.utc

FRENCH = {
    "locale.fr": "Français",
    "schedules.examples": "tous les jours à 8h · chaque lundi à 9h30 · toutes les 15 minutes · 0 8 * * 1-5",
    "recurrence.words.every": "toutes les|tous les|chaque",
    "recurrence.words.at": "à|a",
    "recurrence.words.minutes": "minutes|min",
    "recurrence.words.hours": "heures",
    "recurrence.words.minutely": "chaque minute|toutes les minutes",
    "recurrence.words.hourly": "chaque heure|toutes les heures",
    "recurrence.words.monthly": "chaque mois|tous les mois",
    "recurrence.words.ordinal": "er|e",
    "recurrence.words.daily": "jour|jours",
    "recurrence.words.weekdays": "jour ouvré|jours ouvrés|en semaine",
    "recurrence.words.weekend": "week-end|week-ends",
    "recurrence.words.filler": "tous|toutes|les|le|chaque|et",
    "recurrence.words.day.0": "dimanche",
    "recurrence.words.day.1": "lundi",
    "recurrence.words.day.2": "mardi",
    "recurrence.words.day.3": "mercredi",
    "recurrence.words.day.4": "jeudi",
    "recurrence.words.day.5": "vendredi",
    "recurrence.words.day.6": "samedi",
    "recurrence.words.time_suffix": "h|heures",
}


class Language(Routed):
    """A plugin that adds a language to the host's by one file: ``<folder>/<code>.json``."""

    def __init__(self, plugin_id: str, folder: Path) -> None:
        super().__init__(plugin_id)
        self.folder = folder

    @hookimpl
    def register_i18n(self, register: Callable[..., None]) -> None:
        register(I18nBundle.from_folder("core", self.folder))


def language(tmp_path: Path, plugin_id: str, code: str, strings: dict[str, str]) -> Language:
    folder = tmp_path / plugin_id
    folder.mkdir()
    (folder / f"{code}.json").write_text(json.dumps(strings, ensure_ascii=False), encoding="utf-8")
    return Language(plugin_id, folder)


@pytest.fixture(autouse=True)
def reset_clock():
    schedules.clock.set(dt.datetime(2026, 7, 1, 12, tzinfo=UTC))  # a Wednesday in summer
    yield
    schedules.clock.set(None)


async def preview(client: Any, every: str) -> tuple[int, Any]:
    response = await client.post("/api/schedules/preview", json={"every": every, "timezone": "Europe/Paris"})
    body = response.json()
    return response.status_code, body.get("cron") if response.status_code == 200 else body.get("code")


async def test_a_language_file_brings_its_phrases_and_english_stays(skald, tmp_path):
    french = language(tmp_path, "francais", "fr", FRENCH)
    dutch = language(tmp_path, "nederlands", "nl", {"locale.nl": "Nederlands"})  # no words of its own
    host = await skald.start(plugins=[french, dutch], enable=["francais", "nederlands"])  # a language counts while its plugin is enabled
    await host.admin()
    alice = await host.member("alice")
    assert (await alice.put("/api/me/locale", json={"locale": "fr"})).status_code == 200

    for phrase, cron in (
        ("tous les jours à 8h", "0 8 * * *"),
        ("Chaque lundi à 9h30", "30 9 * * 1"),
        ("toutes les 15 minutes", "*/15 * * * *"),
        ("toutes les heures", "0 * * * *"),
        ("le lundi et le jeudi à 18h", "0 18 * * 1,4"),
        ("les lundis à 7 heures", "0 7 * * 1"),
        ("chaque mois le 1er à 9h", "0 9 1 * *"),
        ("en semaine à 8h", "0 8 * * 1-5"),
        ("le week-end à 10h", "0 10 * * 0,6"),
        ("every weekday at 8", "0 8 * * 1-5"),  # English in a French interface
        ("werktags um 8", "0 8 * * 1-5"),
    ):
        assert await preview(alice, phrase) == (200, cron), phrase
    assert await preview(alice, "tous les blursdays à 8h") == (400, "recurrence_invalid")

    # What the French file advertises, the server accepts.
    examples = (await alice.get("/api/i18n?locale=fr")).json()["strings"]["core.schedules.examples"]
    for example in examples.split(" · "):
        assert (await preview(alice, example))[0] == 200, example

    # A language without words of its own: English (and every other language's words) still read.
    bob = await host.member("bob")
    assert (await bob.put("/api/me/locale", json={"locale": "nl"})).status_code == 200
    assert await preview(bob, "every day at 7pm") == (200, "0 19 * * *")
    assert await preview(bob, "jeden Tag um 6:05") == (200, "5 6 * * *")
    assert await preview(bob, "tous les jours à 8h") == (200, "0 8 * * *")

    # Created and edited, not only previewed.
    response = await alice.post("/api/schedules", json={"prompt": "Météo.", "every": "chaque lundi à 9h30", "timezone": "Europe/Paris"})
    assert response.status_code == 201, response.text
    job = response.json()
    assert (job["cron"], job["phrase"], job["next_run"]) == ("30 9 * * 1", "chaque lundi à 9h30", "2026-07-06T07:30:00.000000Z")
    response = await alice.patch(f"/api/schedules/{job['id']}", json={"every": "toutes les 30 minutes"})
    assert (response.status_code, response.json()["cron"]) == (200, "*/30 * * * *")


async def test_without_the_language_its_phrases_are_unknown(skald):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    assert await preview(alice, "tous les jours à 8h") == (400, "recurrence_invalid")
    assert await preview(alice, "every day at 8") == (200, "0 8 * * *")


def test_the_grammar_is_built_once_per_change_of_the_catalogs():
    from skald_host.core.i18n import Strings

    strings = Strings([I18nBundle("core", {"en": {"recurrence.words.at": "at", "recurrence.words.daily": "day"}})])
    grammar = schedules.phrases(strings)
    assert schedules.phrases(strings) is grammar  # not rebuilt per phrase
    assert schedules.phrase_to_cron("day à 8", grammar) is None
    strings.add(I18nBundle("core", {"fr": {"recurrence.words.at": "à"}}))
    assert schedules.phrases(strings) is not grammar
    assert schedules.phrase_to_cron("day à 8", schedules.phrases(strings)) == "0 8 * * *"
    assert schedules.phrase_to_cron("day at 8", schedules.phrases(strings)) == "0 8 * * *"

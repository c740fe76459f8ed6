"""UI strings merged from every plugin's bundles, by domain.

Keys are ``domain.key``; a key a locale lacks falls back to English, and the gaps are
listed so the admin status page can show which translations are missing.

What a plugin shows outside its own page (its catalog title and description, its page
titles, its settings' labels and hints) is looked up under well-known keys of the
plugin's own domain (see ``skald_hookspecs.types``), with the text the plugin gave as
the fallback; the host's built-ins keep theirs in the core bundle as
``core.builtin.<plugin id>.<key>``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, TypeVar

from skald_hookspecs.types import I18nBundle

FALLBACK_LOCALE = "en"
#: At most this many keys a plugin asked for that no bundle has are remembered for the
#: admin's list (``Strings.asked_for``): a plugin building keys from data (``weather.<code>``)
#: must not grow it without end.
ASKED_MISSING_KEPT = 200
T = TypeVar("T")

# CLDR's plural categories: a key English has as ``<key>.one`` / ``<key>.other`` may have
# any of them in another language (Arabic's ``.zero``, ``.two``, ``.few``, ``.many``).
PLURAL_CATEGORIES = ("zero", "one", "two", "few", "many", "other")


def _cldr(locale: str | None) -> Any:
    from babel import Locale, UnknownLocaleError

    try:
        return Locale.parse(str(locale or FALLBACK_LOCALE).replace("_", "-"), sep="-")
    except (UnknownLocaleError, ValueError, TypeError):
        return Locale(FALLBACK_LOCALE)


def number_text(value: float, locale: str | None = None, pattern: str = "#,##0.###") -> str:
    """A number in ``locale``'s format (Babel: "1.000" and "3,0" in German, "1,000" and
    "3.0" in English), as the web shell's ``toLocaleString`` says it: a refusal's "at most
    1000" beside a hint's "Between 1 and 1,000" read as two different limits."""
    from babel.numbers import format_decimal

    return format_decimal(value, format=pattern, locale=_cldr(locale))


def size_text(size: int, locale: str | None = None) -> str:
    """A byte count as a person reads a limit ("256 MiB"), its number in ``locale``'s
    format (Babel: "1,5 GiB" in German, not "1.5 GiB")."""
    from babel.numbers import format_decimal

    cldr = _cldr(locale)
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{format_decimal(size / scale, format='0.#', locale=cldr)} {unit}"
    return f"{format_decimal(size, format='0', locale=cldr)} B"


def plural_category(locale: str | None, count: int) -> str:
    """The CLDR plural category of ``count`` in ``locale`` (``one``, ``few``, ...), by
    Babel's rules as the web shell asks ``Intl.PluralRules``; ``other`` for a locale
    Babel does not know."""
    from babel import Locale, UnknownLocaleError

    try:
        return Locale.parse(str(locale or FALLBACK_LOCALE).replace("_", "-"), sep="-").plural_form(count)
    except (UnknownLocaleError, ValueError, TypeError):
        return "other"


#: A value ``<name>_bytes`` (a byte count) beside ``<name>`` (its text, "1.5 GiB"): the
#: reader's language says it in its own number format (``sized``; the shell's
#: ``errorString`` with ``formatSize``).
BYTES_SUFFIX = "_bytes"
#: A value ``<name>_number`` (a number) beside ``<name>`` (its English text, "1,000"):
#: said in the reader's number format alike (``number_text``; the shell's ``sized``).
NUMBER_SUFFIX = "_number"


def sized(values: Mapping[str, Any], locale: str | None) -> dict[str, Any]:
    """``values`` with each ``<name>`` that has a ``<name>_bytes`` or ``<name>_number``
    beside it said in ``locale``'s number format (``size_text``, ``number_text``)."""
    out = dict(values)
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if name.endswith(BYTES_SUFFIX) and isinstance(value, int) and value >= 0:
            out[name.removesuffix(BYTES_SUFFIX)] = size_text(value, locale)
        elif name.endswith(NUMBER_SUFFIX) and math.isfinite(value):
            out[name.removesuffix(NUMBER_SUFFIX)] = number_text(value, locale)
    return out


def plural_form_of(key: str, english: Iterable[str] | Mapping[str, Any]) -> bool:
    """Whether ``key`` is one plural form (``<base>.<CLDR category>``) of a key ``english``
    has plural forms of (``<base>.one`` or ``<base>.other``): a language's own form
    English has no use for, not a key English lacks."""
    base, _, category = key.rpartition(".")
    return bool(base) and category in PLURAL_CATEGORIES and (f"{base}.one" in english or f"{base}.other" in english)


class Strings:
    def __init__(self, bundles: Iterable[I18nBundle] = ()) -> None:
        self._table: dict[str, dict[str, str]] = {}
        # The languages offered to readers: a locale only a disabled plugin's own bundle
        # has (its catalog title in French) is looked up, never offered (``add``).
        self._offered: set[str] = set()
        self._expected: list[Callable[[], Iterable[tuple[str, ...]]]] = []
        self._revision = 0
        self._derived: dict[str, tuple[int, Any]] = {}
        self._asked_missing: dict[str, None] = {}  # insertion-ordered set
        self.expect(lambda: ((key,) for key in list(self._asked_missing)))
        for bundle in bundles:
            self.add(bundle)

    def add(self, bundle: I18nBundle, *, offered: bool = True) -> None:
        """Merge ``bundle``; ``offered``: its locales count among ``locales`` (a disabled
        plugin's own bundle is not: its words show on its catalog card, but it must not
        offer the instance a language the admin turned off)."""
        for locale, strings in bundle.strings.items():
            if offered:
                self._offered.add(locale)
            target = self._table.setdefault(locale, {})
            for key, text in strings.items():
                target[f"{bundle.domain}.{key}"] = text
        self._revision += 1

    def clear(self) -> None:
        """Drop every string before the bundles are merged again (a plugin enabled or
        disabled: what it adds to other domains counts only while it is enabled). The
        keys ``expect`` and ``asked_for`` were given stay."""
        self._table = {}
        self._offered = set()
        self._revision += 1

    def texts(self, key: str) -> list[str]:
        """The text of a full key in every locale that has it, English first: words that
        count in any language (a recurrence phrase's, say)."""
        return [self._table[locale][key] for locale in sorted(self._table, key=lambda code: (code != FALLBACK_LOCALE, code)) if key in self._table[locale]]

    def derived(self, name: str, build: Callable[["Strings"], T]) -> T:
        """``build(self)``, kept under ``name`` until a bundle is added: what is made of
        the strings (a compiled grammar) is made once per change, not once per use."""
        cached = self._derived.get(name)
        if cached is None or cached[0] != self._revision:
            cached = (self._revision, build(self))
            self._derived[name] = cached
        return cached[1]

    def has(self, key: str, locale: str) -> bool:
        """Whether ``locale`` itself has the full ``key`` (no fallback)."""
        return key in self._table.get(locale, {})

    def asked_for(self, key: str) -> None:
        """A plugin looked ``key`` up (``HostApi.translate``, a system agent's
        ``translate``): when no locale has it, every reader got the bare key back, and
        the admin's list of missing translations must name it (``missing``,
        ``missing_everywhere``). A bundle added later that has it takes it off again."""
        if key in self._asked_missing or len(self._asked_missing) >= ASKED_MISSING_KEPT:
            return
        if not any(key in strings for strings in self._table.values()):
            self._asked_missing[key] = None

    def expect(self, keys: Callable[[], Iterable[tuple[str, ...]]]) -> None:
        """Keys the host will look up that no bundle is known to carry (a ``NotReady``'s
        key, say), asked whenever ``missing`` is: each item the full keys any one of
        which would do, the first its name. One English has none of is listed under
        English."""
        self._expected.append(keys)

    @property
    def locales(self) -> list[str]:
        """The languages a reader may choose: those an offered bundle has (``add``)."""
        return sorted(self._offered)

    def table(self, locale: str | None) -> dict[str, str]:
        """The whole string table for a locale, English underneath."""
        merged = dict(self._table.get(FALLBACK_LOCALE, {}))
        if locale and locale != FALLBACK_LOCALE:
            merged.update(self._table.get(locale, {}))
        for code, strings in self._table.items():  # a language picker names each in its own words
            own = strings.get(f"core.locale.{code}")
            if own is not None:
                merged[f"core.locale.{code}"] = own
        return merged

    def translate(self, key: str, locale: str | None = None, **values: Any) -> str:
        text = self._table.get(locale or FALLBACK_LOCALE, {}).get(key)
        if text is None:
            text = self._table.get(FALLBACK_LOCALE, {}).get(key, key)
        try:
            return text.format(**values) if values else text
        except (KeyError, IndexError, ValueError):
            return text

    def refusal(self, refused: Any, locale: str | None) -> str:
        """A coded refusal (an exception with ``code`` and ``values``: ``error.<code>`` of
        the core bundle) in ``locale``, for a channel, which shows text as it is."""
        return self.translate(f"core.error.{refused.code}", locale, **sized(refused.values or {}, locale))

    def reason(self, reason: Any, locale: str | None, *, admin: bool = True) -> str | None:
        """A message's stored reason (``{"code", "values"}``: a failed answer, a host's
        note) in ``locale``, worded as the web shell's ``errorString`` words it on screen
        (``core.error.<code>``; ``core.error.<code>.member`` for a reader who is not an
        admin, when there is one); None for a code no bundle has (then its stored text)."""
        if not isinstance(reason, Mapping) or not reason.get("code"):
            return None
        code = reason["code"]
        values = reason.get("values") if isinstance(reason.get("values"), Mapping) else {}
        key = f"core.error.{code}"
        if self.lookup(key, locale) is None:
            return None
        if not admin and self.lookup(f"{key}.member", locale) is not None:
            key = f"{key}.member"
        return self.translate(key, locale, **sized(values, locale))

    def shipped(self, key: str, text: str, locale: str | None) -> str:
        """``text`` in ``locale`` when it is still the English the project shipped under
        ``key`` (a definition file's title, say); an admin's own wording stays as written."""
        english = self._table.get(FALLBACK_LOCALE, {}).get(key)
        if english is None or text != english:
            return text
        return self._table.get(locale or FALLBACK_LOCALE, {}).get(key, text)

    def lookup(self, key: str, locale: str | None) -> str | None:
        """The text of a full key in ``locale`` or English, or None when nobody has it."""
        text = self._table.get(locale or FALLBACK_LOCALE, {}).get(key)
        return text if text is not None else self._table.get(FALLBACK_LOCALE, {}).get(key)

    def plugin_text(self, plugin_id: str, key: str, locale: str | None, default: str) -> str:
        """A plugin's well-known text (``plugin.title``, ``page.<id>.title``, ...) in the
        reader's locale; ``default`` (what the plugin declared) when it has no such key."""
        for full in (f"{plugin_id}.{key}", f"core.builtin.{plugin_id}.{key}"):
            text = self.lookup(full, locale)
            if text is not None:
                return text
        return default

    def fields(self, plugin_id: str, prefix: str, schema: list[dict[str, Any]], locale: str | None) -> list[dict[str, Any]]:
        """A config schema (as ``schema_json`` gives it) with each field's label and hint
        under ``<prefix>.<field name>.label`` / ``.description`` in the reader's locale,
        and a ``choice`` field's values under ``<prefix>.<field name>.choice.<value>``
        (``choice_labels``; the value itself where the plugin has no words for it)."""
        out = []
        for entry in schema:
            entry = dict(entry)
            for part in ("label", "description"):
                entry[part] = self.plugin_text(plugin_id, f"{prefix}.{entry['name']}.{part}", locale, entry[part])
            if entry.get("choices"):
                entry["choice_labels"] = {
                    str(c): self.plugin_text(plugin_id, f"{prefix}.{entry['name']}.choice.{c}", locale, str(c)) for c in entry["choices"]
                }
            out.append(entry)
        return out

    def missing(self) -> Mapping[str, list[str]]:
        """Per locale, the keys it lacks: English's, and, under English, those another
        locale has and English lacks (its readers would see the bare key) and the keys
        given to ``expect`` that no bundle has. A language's own name (``core.locale.<code>``)
        lives in its own file alone: no other language lacks it, nor English another's.
        Neither is a plural form English has no category for (Arabic's
        ``chat.search_found.few`` where English has ``.one`` and ``.other``) an English gap."""
        english = set(self._table.get(FALLBACK_LOCALE, {}))
        # A locale nobody offers (only a disabled plugin's own bundle has it) has no readers to lack anything.
        others = {locale: set(strings) for locale, strings in self._table.items() if locale != FALLBACK_LOCALE and locale in self._offered}
        own_names = {f"core.locale.{locale}" for locale, strings in self._table.items() if f"core.locale.{locale}" in strings}
        gaps = {locale: english - keys - (own_names - {f"core.locale.{locale}"}) for locale, keys in others.items()}
        gaps[FALLBACK_LOCALE] = {
            key for locale, keys in others.items() for key in keys - {f"core.locale.{locale}"}
            if key not in english and not plural_form_of(key, english)
        }
        for source in self._expected:
            gaps[FALLBACK_LOCALE] |= {wanted[0] for wanted in source() if wanted and not english.intersection(wanted)}
        return {locale: sorted(keys) for locale, keys in sorted(gaps.items()) if keys}

    def missing_everywhere(self) -> list[str]:
        """The keys given to ``expect`` that no locale has at all (a ``NotReady``'s key
        no bundle carries, where every reader sees the text the plugin gave with it
        instead; a key a plugin's ``translate`` asked for, where they see the bare key):
        listed under English by ``missing`` too."""
        found = set().union(*self._table.values()) if self._table else set()
        return sorted({wanted[0] for source in self._expected for wanted in source() if wanted and not found.intersection(wanted)})

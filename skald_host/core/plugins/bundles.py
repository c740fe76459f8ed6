"""Which strings a plugin may register (``register_i18n``).

The host shows a plugin's title, pages and errors from the bundle of the plugin's own
domain, and its own words from the ``core`` domain, so a bundle that replaced words of
another domain would let any plugin, even a disabled one, pass itself off as another or
put words in the host's mouth. Yet a translation plugin must reach them (French for
the core and for the built-ins, which only their owners could give before). The rule:

- a plugin's bundle for its own domain (its id) is its own business, enabled or not
  (the catalog shows a disabled plugin's title and description in the reader's
  language); its locales are offered to readers only while it is enabled;
- a bundle for a domain that is nobody's (it may be the next plugin's) is refused: the
  plugin fails, the message says what to use;
- a bundle for ``core`` may only add what the core lacks (a language, a language's own
  name): a string the core already has is dropped, and so is an invented text for a
  built-in (``builtin.<id>.…`` the core has no English for);
- a bundle for another plugin's domain may only add a language that domain's owner
  does not have at all: a locale the owner has is dropped whole, and so is a key the
  owner has no English for (an invented text), or one an earlier plugin added. A
  whole language the owner lacks replaces none of its words: its readers saw English
  there before;
- what a plugin adds to ``core`` or another plugin's domain counts only while that
  plugin is enabled: a disabled translation plugin offers no language, and enabling
  or disabling one merges the bundles again at once (``add_bundles``).

Each drop is logged with the plugin's name. The built-ins' own bundles (``core`` among
them) are the core's strings.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from skald_hookspecs.types import I18nBundle
from skald_host.core.i18n import FALLBACK_LOCALE, PLURAL_CATEGORIES, Strings
from skald_host.core.plugins.manager import Contribution, PluginError, PluginManager

log = logging.getLogger(__name__)

CORE_DOMAIN = "core"


def bundle_validator(plugins: PluginManager) -> Callable[[str, tuple[Any, ...]], I18nBundle]:
    """The ``register`` validator of ``register_i18n``: a well-formed bundle under the
    plugin's own domain, ``core`` or another installed plugin's (whose strings
    ``add_bundles`` only adds to)."""

    def validate(plugin_id: str, args: tuple[Any, ...]) -> I18nBundle:
        if len(args) != 1 or not isinstance(args[0], I18nBundle):
            raise PluginError("register() expects one I18nBundle")
        bundle = args[0]
        for locale, strings in bundle.strings.items():
            if not isinstance(locale, str) or not isinstance(strings, dict) and not hasattr(strings, "items"):
                raise PluginError(f"bundle {bundle.domain!r}: locale {locale!r} must map keys to text")
            for key, text in strings.items():
                if not isinstance(key, str) or not isinstance(text, str):
                    raise PluginError(f"bundle {bundle.domain!r}: {locale}/{key!r} must be text")
        if bundle.domain in (plugin_id, CORE_DOMAIN) or plugins.status(bundle.domain) is not None:
            return bundle
        raise PluginError(
            f"bundle domain {bundle.domain!r} is not this plugin's id nor an installed plugin's: a plugin registers its"
            f" strings under its own id (I18nBundle({plugin_id!r}, ...)), and may add a language to the host's with the"
            " domain 'core' or to another installed plugin's with that plugin's id"
        )

    return validate


def add_bundles(strings: Strings, bundles: Iterable[Contribution], plugins: PluginManager) -> None:
    """Merge the accepted bundles into ``strings``, anew (called at boot and whenever a
    plugin is enabled or disabled): the built-ins' first (their ``core`` bundles are the
    core), then each plugin's own, then what each enabled plugin adds to ``core`` or to
    another plugin's domain. Synchronous, so no reader sees the table half merged."""

    def builtin(contribution: Contribution) -> bool:
        status = plugins.status(contribution.plugin_id)
        return status is not None and status.builtin

    strings.clear()
    additions: list[Contribution] = []
    owned: dict[str, set[str]] = {}  # each domain's locales as its owner has them, before any plugin adds
    for contribution in sorted(bundles, key=lambda c: not builtin(c)):
        bundle = contribution.value
        if builtin(contribution):
            strings.add(bundle)
        elif bundle.domain == contribution.plugin_id:
            strings.add(bundle, offered=plugins.is_enabled(contribution.plugin_id))
        else:
            additions.append(contribution)
            continue
        owned.setdefault(bundle.domain, set()).update(locale for locale, table in bundle.strings.items() if table)
    for contribution in additions:
        if not plugins.is_enabled(contribution.plugin_id):
            continue
        bundle = contribution.value
        if bundle.domain == CORE_DOMAIN:
            added, dropped = _core_additions(strings, bundle)
            why = "a plugin may add to the core's strings (a language) but never replace one or write a built-in's"
        else:
            added, dropped = _language_additions(strings, bundle, owned.get(bundle.domain, set()))
            why = (
                f"a plugin may add a language the plugin {bundle.domain!r} does not have, but never a string of a"
                " language it has nor one it has no English for"
            )
        strings.add(added)
        if dropped:
            log.warning(
                "plugin %s: %d string(s) of its %r bundle dropped, since %s: %s",
                contribution.plugin_id, len(dropped), bundle.domain, why,
                ", ".join(dropped[:10]) + (" ..." if len(dropped) > 10 else ""),
            )


def _core_additions(strings: Strings, bundle: I18nBundle) -> tuple[I18nBundle, list[str]]:
    """``bundle`` less what the core already has and what it would make up for a
    built-in; and the dropped ``locale/key`` names."""
    kept: dict[str, dict[str, str]] = {}
    dropped: list[str] = []
    for locale, table in bundle.strings.items():
        for key, text in table.items():
            full = f"{CORE_DOMAIN}.{key}"
            invented = key.startswith("builtin.") and not strings.has(full, FALLBACK_LOCALE)
            if strings.has(full, locale) or invented:
                dropped.append(f"{locale}/{key}")
            else:
                kept.setdefault(locale, {})[key] = text
    return I18nBundle(CORE_DOMAIN, kept), dropped


def _language_additions(strings: Strings, bundle: I18nBundle, owner_locales: set[str]) -> tuple[I18nBundle, list[str]]:
    """``bundle`` (for another plugin's domain) less the locales its owner has, the keys
    the owner has no English for (a plural form English has no use for is the owner's
    key still) and what an earlier plugin added; and the dropped ``locale/key`` names."""
    domain = bundle.domain

    def english(key: str) -> bool:
        if strings.has(f"{domain}.{key}", FALLBACK_LOCALE):
            return True
        base, _, category = key.rpartition(".")
        return bool(base) and category in PLURAL_CATEGORIES and any(
            strings.has(f"{domain}.{base}.{form}", FALLBACK_LOCALE) for form in ("one", "other")
        )

    kept: dict[str, dict[str, str]] = {}
    dropped: list[str] = []
    for locale, table in bundle.strings.items():
        for key, text in table.items():
            if locale in owner_locales or strings.has(f"{domain}.{key}", locale) or not english(key):
                dropped.append(f"{locale}/{key}")
            else:
                kept.setdefault(locale, {})[key] = text
    return I18nBundle(domain, kept), dropped

"""Which strings a plugin may register (``register_i18n``).

The host shows a plugin's title, pages and errors from the bundle of the plugin's own
domain, and its own words from the ``core`` domain, so a bundle under another domain
would let any plugin, even a disabled one, pass itself off as another or put words in
the host's mouth. The rule:

- a plugin's bundle for its own domain (its id) is its own business;
- a bundle for any other plugin's domain, or a domain that is nobody's (it may be the
  next plugin's), is refused: the plugin fails, the message says what to use;
- a bundle for ``core`` may only add what the core lacks (a language, a language's own
  name): a string the core already has is dropped, and so is an invented text for a
  built-in (``builtin.<id>.…`` the core has no English for); each drop is logged with
  the plugin's name. The built-ins' own ``core`` bundles are the core's strings.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from skald_hookspecs.types import I18nBundle
from skald_host.core.i18n import FALLBACK_LOCALE, Strings
from skald_host.core.plugins.manager import Contribution, PluginError, PluginManager

log = logging.getLogger(__name__)

CORE_DOMAIN = "core"


def bundle_validator(plugins: PluginManager) -> Callable[[str, tuple[Any, ...]], I18nBundle]:
    """The ``register`` validator of ``register_i18n``: a well-formed bundle under the
    plugin's own domain or ``core``."""

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
        if bundle.domain in (plugin_id, CORE_DOMAIN):
            return bundle
        owner = plugins.status(bundle.domain)
        whose = f"belongs to the plugin {bundle.domain!r}" if owner is not None else "is not this plugin's id"
        raise PluginError(
            f"bundle domain {bundle.domain!r} {whose}: a plugin registers its strings under its own id"
            f" (I18nBundle({plugin_id!r}, ...)), and may add a language to the host's with the domain 'core'"
        )

    return validate


def add_bundles(strings: Strings, bundles: Iterable[Contribution], plugins: PluginManager) -> None:
    """Merge the accepted bundles into ``strings``: the built-ins' first (their ``core``
    bundles are the core), then each plugin's, whose ``core`` bundle only adds."""

    def builtin(contribution: Contribution) -> bool:
        status = plugins.status(contribution.plugin_id)
        return status is not None and status.builtin

    for contribution in sorted(bundles, key=lambda c: not builtin(c)):
        bundle = contribution.value
        if bundle.domain != CORE_DOMAIN or builtin(contribution):
            strings.add(bundle)
            continue
        added, dropped = _core_additions(strings, bundle)
        strings.add(added)
        if dropped:
            log.warning(
                "plugin %s: %d string(s) of its 'core' bundle dropped, since a plugin may add to the core's strings"
                " (a language) but never replace one or write a built-in's: %s",
                contribution.plugin_id, len(dropped), ", ".join(dropped[:10]) + (" ..." if len(dropped) > 10 else ""),
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

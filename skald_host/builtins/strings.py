"""The host's English and German UI strings, contributed like any plugin's bundle."""

from skald_hookspecs import hookimpl
from skald_hookspecs.types import I18nBundle, PluginInfo

EN = {
    "app.name": "Skald",
    "setup.title": "Welcome to Skald",
    "setup.intro": "Create the first administrator. This account manages members and plugins.",
    "setup.username": "User name",
    "setup.display_name": "Display name",
    "setup.password": "Password",
    "setup.password_repeat": "Repeat password",
    "setup.locale": "Language",
    "setup.encrypted": "Encrypt my private data with my password",
    "setup.submit": "Create administrator",
    "setup.mismatch": "The passwords do not match.",
    "login.title": "Sign in",
    "login.username": "User name",
    "login.password": "Password",
    "login.submit": "Sign in",
    "login.failed": "Wrong user name or password.",
    "login.throttled": "Too many attempts. Try again in {seconds} seconds.",
    "common.logout": "Sign out",
    "common.error": "Something went wrong: {message}",
    "warning.insecure_transport": "This server is reached over plain HTTP from the network: passwords and session cookies travel unencrypted. Put it behind HTTPS.",
}

DE = {
    "app.name": "Skald",
    "setup.title": "Willkommen bei Skald",
    "setup.intro": "Lege den ersten Administrator an. Dieses Konto verwaltet Mitglieder und Plugins.",
    "setup.username": "Benutzername",
    "setup.display_name": "Anzeigename",
    "setup.password": "Passwort",
    "setup.password_repeat": "Passwort wiederholen",
    "setup.locale": "Sprache",
    "setup.encrypted": "Meine privaten Daten mit meinem Passwort verschlüsseln",
    "setup.submit": "Administrator anlegen",
    "setup.mismatch": "Die Passwörter stimmen nicht überein.",
    "login.title": "Anmelden",
    "login.username": "Benutzername",
    "login.password": "Passwort",
    "login.submit": "Anmelden",
    "login.failed": "Falscher Benutzername oder falsches Passwort.",
    "login.throttled": "Zu viele Versuche. Bitte in {seconds} Sekunden erneut versuchen.",
    "common.logout": "Abmelden",
    "common.error": "Etwas ist schiefgegangen: {message}",
    "warning.insecure_transport": "Dieser Server wird über unverschlüsseltes HTTP aus dem Netzwerk erreicht: Passwörter und Sitzungs-Cookies werden im Klartext übertragen. Betreibe ihn hinter HTTPS.",
}


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id="strings",
        title="Interface language",
        description="The host's English and German interface strings.",
        icon="language",
        spec=">=1.0,<2",
    )


@hookimpl
def register_i18n(register) -> None:
    register(I18nBundle("core", {"en": EN, "de": DE}))

"""Every string the page, the app and the API show, in English and German.

Keys become ``mobile-connector.<key>`` in the host's merged table; a key missing in
German falls back to English. Values use ``str.format`` fields.
"""

from __future__ import annotations

from typing import Mapping

STRINGS: Mapping[str, Mapping[str, str]] = {
    "en": {
        "plugin.title": "Mobile app",
        "plugin.description": "Use your assistant from your phone: pair it with a code, chat, approve, and get notified.",
        "page.main.title": "Mobile app",
        "locked": (
            "Your data is locked: the server restarted or you logged out everywhere, and your phone cannot unlock it. "
            "Log in to Skald on the web once, then come back."
        ),
        "err_not_running": "The mobile connector is not running. Ask your administrator.",
        "err_browser_only": "Pair a new phone from the web page, not from a phone.",
        "err_device_only": "Only a paired phone can do this.",
        "err_no_device": "No such device.",
        "err_code": "That code is not right. Show a new code on the Mobile app page and try again.",
        "err_expired": "That code has expired. Show a new code on the Mobile app page.",
        "err_too_many": "Too many wrong codes. Wait an hour, then try again.",
        "err_push_endpoint": "This push service is not allowed.",
        # the member's page in the browser
        "page_title": "Mobile app",
        "page_intro": "Pair your phone: open the app on your phone and scan the code, or type the short code there.",
        "page_new_code": "Show a pairing code",
        "page_code_help": "Single use, valid for 10 minutes.",
        "page_open_app": "Open the app on this phone",
        "page_devices": "Paired devices",
        "page_no_devices": "No device is paired.",
        "page_unlink": "Unlink",
        "page_last_seen": "last seen {when}",
        # the app
        "app_title": "Skald",
        "pair_title": "Pair this phone",
        "pair_intro": "On a computer, open Skald, go to the Mobile app page and show a pairing code. Type it here.",
        "pair_code": "Pairing code",
        "pair_name": "Name of this phone",
        "pair_button": "Pair",
        "conversations": "Conversations",
        "new_chat": "New chat",
        "placeholder": "Write a message",
        "send": "Send",
        "stop": "Stop",
        "attach": "Attach a photo or file",
        "approve": "Allow",
        "deny": "Deny",
        "approval_wants": "The assistant wants to use {tool}.",
        "approved": "Allowed",
        "denied": "Denied",
        "typing": "The assistant is writing…",
        "offline": "Offline: showing your last conversations, read-only.",
        "locked_title": "Your data is locked",
        "settings": "Settings",
        "language": "Language",
        "notifications": "Notifications",
        "notifications_enable": "Turn on notifications",
        "notifications_on": "Notifications are on.",
        "notifications_unavailable": "This browser cannot show notifications.",
        "unlink_self": "Unlink this phone",
        "refused": "This phone is no longer paired. Pair it again to continue.",
        "back": "Back",
        "new_items": "New: {count}",
        "error": "Something went wrong: {message}",
        "empty": "No conversations yet. Start one.",
        "voice_replies": "Read answers aloud",
        "voice_sample": "Answers will be read aloud.",
    },
    "de": {
        "plugin.title": "Mobile App",
        "plugin.description": "Nutze deinen Assistenten auf dem Handy: mit einem Code koppeln, chatten, freigeben und benachrichtigt werden.",
        "page.main.title": "Mobile App",
        "locked": (
            "Deine Daten sind gesperrt: Der Server wurde neu gestartet oder du hast dich überall abgemeldet, und dein "
            "Handy kann sie nicht entsperren. Melde dich einmal im Web bei Skald an und komm dann zurück."
        ),
        "err_not_running": "Die Mobile App ist nicht aktiv. Frag deine Administration.",
        "err_browser_only": "Ein neues Handy koppelst du auf der Webseite, nicht auf einem Handy.",
        "err_device_only": "Das geht nur auf einem gekoppelten Handy.",
        "err_no_device": "Dieses Gerät gibt es nicht.",
        "err_code": "Der Code stimmt nicht. Lass dir auf der Seite „Mobile App“ einen neuen zeigen und versuch es noch einmal.",
        "err_expired": "Der Code ist abgelaufen. Lass dir auf der Seite „Mobile App“ einen neuen zeigen.",
        "err_too_many": "Zu viele falsche Codes. Warte eine Stunde und versuch es dann noch einmal.",
        "err_push_endpoint": "Dieser Push-Dienst ist nicht erlaubt.",
        "page_title": "Mobile App",
        "page_intro": "Koppel dein Handy: Öffne die App auf dem Handy und scanne den Code oder tippe dort den kurzen Code ein.",
        "page_new_code": "Kopplungscode zeigen",
        "page_code_help": "Nur einmal gültig, 10 Minuten lang.",
        "page_open_app": "App auf diesem Handy öffnen",
        "page_devices": "Gekoppelte Geräte",
        "page_no_devices": "Kein Gerät ist gekoppelt.",
        "page_unlink": "Entkoppeln",
        "page_last_seen": "zuletzt gesehen {when}",
        "app_title": "Skald",
        "pair_title": "Dieses Handy koppeln",
        "pair_intro": "Öffne Skald auf einem Computer, geh zur Seite „Mobile App“ und lass dir einen Kopplungscode zeigen. Tippe ihn hier ein.",
        "pair_code": "Kopplungscode",
        "pair_name": "Name dieses Handys",
        "pair_button": "Koppeln",
        "conversations": "Unterhaltungen",
        "new_chat": "Neuer Chat",
        "placeholder": "Nachricht schreiben",
        "send": "Senden",
        "stop": "Stopp",
        "attach": "Foto oder Datei anhängen",
        "approve": "Erlauben",
        "deny": "Ablehnen",
        "approval_wants": "Der Assistent möchte {tool} verwenden.",
        "approved": "Erlaubt",
        "denied": "Abgelehnt",
        "typing": "Der Assistent schreibt …",
        "offline": "Offline: Du siehst deine letzten Unterhaltungen, nur zum Lesen.",
        "locked_title": "Deine Daten sind gesperrt",
        "settings": "Einstellungen",
        "language": "Sprache",
        "notifications": "Benachrichtigungen",
        "notifications_enable": "Benachrichtigungen einschalten",
        "notifications_on": "Benachrichtigungen sind an.",
        "notifications_unavailable": "Dieser Browser kann keine Benachrichtigungen zeigen.",
        "unlink_self": "Dieses Handy entkoppeln",
        "refused": "Dieses Handy ist nicht mehr gekoppelt. Koppel es neu, um weiterzumachen.",
        "back": "Zurück",
        "new_items": "Neu: {count}",
        "error": "Etwas ist schiefgegangen: {message}",
        "empty": "Noch keine Unterhaltungen. Fang eine an.",
        "voice_replies": "Antworten vorlesen",
        "voice_sample": "Antworten werden vorgelesen.",
    },
}

PAGE_KEYS = (
    "page_title", "page_intro", "page_new_code", "page_code_help", "page_open_app", "page_devices", "page_no_devices",
    "page_unlink", "page_last_seen",
)
APP_KEYS = tuple(
    key for key in STRINGS["en"] if not key.startswith(("plugin.", "page.", "page_", "err_"))
) + ("err_code", "err_expired", "err_too_many")

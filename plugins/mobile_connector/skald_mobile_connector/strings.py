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
        # The admin's plugin page ("Who can use it"): no grant list applies to this plugin.
        "plugin.access": (
            "Every active member, in every role (Children too), may pair a phone on the Mobile app page: no grant and "
            "no role limits it. Each member sees and unlinks their own paired phones there; no page lists every "
            "member's phones. Deactivating a member, changing or resetting their password, or ending their sessions "
            "unlinks all their phones."
        ),
        "config.public_url.label": "Public address",
        "config.public_url.description": "The https address phones reach this server at (the QR code points there). Empty: the address of the page.",
        "config.allow_http_push.label": "Allow push services over plain http",
        "config.allow_http_push.description": "For tests with a local push service only; real push services are https.",
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
        "err_too_many": "Too many wrong codes right now. Wait a minute, then try again.",
        "err_push_endpoint": "This push service is not allowed.",
        # the member's page in the browser
        "page_title": "Mobile app",
        "page_intro": "Pair your phone: open the app on your phone and scan the code, or type the short code there.",
        "page_new_code": "Show a pairing code",
        "page_code_help": "Single use, valid for 10 minutes.",
        "page_qr_alt": "QR code to pair a phone",
        "page_open_app": "Open the app on this phone",
        "page_devices": "Paired devices",
        "page_no_devices": "No device is paired.",
        "page_unlink": "Unlink",
        "page_unlink_device": "Unlink {name}",
        "page_paired": "Paired: {name}.",
        "page_unlink_title": "Unlink {name}?",
        "page_unlink_message": "{name} will no longer reach your assistant. To use it again, pair it with a new code.",
        "page_last_seen": "last seen {when}",
        # the app
        "app_title": "Skald",
        "pair_title": "Pair this phone",
        "pair_intro": "On a computer, open Skald, go to the Mobile app page and show a pairing code. Type it here.",
        "pair_code": "Pairing code",
        "pair_name": "Name of this phone",
        "phone_name": "Phone",
        "android_phone_name": "Android phone",
        "pair_button": "Pair",
        "conversations": "Conversations",
        "new_chat": "New chat",
        "placeholder": "Write a message",
        "send": "Send",
        "stop": "Stop",
        "attach": "Attach a photo or file",
        "upload_too_large": "{name} is larger than the upload limit of {size}.",
        "approve": "Allow",
        "deny": "Deny",
        "approval_wants": "The assistant wants to use {tool}.",
        "approved": "Allowed",
        "denied": "Denied",
        "typing": "The assistant is writing…",
        "stopped": "Stopped",
        "offline": "Offline: showing your last conversations, read-only.",
        "locked_title": "Your data is locked",
        "sealed_notice": "Sent. It will be delivered when you next sign in on the web.",
        "locked_write": "You can still write: your message waits, sealed to you, until you next sign in on the web.",
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
        "empty": (
            "No conversations started in this app yet. The app shows only the conversations you start here; "
            "those you started on the web stay on the web. Start one with New chat."
        ),
        "voice_replies": "Read answers aloud",
        "voice_sample": "Answers will be read aloud.",
        "projects": "Projects",
        "no_projects": "You are not in any project.",
        "folder_empty": "This folder is empty.",
        "cannot_show": "This file cannot be shown here ({size} bytes).",
        "waiting_to_send": "Waiting to send: it goes as soon as the server can be reached.",
        "not_sent": "Not sent: {message}. Your message is back in the box below.",
        "attached_only": "(attached files)",
        "remove_attachment": "Remove {name}",
        "approval_stopped": "No longer asked: the conversation was stopped.",
        "approval_expired": "No longer asked: it expired.",
        "approval_settled": "Already answered elsewhere.",
        "reason_stopped_unanswered": "Not answered: the conversation was stopped.",
        "reason_answer_resumed": "An answer here was cut off before it was finished; it was asked for again below.",
        "send_again": "Send again",
    },
    "de": {
        "plugin.title": "Mobile App",
        "plugin.description": "Nutze deinen Assistenten auf dem Handy: mit einem Code koppeln, chatten, freigeben und benachrichtigt werden.",
        "plugin.access": (
            "Jedes aktive Mitglied, in jeder Rolle (auch Kinder), kann auf der Seite „Mobile App“ ein Handy koppeln: "
            "Keine Freigabe und keine Rolle schränkt das ein. Dort sieht jedes Mitglied seine eigenen gekoppelten Handys "
            "und kann sie entkoppeln; keine Seite listet die Handys aller Mitglieder. Ein Mitglied zu deaktivieren, sein "
            "Passwort zu ändern oder zurückzusetzen oder seine Sitzungen zu beenden, entkoppelt alle seine Handys."
        ),
        "config.public_url.label": "Öffentliche Adresse",
        "config.public_url.description": "Die https-Adresse, unter der Handys diesen Server erreichen (dorthin zeigt der QR-Code). Leer: die Adresse dieser Seite.",
        "config.allow_http_push.label": "Push-Dienste über einfaches http erlauben",
        "config.allow_http_push.description": "Nur für Tests mit einem lokalen Push-Dienst; echte Push-Dienste nutzen https.",
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
        "err_too_many": "Gerade zu viele falsche Codes. Warte eine Minute und versuch es dann noch einmal.",
        "err_push_endpoint": "Dieser Push-Dienst ist nicht erlaubt.",
        "page_title": "Mobile App",
        "page_intro": "Koppel dein Handy: Öffne die App auf dem Handy und scanne den Code oder tippe dort den kurzen Code ein.",
        "page_new_code": "Kopplungscode zeigen",
        "page_code_help": "Nur einmal gültig, 10 Minuten lang.",
        "page_qr_alt": "QR-Code zum Koppeln eines Handys",
        "page_open_app": "App auf diesem Handy öffnen",
        "page_devices": "Gekoppelte Geräte",
        "page_no_devices": "Kein Gerät ist gekoppelt.",
        "page_unlink": "Entkoppeln",
        "page_unlink_device": "{name} entkoppeln",
        "page_paired": "Gekoppelt: {name}.",
        "page_unlink_title": "{name} entkoppeln?",
        "page_unlink_message": "{name} erreicht deinen Assistenten danach nicht mehr. Um es wieder zu nutzen, koppel es mit einem neuen Code.",
        "page_last_seen": "zuletzt gesehen {when}",
        "app_title": "Skald",
        "pair_title": "Dieses Handy koppeln",
        "pair_intro": "Öffne Skald auf einem Computer, geh zur Seite „Mobile App“ und lass dir einen Kopplungscode zeigen. Tippe ihn hier ein.",
        "pair_code": "Kopplungscode",
        "pair_name": "Name dieses Handys",
        "phone_name": "Handy",
        "android_phone_name": "Android-Handy",
        "pair_button": "Koppeln",
        "conversations": "Gespräche",
        "new_chat": "Neuer Chat",
        "placeholder": "Nachricht schreiben",
        "send": "Senden",
        "stop": "Stopp",
        "attach": "Foto oder Datei anhängen",
        "upload_too_large": "{name} ist größer als die Upload-Grenze von {size}.",
        "approve": "Erlauben",
        "deny": "Ablehnen",
        "approval_wants": "Der Assistent möchte {tool} verwenden.",
        "approved": "Erlaubt",
        "denied": "Abgelehnt",
        "typing": "Der Assistent schreibt …",
        "stopped": "Gestoppt",
        "offline": "Offline: Du siehst deine letzten Gespräche, nur zum Lesen.",
        "locked_title": "Deine Daten sind gesperrt",
        "sealed_notice": "Gesendet. Die Nachricht wird zugestellt, sobald du dich das nächste Mal im Web anmeldest.",
        "locked_write": "Du kannst trotzdem schreiben: Deine Nachricht wartet, für dich versiegelt, bis du dich das nächste Mal im Web anmeldest.",
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
        "empty": (
            "Noch keine Gespräche in dieser App begonnen. Die App zeigt nur die Gespräche, die du hier beginnst; "
            "die im Web begonnenen bleiben im Web. Fang eins an mit „Neuer Chat“."
        ),
        "voice_replies": "Antworten vorlesen",
        "voice_sample": "Antworten werden vorgelesen.",
        "projects": "Projekte",
        "no_projects": "Du bist in keinem Projekt.",
        "folder_empty": "Dieser Ordner ist leer.",
        "cannot_show": "Diese Datei kann hier nicht gezeigt werden ({size} Bytes).",
        "waiting_to_send": "Wartet auf das Senden: geht raus, sobald der Server erreichbar ist.",
        "not_sent": "Nicht gesendet: {message}. Deine Nachricht steht wieder im Feld unten.",
        "attached_only": "(angehängte Dateien)",
        "remove_attachment": "{name} entfernen",
        "approval_stopped": "Nicht mehr gefragt: das Gespräch wurde gestoppt.",
        "approval_expired": "Nicht mehr gefragt: die Frage ist abgelaufen.",
        "approval_settled": "Schon anderswo beantwortet.",
        "reason_stopped_unanswered": "Nicht beantwortet: das Gespräch wurde gestoppt.",
        "reason_answer_resumed": "Eine Antwort hier wurde unterbrochen, bevor sie fertig war; sie wurde unten neu angefordert.",
        "send_again": "Noch einmal senden",
    },
}

PAGE_KEYS = (
    "page_title", "page_intro", "page_new_code", "page_code_help", "page_qr_alt", "page_open_app", "page_devices", "page_no_devices",
    "page_unlink", "page_unlink_device", "page_unlink_title", "page_unlink_message", "page_last_seen", "page_paired",
)
APP_KEYS = tuple(
    key for key in STRINGS["en"] if not key.startswith(("plugin.", "page.", "page_", "err_"))
) + ("err_code", "err_expired", "err_too_many")

"""Every string the bot sends or the pages show, in English and German.

Keys become ``telegram.<key>`` in the host's merged table; a key missing in German
falls back to English. Values use ``str.format`` fields (``{code}``, ``{tool}``).
"""

from __future__ import annotations

from typing import Mapping

STRINGS: Mapping[str, Mapping[str, str]] = {
    "en": {
        "plugin.title": "Telegram",
        "plugin.description": "Talk to your assistant from Telegram: link a chat with a one-time code.",
        "page.main.title": "Telegram",
        "page.roster.title": "Telegram links",
        "error.no_token": "No bot token is set: enter the one @BotFather gave you in this plugin's settings.",
        "error.webhook_incomplete": "Webhook mode needs both a webhook URL and a webhook secret token in the settings.",
        "error.webhook_no_url": "Webhook mode needs a webhook URL: enter the public https address of /api/plugin/telegram/webhook in the settings.",
        "error.webhook_no_secret": "Webhook mode needs a webhook secret token: enter one (1-256 of A-Z a-z 0-9 _ -) in the settings.",
        "error.webhook_not_https": "The webhook URL must be an https address (Telegram calls no other): {url}",
        "error.webhook_secret_invalid": "The webhook secret token may hold only 1-256 of A-Z a-z 0-9 _ -: change it in the settings.",
        "error.token_refused": "Telegram refused the bot token (401 Unauthorized): check it in the settings.",
        "error.unreachable": "Cannot reach the Bot API at {url}: {reason}",
        "error.api_refused": "The Bot API at {url} refused to start the bot: {reason}",
        "error.start_failed": "The bot could not start: {error}. Disable and enable the plugin to try again.",
        "degraded.unreachable": "Cannot reach the Bot API at {url} ({reason}): the bot keeps trying by itself.",
        "connecting": "The bot keeps trying by itself ({attempts} attempts so far) and starts as soon as the server answers; messages written meanwhile are fetched then.",
        "config.bot_token.label": "Bot token",
        "config.bot_token.description": "The token @BotFather gave you (stored, never shown again).",
        "config.api_base_url.label": "Bot API server",
        "config.api_base_url.description": "Leave empty for Telegram's own (https://api.telegram.org); set it for a self-hosted Bot API server.",
        "config.mode.label": "Mode",
        "config.mode.description": "Long polling needs no public address; a webhook does.",
        "config.mode.choice.polling": "Long polling",
        "config.mode.choice.webhook": "Webhook",
        "config.webhook_url.label": "Webhook URL",
        "config.webhook_url.description": "The public https address of /api/plugin/telegram/webhook (webhook mode only).",
        "config.webhook_secret.label": "Webhook secret token",
        "config.webhook_secret.description": "Telegram sends it with every webhook call (1-256 of A-Z a-z 0-9 _ -).",
        "config.poll_timeout_seconds.label": "Long-poll timeout (seconds)",
        "user_config.code.label": "Pairing code",
        "user_config.unlink.label": "Unlink",
        "user_config.linked.label": "Linked",
        "user_config.chat_id.label": "Telegram chat",
        "user_config.chat_name.label": "Telegram chat name",
        "pair_intro": (
            "Hello! This bot is the Telegram door to a Skald assistant.\n\n"
            "To link this chat to your Skald account, open the Telegram page in Skald and enter this code "
            "within 10 minutes:\n\n{code}\n\n"
            "(You can also give the code to your assistant in the web chat.)"
        ),
        "pair_wait": "I sent you a pairing code a moment ago: enter it on the Telegram page in Skald. Write again in a minute for a new code.",
        "linked": "This chat is now linked to your Skald account. Just write to talk to your assistant. /help shows what I can do.",
        "unlinked": "This chat is no longer linked to a Skald account.",
        "moved": "This chat is no longer linked to your Skald account: the account is now linked to another Telegram chat.",
        "refused": "You can no longer use the assistant through Telegram. Ask your administrator if you think this is a mistake.",
        "locked": (
            "Please log in to Skald on the web first: your account has been locked since the server restarted. "
            "Your message is kept and will be answered after you log in."
        ),
        "logged_out": (
            "You are logged out of Skald, so your private data is locked. Please log in on the web: "
            "your message is kept and will be answered after you do."
        ),
        "locked_unknown": (
            "Please log in to Skald on the web first: your private data is locked until you do. "
            "Your message is kept and will be answered after you log in."
        ),
        "help": (
            "Write to talk to your assistant. Photos, documents and voice notes are passed on.\n"
            "/new starts a new conversation\n/stop stops the current answer\n/tasks shows the helpers' tasks\n/voice on also sends answers as voice notes\n/help shows this help"
        ),
        "voice_on": "Answers now also come as voice notes. /voice off stops that.",
        "voice_off": "Answers come as text only.",
        "voice_usage": "Voice notes are {state}. /voice on or /voice off.",
        "voice_state_on": "on",
        "voice_state_off": "off",
        "voice_failed": "I could not read this answer aloud: {reason}",
        "empty_answer": "The model gave an empty answer. Ask again, or rephrase your message.",
        "new_done": "Started a new conversation.",
        "stop_done": "Stopped.",
        "stop_none": "Nothing is running right now.",
        "tasks_none": "No helper is working on anything here, and nothing failed lately.",
        "tasks_header": "Helpers' tasks in this conversation:",
        "task_line": "• {agent}: {status} — {task}",
        "task_status_queued": "waiting",
        "task_status_running": "running",
        "task_status_waiting_delegates": "waiting for helpers",
        "task_status_failed": "failed",
        "task_status_timed_out": "timed out",
        "task_status_cancelled": "cancelled",
        "task_status_interrupted": "interrupted",
        "approval_prompt": "Your assistant wants to use {tool}:\n{arguments}\n\nAllow it?",
        "approve": "Approve",
        "deny": "Deny",
        "approved": "Approved.",
        "denied": "Denied.",
        "approval_gone": "This request is no longer waiting for an answer.",
        "question_ok": "OK",
        "question_yes": "Yes",
        "question_no": "No",
        "question_decline": "Decline",
        "question_in_app": "Answer this in the app (the conversation shows the form), or decline it here.",
        "question_answered": "Answered.",
        "question_declined": "Declined.",
        "error": "Something went wrong: {reason}",
        "upload_failed": "I could not keep your file: {reason}",
        "download_failed": "I could not fetch your file from Telegram. Please send it again.",
        "file_too_big": "That file is too big for the Telegram bot (at most 20 MB).",
        "unsupported": "I can pass on text, photos, documents and voice notes.",
        "not_delivered": "Your message could not be delivered: {reason}",
        "code_wrong": "That pairing code is not valid.",
        "code_expired": "That pairing code has expired. Write to the bot again for a new one.",
        "code_used": "That pairing code was already used.",
        "too_many": "Too many wrong pairing codes. Try again in an hour.",
        "set_by_pairing": "linked, chat_id and chat_name are set by pairing, not by hand.",
        "not_running": "The Telegram bot is not running.",
        "page_title": "Telegram",
        "page_linked": "Linked to the Telegram chat “{chat}”.",
        "page_unlinked": "Not linked. Write to the bot{bot} in Telegram to get a pairing code, then enter it here.",
        "page_not_running": "The Telegram bot is not running right now, so it cannot give you a pairing code. An administrator can see why on the plugin's page.",
        "page_connecting": "Not linked. The Telegram bot cannot reach Telegram right now and keeps trying: write to it for a pairing code once it is back.",
        "page_code": "Pairing code",
        "page_link": "Link",
        "page_unlink": "Unlink",
        "page_done": "Linked.",
        "roster_title": "Telegram links",
        "roster_empty": "Nobody has linked a Telegram chat yet.",
        "roster_member": "Member",
        "roster_chat": "Telegram chat",
        "roster_since": "Linked since",
    },
    "de": {
        "plugin.title": "Telegram",
        "plugin.description": "Mit dem Assistenten über Telegram sprechen: einen Chat mit einem Einmalcode verknüpfen.",
        "page.main.title": "Telegram",
        "page.roster.title": "Telegram-Verknüpfungen",
        "error.no_token": "Es ist kein Bot-Token eingetragen: Trage das Token von @BotFather in den Einstellungen dieses Plugins ein.",
        "error.webhook_incomplete": "Der Webhook-Modus braucht in den Einstellungen eine Webhook-URL und ein geheimes Webhook-Token.",
        "error.webhook_no_url": "Der Webhook-Modus braucht eine Webhook-URL: Trage die öffentliche https-Adresse von /api/plugin/telegram/webhook in den Einstellungen ein.",
        "error.webhook_no_secret": "Der Webhook-Modus braucht ein geheimes Webhook-Token: Trage eines (1-256 Zeichen aus A-Z a-z 0-9 _ -) in den Einstellungen ein.",
        "error.webhook_not_https": "Die Webhook-URL muss eine https-Adresse sein (Telegram ruft keine andere auf): {url}",
        "error.webhook_secret_invalid": "Das geheime Webhook-Token darf nur 1-256 Zeichen aus A-Z a-z 0-9 _ - enthalten: Ändere es in den Einstellungen.",
        "error.token_refused": "Telegram hat das Bot-Token abgelehnt (401 Unauthorized): Prüfe es in den Einstellungen.",
        "error.unreachable": "Die Bot-API unter {url} ist nicht erreichbar: {reason}",
        "error.api_refused": "Die Bot-API unter {url} hat den Start des Bots abgelehnt: {reason}",
        "error.start_failed": "Der Bot konnte nicht starten: {error}. Deaktiviere und aktiviere das Plugin, um es erneut zu versuchen.",
        "degraded.unreachable": "Die Bot-API unter {url} ist nicht erreichbar ({reason}): Der Bot versucht es selbst weiter.",
        "connecting": "Der Bot versucht es selbst weiter (bisher {attempts} Versuche) und startet, sobald der Server antwortet; inzwischen geschriebene Nachrichten holt er dann ab.",
        "config.bot_token.label": "Bot-Token",
        "config.bot_token.description": "Das Token, das dir @BotFather gegeben hat (wird gespeichert und nie wieder angezeigt).",
        "config.api_base_url.label": "Bot-API-Server",
        "config.api_base_url.description": "Leer lassen für den von Telegram (https://api.telegram.org); nur für einen selbst betriebenen Bot-API-Server ausfüllen.",
        "config.mode.label": "Modus",
        "config.mode.description": "Long Polling braucht keine öffentliche Adresse, ein Webhook schon.",
        "config.mode.choice.polling": "Long Polling (Abfragen)",
        "config.mode.choice.webhook": "Webhook",
        "config.webhook_url.label": "Webhook-URL",
        "config.webhook_url.description": "Die öffentliche https-Adresse von /api/plugin/telegram/webhook (nur im Webhook-Modus).",
        "config.webhook_secret.label": "Geheimes Webhook-Token",
        "config.webhook_secret.description": "Telegram schickt es bei jedem Webhook-Aufruf mit (1–256 Zeichen aus A–Z a–z 0–9 _ -).",
        "config.poll_timeout_seconds.label": "Long-Polling-Zeitlimit (Sekunden)",
        "user_config.code.label": "Kopplungscode",
        "user_config.unlink.label": "Verknüpfung lösen",
        "user_config.linked.label": "Verknüpft",
        "user_config.chat_id.label": "Telegram-Chat",
        "user_config.chat_name.label": "Name des Telegram-Chats",
        "pair_intro": (
            "Hallo! Dieser Bot ist der Telegram-Zugang zu einem Skald-Assistenten.\n\n"
            "Um diesen Chat mit deinem Skald-Konto zu verbinden, öffne die Telegram-Seite in Skald und gib "
            "innerhalb von 10 Minuten diesen Code ein:\n\n{code}\n\n"
            "(Du kannst den Code auch deinem Assistenten im Web-Chat geben.)"
        ),
        "pair_wait": "Ich habe dir gerade einen Kopplungscode geschickt: gib ihn auf der Telegram-Seite in Skald ein. Schreib in einer Minute erneut für einen neuen Code.",
        "linked": "Dieser Chat ist jetzt mit deinem Skald-Konto verbunden. Schreib einfach, um mit deinem Assistenten zu sprechen. /help zeigt, was ich kann.",
        "unlinked": "Dieser Chat ist nicht mehr mit einem Skald-Konto verbunden.",
        "moved": "Dieser Chat ist nicht mehr mit deinem Skald-Konto verbunden: Das Konto ist jetzt mit einem anderen Telegram-Chat verbunden.",
        "refused": "Du kannst den Assistenten nicht mehr über Telegram nutzen. Frag deine Administratorin oder deinen Administrator, falls das ein Irrtum ist.",
        "locked": (
            "Bitte melde dich zuerst im Web bei Skald an: dein Konto ist seit dem Neustart des Servers gesperrt. "
            "Deine Nachricht bleibt erhalten und wird beantwortet, sobald du dich angemeldet hast."
        ),
        "logged_out": (
            "Du bist bei Skald abgemeldet, deshalb sind deine privaten Daten gesperrt. Bitte melde dich im Web an: "
            "deine Nachricht bleibt erhalten und wird beantwortet, sobald du angemeldet bist."
        ),
        "locked_unknown": (
            "Bitte melde dich zuerst im Web bei Skald an: deine privaten Daten sind bis dahin gesperrt. "
            "Deine Nachricht bleibt erhalten und wird beantwortet, sobald du dich angemeldet hast."
        ),
        "help": (
            "Schreib, um mit deinem Assistenten zu sprechen. Fotos, Dokumente und Sprachnachrichten werden weitergegeben.\n"
            "/new beginnt ein neues Gespräch\n/stop hält die laufende Antwort an\n/tasks zeigt die Aufgaben der Helfer\n/voice on schickt Antworten auch als Sprachnachricht\n/help zeigt diese Hilfe"
        ),
        "voice_on": "Antworten kommen jetzt auch als Sprachnachricht. /voice off beendet das.",
        "voice_off": "Antworten kommen nur als Text.",
        "voice_usage": "Sprachnachrichten sind {state}. /voice on oder /voice off.",
        "voice_state_on": "an",
        "voice_state_off": "aus",
        "voice_failed": "Ich konnte diese Antwort nicht vorlesen: {reason}",
        "empty_answer": "Das Modell hat eine leere Antwort gegeben. Frag noch einmal oder formuliere deine Nachricht anders.",
        "new_done": "Neues Gespräch begonnen.",
        "stop_done": "Angehalten.",
        "stop_none": "Gerade läuft nichts.",
        "tasks_none": "Hier arbeitet gerade kein Helfer, und zuletzt ist nichts fehlgeschlagen.",
        "tasks_header": "Aufgaben der Helfer in diesem Gespräch:",
        "task_line": "• {agent}: {status} — {task}",
        "task_status_queued": "wartet",
        "task_status_running": "läuft",
        "task_status_waiting_delegates": "wartet auf Helfer",
        "task_status_failed": "fehlgeschlagen",
        "task_status_timed_out": "Zeit überschritten",
        "task_status_cancelled": "abgebrochen",
        "task_status_interrupted": "unterbrochen",
        "approval_prompt": "Dein Assistent möchte {tool} verwenden:\n{arguments}\n\nErlauben?",
        "approve": "Erlauben",
        "deny": "Ablehnen",
        "approved": "Erlaubt.",
        "denied": "Abgelehnt.",
        "approval_gone": "Diese Anfrage wartet nicht mehr auf eine Antwort.",
        "question_ok": "OK",
        "question_yes": "Ja",
        "question_no": "Nein",
        "question_decline": "Ablehnen",
        "question_in_app": "Beantworte das in der App (das Gespräch zeigt das Formular) oder lehne es hier ab.",
        "question_answered": "Beantwortet.",
        "question_declined": "Abgelehnt.",
        "error": "Etwas ist schiefgegangen: {reason}",
        "upload_failed": "Ich konnte deine Datei nicht speichern: {reason}",
        "download_failed": "Ich konnte deine Datei nicht von Telegram abholen. Bitte schick sie noch einmal.",
        "file_too_big": "Diese Datei ist zu groß für den Telegram-Bot (höchstens 20 MB).",
        "unsupported": "Ich kann Text, Fotos, Dokumente und Sprachnachrichten weitergeben.",
        "not_delivered": "Deine Nachricht konnte nicht zugestellt werden: {reason}",
        "code_wrong": "Dieser Kopplungscode ist ungültig.",
        "code_expired": "Dieser Kopplungscode ist abgelaufen. Schreib dem Bot erneut für einen neuen.",
        "code_used": "Dieser Kopplungscode wurde schon verwendet.",
        "too_many": "Zu viele falsche Kopplungscodes. Versuch es in einer Stunde wieder.",
        "set_by_pairing": "linked, chat_id und chat_name werden durch die Kopplung gesetzt, nicht von Hand.",
        "not_running": "Der Telegram-Bot läuft nicht.",
        "page_title": "Telegram",
        "page_linked": "Verbunden mit dem Telegram-Chat „{chat}“.",
        "page_unlinked": "Nicht verbunden. Schreib dem Bot{bot} in Telegram, um einen Kopplungscode zu erhalten, und gib ihn hier ein.",
        "page_not_running": "Der Telegram-Bot läuft gerade nicht und kann dir deshalb keinen Kopplungscode geben. Ein Administrator sieht auf der Seite des Plugins, warum.",
        "page_connecting": "Nicht verbunden. Der Telegram-Bot erreicht Telegram gerade nicht und versucht es weiter: Schreib ihm für einen Kopplungscode, sobald er wieder erreichbar ist.",
        "page_code": "Kopplungscode",
        "page_link": "Verbinden",
        "page_unlink": "Trennen",
        "page_done": "Verbunden.",
        "roster_title": "Telegram-Verknüpfungen",
        "roster_empty": "Noch niemand hat einen Telegram-Chat verknüpft.",
        "roster_member": "Mitglied",
        "roster_chat": "Telegram-Chat",
        "roster_since": "Verbunden seit",
    },
}

#: The keys a page needs, sent translated by the page's status route.
PAGE_KEYS = ("page_title", "page_code", "page_link", "page_unlink", "page_done")
ROSTER_KEYS = ("roster_title", "roster_empty", "roster_member", "roster_chat", "roster_since")


def telegram_locale(language_code: object) -> str:
    """A Telegram user's ``language_code`` (``de-AT``) as one of our bundle locales."""
    if isinstance(language_code, str) and language_code.lower().startswith("de"):
        return "de"
    return "en"

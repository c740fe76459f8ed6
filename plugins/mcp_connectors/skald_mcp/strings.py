"""Every string the Connectors page shows or the API answers, in English and German.

Keys become ``mcp.<key>`` in the host's merged table; a key missing in German falls
back to English. Values use ``str.format`` fields (``{name}``).
"""

from __future__ import annotations

from typing import Mapping

STRINGS: Mapping[str, Mapping[str, str]] = {
    "en": {
        "title": "Connectors",
        "mine_intro": "Connectors give your assistant tools from other services. These are available to you:",
        "mine_empty": "No connector is available to you yet. Ask your administrator.",
        "admin_title": "Manage connectors",
        "col_name": "Name",
        "col_kind": "Kind",
        "col_state": "State",
        "col_tools": "Tools",
        "col_access": "Who may use it",
        "add": "Add connector",
        "name": "Name",
        "transport": "Kind",
        "command": "Command (program)",
        "args": "Arguments (one per line)",
        "env": "Environment (NAME=value, one per line)",
        "url": "Address (streamable HTTP)",
        "headers": "Headers (Name: value, one per line)",
        "save": "Save",
        "remove": "Remove",
        "restart": "Restart",
        "accept": "Accept changed tools",
        "pending": "Withheld until accepted: {tools}",
        "state_ready": "running",
        "state_starting": "starting",
        "state_failed": "failed",
        "state_stopped": "stopped",
        "confirm_remove": "Remove the connector {name}? Members lose its tools at once.",
        "err_admin_only": "Only an administrator may manage connectors.",
        "err_not_running": "The connectors plugin is not running.",
        "err_exists": "A connector named {name} exists already.",
        "err_unknown": "There is no connector named {name}.",
    },
    "de": {
        "title": "Konnektoren",
        "mine_intro": "Konnektoren geben deinem Assistenten Werkzeuge aus anderen Diensten. Für dich verfügbar sind:",
        "mine_empty": "Dir steht noch kein Konnektor zur Verfügung. Frag deine Administration.",
        "admin_title": "Konnektoren verwalten",
        "col_name": "Name",
        "col_kind": "Art",
        "col_state": "Zustand",
        "col_tools": "Werkzeuge",
        "col_access": "Wer ihn nutzen darf",
        "add": "Konnektor hinzufügen",
        "name": "Name",
        "transport": "Art",
        "command": "Befehl (Programm)",
        "args": "Argumente (eines pro Zeile)",
        "env": "Umgebung (NAME=Wert, einer pro Zeile)",
        "url": "Adresse (Streamable HTTP)",
        "headers": "Header (Name: Wert, einer pro Zeile)",
        "save": "Speichern",
        "remove": "Entfernen",
        "restart": "Neu starten",
        "accept": "Geänderte Werkzeuge annehmen",
        "pending": "Zurückgehalten, bis sie angenommen sind: {tools}",
        "state_ready": "läuft",
        "state_starting": "startet",
        "state_failed": "fehlgeschlagen",
        "state_stopped": "angehalten",
        "confirm_remove": "Den Konnektor {name} entfernen? Mitglieder verlieren seine Werkzeuge sofort.",
        "err_admin_only": "Nur eine Administratorin oder ein Administrator darf Konnektoren verwalten.",
        "err_not_running": "Das Konnektoren-Plugin läuft nicht.",
        "err_exists": "Es gibt schon einen Konnektor namens {name}.",
        "err_unknown": "Es gibt keinen Konnektor namens {name}.",
    },
}

#: The keys the page needs (sent with /mine in the caller's language).
PAGE_KEYS = tuple(k for k in STRINGS["en"] if not k.startswith("err_"))

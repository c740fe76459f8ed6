"""The voice page's words, English and German (domain ``tts_kokoro``)."""

STRINGS = {
    "en": {
        "page_title": "Voice",
        "page_intro": "The voice that reads answers aloud (the speaker button under each answer). A voice that does not speak a reply's language is replaced by one that does.",
        "voice": "Voice",
        "automatic": "Automatic (the best voice for my language)",
        "sample": "Play a sample",
        "sample_text": "Hello! This is how I sound when I read an answer aloud.",
        "sample_text_en": "Hello! This is how I sound when I read an answer aloud.",
        "saved": "Saved.",
        "unavailable": "Not available: {reason}",
        "none": "No voice is available. An administrator can enable a speech plugin.",
        "languages": "Languages: {languages}",
    },
    "de": {
        "page_title": "Stimme",
        "page_intro": "Die Stimme, die Antworten vorliest (die Lautsprecher-Schaltfläche unter jeder Antwort). Spricht sie die Sprache einer Antwort nicht, liest eine andere Stimme vor.",
        "voice": "Stimme",
        "automatic": "Automatisch (die beste Stimme für meine Sprache)",
        "sample": "Hörprobe abspielen",
        "sample_text": "Hallo! So klinge ich, wenn ich eine Antwort vorlese.",
        "sample_text_en": "Hello! This is how I sound when I read an answer aloud.",
        "saved": "Gespeichert.",
        "unavailable": "Nicht verfügbar: {reason}",
        "none": "Keine Stimme verfügbar. Eine Administratorin kann ein Sprach-Plugin aktivieren.",
        "languages": "Sprachen: {languages}",
    },
}

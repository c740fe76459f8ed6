"""Speech for the member's own clients (the chat's read-aloud button, the voice picker,
the mobile app): ``GET /api/tts/voices`` and ``POST /api/tts``.

``POST /api/tts {"text", "voice"?, "format"?}`` answers ``audio/wav`` streamed sentence
by sentence (the header says 'length unknown'; the first sentence is sent as soon as it
is made) or, with ``"format": "ogg"``, one OGG/Opus file. The text travels in the body,
never in the URL, so no access log holds it. Errors come before the first byte of audio
as the API's JSON error: 400 (empty or too long), 422 (no such voice: ``tts_unknown_voice``;
no voice speaks the member's language), 429 (too many at once), 503 (the engine cannot speak).

Why an engine is not ready or failed is said to an admin only: the engine's words
(``health``, a 503's ``error``) may name the admin's files and the libraries' errors.
Anyone else reads that it is not available (``health_code`` ``tts_engine_unavailable``)
or failed (``tts_engine_failed``).
"""

from __future__ import annotations

import logging
from typing import Any, AsyncIterator

from quart import Blueprint, Response, current_app

from skald_hookspecs.tts import TtsUnavailable
from skald_host.core.tts import NoVoice, TextTooLong, TtsBusy, UnknownVoice, no_voice_message
from skald_host.core.tts.manager import language_name
from skald_host.core.tts.audio import resample, stream_header
from skald_host.web.auth import current_principal
from skald_host.web.body import OBJECT, TEXT, accepts, array, json_object, nullable, obj, one_of, returns, text
from skald_host.web.errors import ApiError

log = logging.getLogger(__name__)

bp = Blueprint("tts", __name__)


def _core() -> Any:
    return current_app.config["SKALD_CORE"]


async def _locale() -> str:
    member = current_principal().member
    return member.locale or await _core().default_locale()


@bp.get("/api/tts/voices")
@returns(obj({"locale": TEXT, "voice": nullable(TEXT), "languages": array(TEXT), "engines": array(OBJECT)}))
async def voices() -> dict:
    """The voices the member may hear (by engine), the languages they speak, and the
    member's own choice."""
    core = _core()
    member = current_principal().member
    db = core.users.owner_db(member.id)
    return {
        "locale": await _locale(),
        "voice": await core.tts.preferred_voice(db),
        "languages": core.tts.languages(member),
        "engines": core.tts.catalog(member),
    }


@bp.post("/api/tts")
@accepts(obj({"text": text(min_length=1)}, {
    "voice": nullable(text(200, description="a voice name such as 'espeak-ng:de'; default: the member's choice")),
    "format": one_of("wav", "ogg", description="wav (default): streamed sentence by sentence; ogg: one OGG/Opus file"),
    "locale": text(35, description="the language of the text when it is not the member's own"),
}))
@returns({"type": "string", "contentMediaType": "audio/wav"}, description="the audio", content_types=("audio/wav", "audio/ogg"))
async def speak() -> Any:
    """The text read aloud by the member's voice (or the best one for its language)."""
    core = _core()
    member_id = current_principal().member.id
    data = await json_object()
    text, voice, fmt = data.get("text"), data.get("voice"), data.get("format", "wav")
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, "text must be a non-empty string", field="text", code="tts_nothing_to_read")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, "text is not valid Unicode (a lone surrogate?)", field="text", code="tts_text_not_unicode") from None
    if voice is not None and not isinstance(voice, str):
        raise ApiError(400, "voice must be a voice name such as 'espeak-ng:de'", field="voice", code="field_type", values={"field": "voice"})
    if fmt not in ("wav", "ogg"):
        raise ApiError(400, "format must be 'wav' or 'ogg'", field="format", code="field_invalid", values={"field": "format"})
    ui_locale = await _locale()
    member = current_principal().member
    db = core.users.owner_db(member_id)
    try:
        # ``locale``: the language of the text when the client knows it (a sample);
        # else the language it is written in, so an English reply to a member whose
        # interface is German is read by an English voice (README "Speech").
        if isinstance(data.get("locale"), str):
            locale = data["locale"]
        else:
            locale = await core.tts.text_locale(text, ui_locale, member)
        if fmt == "ogg":
            audio = await core.tts.render(member_id, text, locale=locale, db=db, format="ogg", voice=voice)
            response = Response(audio, mimetype="audio/ogg", headers={"Cache-Control": "no-store"})
            response.timeout = None  # a long file to a slow phone: not cut at Quart's 60 s
            return response
        pieces = await core.tts.pieces(text)
        if voice is not None:
            core.tts.check_voice(voice, member)
        choice, stream, first = await core.tts.start(member_id, locale, voice or await core.tts.preferred_voice(db), member, pieces, db)
    except TextTooLong as exc:
        raise ApiError.refusing(400, exc, field="text") from None
    except UnknownVoice as exc:
        raise ApiError.refusing(422, exc, field="voice") from None
    except NoVoice as exc:
        raise ApiError(
            422, no_voice_message(core.strings, exc, ui_locale),
            code="tts_no_voice", values={"language": language_name(core.strings, exc.language, ui_locale)},
        ) from None
    except TtsBusy as exc:
        raise ApiError.refusing(429, exc, headers={"Retry-After": "5"}) from None
    except TtsUnavailable as exc:  # its words are for the admin; a member reads that it failed
        detail = getattr(exc, "detail", None) or str(exc)
        raise ApiError(503, detail if current_principal().member.is_admin else "the speech engine failed", code="tts_engine_failed") from None

    async def body() -> AsyncIterator[bytes]:
        try:
            yield stream_header(first.rate) + first.frames
            async for pcm in stream:
                yield (pcm if pcm.rate == first.rate else resample(pcm, first.rate)).frames
        except Exception as exc:  # the header is out: all that is left is to end early
            log.warning("speech stream ended early: %s", type(exc).__name__)
        except BaseException as exc:  # cancelled: the listener left, or the server ends the response
            log.info("speech stream ended early: %s (%s)", type(exc).__name__, choice.voice_name)
            raise
        finally:
            await stream.aclose()

    headers = {"Cache-Control": "no-store", "X-Skald-Voice": choice.voice_name, "X-Skald-Sentences": str(len(pieces))}
    response = Response(body(), mimetype="audio/wav", headers=headers)
    # A long reply plays for minutes and is made as it plays: Quart's RESPONSE_TIMEOUT
    # (60 s) cut it silently mid-sentence. The stream ends with its last sentence, or
    # when the listener goes (the body is cancelled, and says so above).
    response.timeout = None
    return response

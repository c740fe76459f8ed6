"""Speech: the engines of ``register_tts_engines`` behind one manager (``Skald.tts``)."""

from skald_host.core.tts.manager import EngineFailed, NoVoice, SpeechRefused, TextTooLong, TtsBusy, TtsManager, UnknownVoice, no_voice_message, validate_engine

__all__ = ["EngineFailed", "NoVoice", "SpeechRefused", "TextTooLong", "TtsBusy", "TtsManager", "UnknownVoice", "no_voice_message", "validate_engine"]

"""Models: providers and models as registry rows, calls through the ``openai`` SDK
against any OpenAI-compatible endpoint, fallback keyed on the HTTP status."""

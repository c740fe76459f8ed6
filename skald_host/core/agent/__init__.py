"""The agent loop: conversations as durable frames, messages and tool calls; one
projection of history to the wire; rounds with model fallback, gated tool calls,
sub-agents, streaming, stop, recovery and compaction (seed 001, "The LLM loop")."""

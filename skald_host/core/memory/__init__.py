"""Memory notes: the agent's private and shared note stores (seed 001 "Memory namespace")."""

"""Placeholder: the loopback OpenAI-compatible server fixture is written here."""

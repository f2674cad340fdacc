"""LLM Speed Playground: measure where local LLM inference time goes."""

__version__ = "0.1.0"

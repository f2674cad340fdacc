"""The web playground: a Gradio app that only calls the engine (it never imports torch itself)."""

from playground.ui.layout import build_demo, launch

__all__ = ["build_demo", "launch"]

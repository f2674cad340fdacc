"""Start the LLM Speed Playground web app: `python app.py [--host H] [--port P] [--model M] [--share]`."""

from __future__ import annotations

import argparse

from playground.presets import DEFAULT_MODEL


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0 for all)")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model selected when the page opens")
    parser.add_argument("--share", action="store_true", help="also open a public gradio.live link")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    from playground.ui import build_demo, launch

    args = parse_args(argv)
    demo = build_demo(default_model=args.model)
    launch(demo, server_name=args.host, server_port=args.port, share=args.share)  # prints the local URL


if __name__ == "__main__":
    main()

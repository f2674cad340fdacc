"""Start the LLM Speed Playground web app: `python app.py [--host H] [--port P] [--model M] [--share] [--hosted]`.

On a Hugging Face Space (SPACE_ID set) hosted mode is on by itself and the app listens on all
interfaces, as the Space's proxy expects. In hosted mode the app checks its stack at start
(playground.stack) and says on the page and in the console what does not match.
"""

from __future__ import annotations

import argparse
import os

from playground.presets import DEFAULT_MODEL


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    on_space = bool(os.environ.get("SPACE_ID"))
    parser = argparse.ArgumentParser(description=__doc__)
    host = os.environ.get("GRADIO_SERVER_NAME") or ("0.0.0.0" if on_space else "127.0.0.1")
    parser.add_argument("--host", default=host, help="interface to listen on (0.0.0.0 for all)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model selected when the page opens")
    parser.add_argument("--share", action="store_true", help="also open a public gradio.live link")
    parser.add_argument("--hosted", action="store_true",
                        help="public-server limits: no local paths or remote code, bounded requests, per-session "
                             "history (also PLAYGROUND_HOSTED=1; always on a Space)")
    return parser.parse_args(argv)


def checked_policy(policy):
    """`policy` with what the stack check finds, each problem also printed to the console."""
    from playground import stack
    from playground.hosting import on_zero_gpu

    found = stack.problems(stack.probe(), on_zero_gpu())
    for problem in found:
        print(f"Stack check: {problem}", flush=True)
    return policy.replace(stack_problems=tuple(found))


def main(argv: list[str] | None = None) -> None:
    from playground.hosting import HostingPolicy

    args = parse_args(argv)
    policy = HostingPolicy.from_env(hosted_flag=args.hosted)
    if policy.zero_gpu:
        import spaces  # noqa: F401  before anything touches CUDA: it emulates CUDA outside `spaces.GPU` calls
    from playground.ui import build_demo, launch

    # torch and its profiler start on this, the main thread: the UI imports the engine lazily, from a
    # worker thread, where the profiler's first start would print a spurious kineto ERROR on every run
    import playground.engine  # noqa: F401

    if policy.hosted:
        policy = checked_policy(policy)
    demo = build_demo(default_model=args.model, policy=policy)
    launch(demo, server_name=args.host, server_port=args.port, share=args.share)  # prints the local URL


if __name__ == "__main__":
    main()

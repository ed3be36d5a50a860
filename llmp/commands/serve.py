"""``llmp serve [SPEC...] [--port N] [--host ADDRESS]``: the library behind a local web page.

Starts the app of :mod:`llmp.serve` with uvicorn on 127.0.0.1 (this machine only) and prints its
address; Ctrl-C stops it. The web packages are the ``[serve]`` extra: without them the command
says how to install them. A spec that cannot be read fails here, before the server starts.
"""

from __future__ import annotations

import argparse

from llmp.commands.flags import positive_int
from llmp.errors import InputError

MAX_PORT = 65535


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", nargs="*", help=".llmp files to open (the first is shown first)")
    parser.add_argument("--port", type=positive_int, default=8000, metavar="N", help="TCP port (default 8000)")
    parser.add_argument("--host", default="127.0.0.1", metavar="ADDRESS",
                        help="address to listen on (default 127.0.0.1: this machine only)")


def run(args: argparse.Namespace) -> int:
    if args.port > MAX_PORT:
        raise InputError(f"--port {args.port} is not a TCP port", hint=f"use 1..{MAX_PORT}, e.g. --port 8000")
    try:
        import uvicorn

        from llmp.serve.app import create_app
    except ImportError as err:
        raise InputError(f"llmp serve needs the web packages ({err.name} is missing)",
                         hint='pip install -e ".[serve]"') from None
    app = create_app(args.spec)
    print(f"llmp serve: http://{args.host}:{args.port}/  (Ctrl-C stops it)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0

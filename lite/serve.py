"""Serve the built site (build/lite) on the loopback interface.

``python lite/serve.py [--port 8000] [--directory build/lite]``. A plain
static server; it only makes sure that WebAssembly and JavaScript modules get
the MIME types browsers insist on, whatever the machine's mime.types says.
Tests and the benchmark use :func:`start` to get a server on a free port.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import threading
from pathlib import Path

SITE = Path(__file__).resolve().parent.parent / "build" / "lite"


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".mjs": "text/javascript",
                      ".js": "text/javascript", ".json": "application/json"}

    def log_message(self, *args):      # quiet: one line per file would drown the output
        pass


def start(directory: Path = SITE, port: int = 0) -> http.server.ThreadingHTTPServer:
    """A running server for ``directory`` on 127.0.0.1 (``port`` 0: a free one)."""
    if not (Path(directory) / "jupyter-lite.json").exists():
        raise FileNotFoundError(f"directory {directory} holds no built site: run make lite")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", port), functools.partial(SiteHandler, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--directory", type=Path, default=SITE)
    args = parser.parse_args(argv)
    server = start(args.directory, args.port)
    print(f"serving {args.directory} at http://127.0.0.1:{server.server_port}/ (Ctrl-C stops)")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()

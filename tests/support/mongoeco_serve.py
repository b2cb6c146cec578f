"""Serve mongoeco's in-memory engine over the MongoDB wire protocol.

Runs inside the Python 3.13 venv made by ``mongo_server.ensure_mongoeco_venv`` (mongoeco needs
3.13; the project runs on 3.11), so it may import only the stdlib and mongoeco.

    python mongoeco_serve.py --host 127.0.0.1 --port 0

prints one line ``ready <port> <uri>`` once the socket listens. Port 0 lets the kernel pick a free
port, so there is no window between "find a free port" and "bind it" for another process to steal.
SIGTERM/SIGINT close the server and exit 0. End-of-file on stdin does the same: the harness holds
the write end of that pipe, so if pytest dies (even by SIGKILL) the server does not linger.
"""

import argparse
import asyncio
import signal
import sys

from mongoeco.wire.proxy import AsyncMongoEcoProxyServer


async def _wait_for_stdin_eof(stop: asyncio.Event) -> None:
    # Read stdin on the event loop rather than in a thread: a daemon thread blocked in
    # sys.stdin.read() makes interpreter shutdown abort ("could not acquire lock ... <stdin>").
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except ValueError:  # stdin is a regular file: nothing to watch
        return
    while await reader.read(4096):
        pass
    stop.set()


async def serve(host: str, port: int, watch_stdin: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    watcher = asyncio.create_task(_wait_for_stdin_eof(stop)) if watch_stdin else None
    async with AsyncMongoEcoProxyServer(host=host, port=port) as server:
        address = server.address
        print("ready", address.port, address.uri, flush=True)
        await stop.wait()
    if watcher is not None:
        watcher.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--no-stdin-watch",
        action="store_true",
        help="keep serving when stdin closes (for running by hand in the background)",
    )
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port, watch_stdin=not args.no_stdin_watch))


if __name__ == "__main__":
    main()

"""`crawlsched demo serve-sites`: the demo's social network and news site on loopback ports of
your choosing, until Ctrl-C or SIGTERM, to try workers or a standalone server against."""

from __future__ import annotations

import signal
import threading

import typer

from crawlsched.cli.common import bad_input, console


def register(app: typer.Typer) -> None:
    @app.command("serve-sites")
    def serve_sites(
        network_port: int = typer.Option(
            ..., "--network-port", min=1, max=65535, help="Port of the demo social network."
        ),
        news_port: int = typer.Option(
            ..., "--news-port", min=1, max=65535, help="Port of the demo news site."
        ),
    ) -> None:
        """Serve the demo social network and news site on 127.0.0.1 until Ctrl-C."""
        from crawlsched.demo.seed import demo_accounts, demo_handles
        from crawlsched.demo.social import DemoSocialNetwork
        from crawlsched.demo.website import DemoWebsite

        if network_port == news_port:
            bad_input("--network-port and --news-port must differ")
        try:
            network = DemoSocialNetwork(demo_handles(), demo_accounts(), port=network_port)
        except OSError as e:
            bad_input(f"--network-port {network_port}: {e.strerror or e}")
        try:
            site = DemoWebsite(port=news_port)
        except OSError as e:
            network.__exit__(None, None, None)
            bad_input(f"--news-port {news_port}: {e.strerror or e}")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        with network, site:
            console.print(f"social network at {network.base_url}/ (profiles under /u/HANDLE)")
            console.print(f"news site at {site.base_url}/news and {site.base_url}/blog")
            console.print("serving until Ctrl-C", highlight=False)
            stop.wait()
        console.print("stopped")

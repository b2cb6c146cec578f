"""Crawl drivers: what a crawl actor runs for each job. See `registry.py` for plug-ins."""

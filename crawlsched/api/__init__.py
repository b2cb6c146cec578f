"""The HTTP API (FastAPI): the same flow and store functions the command line calls.

`create_app(runtime)` builds the application; `crawlsched api serve` and `crawlsched
standalone` run it under uvicorn.
"""

from crawlsched.api.app import create_app

__all__ = ["create_app"]

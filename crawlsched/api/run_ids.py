"""`{run_id:run_id}` in a route: a run's id as a path segment, or a child run's (`<run>/<shard>`,
one slash and the shard's number).

Starlette matches a route against the decoded path, so `%2F` in a child's id is a slash by then;
the default convertor stops at a slash (the child's routes answered 404), and `:path` takes
any tail (`GET /v1/runs/{run_id:path}` would claim `<run>/children/stop` too, and OPTIONS would
list GET there). This one takes a segment and at most a `/<number>` after it.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor


class RunIdConvertor(Convertor):
    regex = r"[^/]+(?:/[0-9]+)?"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("run_id", RunIdConvertor())

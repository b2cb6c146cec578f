"""Every operation the command line asks of the system: its API route and the function that
answers it (`crawlsched.control`). A route named here is in the API's OpenAPI document
(`tests/test_cli_backends.py` checks each against it)."""

from __future__ import annotations

from crawlsched.cli.backend import Op

# Runs
RUNS = Op("GET", "/v1/runs", "runs:page")
RUN = Op("GET", "/v1/runs/{run_id}", "runs:view")
RUN_RESOURCES = Op("GET", "/v1/runs/{run_id}/resources", "runs:resources")
RUN_CHILDREN = Op("GET", "/v1/runs/{run_id}/children", "runs:children")
RUN_HISTORY = Op("GET", "/v1/runs/{run_id}/history", "history:of_run")
RUN_ITEMS = Op("GET", "/v1/runs/{run_id}/items", "runs:items")
RUN_TIMELINE = Op("GET", "/v1/runs/{run_id}/timeline", "runs:timeline")
RUN_NOW = Op("POST", "/v1/runs", "runs:start", sends=True)
RUN_STOP = Op("POST", "/v1/runs/{run_id}/stop", "runs:stop", sends=True)
RUN_STOP_CHILDREN = Op("POST", "/v1/runs/{run_id}/children/stop", "runs:stop_children", True)
RUN_PAUSE = Op("POST", "/v1/runs/{run_id}/pause", "runs:pause")
RUN_RESUME = Op("POST", "/v1/runs/{run_id}/resume", "runs:resume", sends=True)
RUN_RETRY_FAILED = Op("POST", "/v1/runs/{run_id}/retry-failed", "runs:retry_failed", True)
CRAWL = Op("POST", "/v1/crawls", "crawls:start", sends=True)

# Task history
HISTORY = Op("GET", "/v1/history", "history:page")
HISTORY_CORRECTIONS = Op("POST", "/v1/history/corrections", "history:correct")

# Schedules
SCHEDULES = Op("GET", "/v1/schedules", "schedules:page")
SCHEDULE = Op("GET", "/v1/schedules/{schedule_id}", "schedules:get")
SCHEDULE_ADD = Op("POST", "/v1/schedules", "schedules:create")
SCHEDULE_UPDATE = Op("PATCH", "/v1/schedules/{schedule_id}", "schedules:update")
SCHEDULE_PAUSE = Op("POST", "/v1/schedules/{schedule_id}/pause", "schedules:pause")
SCHEDULE_UNPAUSE = Op("POST", "/v1/schedules/{schedule_id}/unpause", "schedules:unpause")
SCHEDULE_STOP = Op("POST", "/v1/schedules/{schedule_id}/stop", "schedules:stop")
SCHEDULE_DELETE = Op("DELETE", "/v1/schedules/{schedule_id}", "schedules:delete")
SCHEDULE_FIRE = Op("POST", "/v1/schedules/{schedule_id}/fire", "schedules:fire")
SCHEDULE_UPCOMING = Op("GET", "/v1/schedules/{schedule_id}/upcoming", "schedules:upcoming")
UPCOMING = Op("GET", "/v1/upcoming", "schedules:upcoming_all")
SCHEDULE_MISSED = Op("GET", "/v1/schedules/{schedule_id}/missed", "schedules:missed")
MISSED = Op("GET", "/v1/missed-runs", "schedules:missed_all")

# Jobs
JOB_COUNTS = Op("GET", "/v1/jobs", "jobs:counts")
JOB_ADD = Op("POST", "/v1/jobs", "jobs:add")
JOB_IMPORT = Op("POST", "/v1/imports", "imports:import_jobs")
JOBS = Op("GET", "/v1/jobs/{collection}", "jobs:page")
JOB = Op("GET", "/v1/jobs/{collection}/{job_id}", "jobs:get")
JOB_REMOVE = Op("DELETE", "/v1/jobs/{collection}/{job_id}", "jobs:remove")
PROBLEMS = Op("GET", "/v1/problems", "jobs:problems")
PROBLEMS_RETRY = Op("POST", "/v1/problems/retry", "jobs:retry_problems")

# Resources: pools, accounts, nodes, proxies, hosts
POOLS = Op("GET", "/v1/pools", "pools:overview")
ACCOUNTS = Op("GET", "/v1/accounts", "pools:accounts")
ACCOUNT_ADD = Op("POST", "/v1/accounts", "pools:add_account")
ACCOUNT_STATE = Op("POST", "/v1/accounts/{media}/{username}/state", "pools:account_state")
NODES = Op("GET", "/v1/nodes", "pools:nodes")
NODE_ADD = Op("POST", "/v1/nodes", "pools:add_node")
NODE_DRAIN = Op("POST", "/v1/nodes/drain", "pools:drain_node")
NODE_REMOVE = Op("DELETE", "/v1/nodes", "pools:remove_node")
PROXIES = Op("GET", "/v1/proxies", "proxies:proxies")
PROXY_ADD = Op("POST", "/v1/proxies", "proxies:add_proxy")
PROXY_STATE = Op("POST", "/v1/proxies/{name}/state", "proxies:proxy_state_set")
PROXY_REMOVE = Op("DELETE", "/v1/proxies/{name}", "proxies:remove_proxy")
PROXY_TIERS = Op("GET", "/v1/proxies/tiers", "proxies:tiers")
ACCOUNT_BIND = Op("POST", "/v1/accounts/{media}/{username}/binding", "proxies:bind_account")
HOSTS = Op("GET", "/v1/hosts", "hosts:page")
HOST = Op("GET", "/v1/hosts/lookup", "hosts:get")
HOST_BLOCK = Op("POST", "/v1/hosts/block", "hosts:block")
HOST_UNBLOCK = Op("POST", "/v1/hosts/unblock", "hosts:unblock")
HOST_LIMITS = Op("PUT", "/v1/hosts/limits", "hosts:set_limits")

# Media, results, the store
MEDIA = Op("GET", "/v1/media", "media:page")
MEDIA_ONE = Op("GET", "/v1/media/{name}", "media:get")
MEDIA_ADD = Op("POST", "/v1/media", "media:add")
MEDIA_UPDATE = Op("PATCH", "/v1/media/{name}", "media:update")
RESULTS = Op("GET", "/v1/results/{model}", "system:results")
STATS = Op("GET", "/v1/stats", "system:stats")
ACTIVITY = Op("GET", "/v1/activity", "system:activity")
DOCTOR = Op("GET", "/v1/doctor", "system:doctor")
DRIVERS = Op("GET", "/v1/drivers", "system:drivers", store=False)
INIT_DB = Op("POST", "/v1/reference", "system:init_db")
TOKENS = Op("GET", "/v1/tokens", "tokens:page")
TOKEN_ADD = Op("POST", "/v1/tokens", "tokens:create")
TOKEN_REVOKE = Op("POST", "/v1/tokens/{token_id}/revoke", "tokens:revoke")
STORE_DUMP = Op("GET", "/v1/store/dump", "store_files:dump")
STORE_LOAD = Op("POST", "/v1/store/load", "store_files:load")

ALL = {name: op for name, op in globals().items() if isinstance(op, Op)}

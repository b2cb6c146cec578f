"""Which queued jobs a running batch takes over (`planning/frontier_rules.pick`): one per host it
could send to now and does not crawl already, at most as many as it has room for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from crawlsched.planning.frontier_rules import pick

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SLACK = timedelta(milliseconds=5)
HOSTS = [f"http://h{i}.test" for i in range(6)]

candidates = st.lists(st.tuples(st.integers(0, 500), st.sampled_from([*HOSTS, ""])), max_size=30)
ready_at = st.dictionaries(
    st.sampled_from(HOSTS), st.integers(0, 2000).map(lambda ms: NOW + timedelta(milliseconds=ms))
)


@given(candidates, ready_at, st.sets(st.sampled_from(HOSTS)), st.integers(-1, 8))
def test_only_free_hosts_one_job_each_within_room(cands, ready, busy, room):
    host_of = dict(cands)  # a job id listed twice keeps its last host: ids are unique in stores
    cands = list(host_of.items())
    picked = pick(cands, ready, busy, NOW, SLACK, room)
    hosts = [host_of[job] for job in picked]
    assert len(picked) <= max(room, 0)
    assert len(set(hosts)) == len(hosts)  # one job per host
    assert all(h and h not in busy and ready[h] <= NOW + SLACK for h in hosts)
    # and as many as it may: every eligible host is taken up to the room
    free = {h for h, at in ready.items() if at <= NOW + SLACK and h not in busy}
    eligible = {h for _, h in cands if h in free}
    assert len(picked) == min(max(room, 0), len(eligible))


@given(candidates, ready_at, st.integers(1, 8))
def test_each_host_s_first_job_in_store_order_the_readiest_host_first(cands, ready, room):
    cands = list(dict(cands).items())
    picked = pick(cands, ready, set(), NOW, SLACK, room)
    first = {}
    for job, host in cands:
        first.setdefault(host, job)
    assert all(first[dict(cands)[job]] == job for job in picked)
    times = [ready[dict(cands)[job]] for job in picked]
    assert times == sorted(times)


def test_a_host_held_elsewhere_or_paced_later_is_left_to_its_own_batch():
    cands = [(1, HOSTS[0]), (2, HOSTS[1]), (3, HOSTS[2]), (4, HOSTS[3])]
    ready = {
        HOSTS[0]: NOW + timedelta(seconds=8),  # another process's slice ends then
        HOSTS[1]: NOW + timedelta(milliseconds=2),  # within the slack: ready
        HOSTS[2]: NOW,
    }  # HOSTS[3]: not known to be ready
    assert pick(cands, ready, {HOSTS[2]}, NOW, SLACK, 4) == [2]
    assert pick(cands, ready, set(), NOW, SLACK, 4) == [3, 2]

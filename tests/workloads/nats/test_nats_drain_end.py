"""The drain's end is a stream's last sequence as its leader gives it: a
member answering while the stream has no leader (jetstream_api.go answers
stream info from its own copy, leader "") gave the evidence run
nats-sync-always-combined-seed1 an end 12,220 short of what was
acknowledged, and the run a false "lost 12,220"."""

import pytest
from nats.js.api import ClusterInfo, StreamInfo, StreamState

from workloads.nats.client import NoStreamLeader, confirmed_last_seq


def info(last: int, cluster: ClusterInfo | None) -> StreamInfo:
    state = StreamState(messages=last, bytes=0, first_seq=1, last_seq=last, consumer_count=0)
    return StreamInfo(config=None, state=state, cluster=cluster)


def test_a_leaders_answer_is_the_end():
    assert confirmed_last_seq(info(35_110, ClusterInfo(leader="n3", name="c"))) == 35_110


def test_a_member_without_a_leader_gives_no_end():
    with pytest.raises(NoStreamLeader, match="last sequence 22890"):
        confirmed_last_seq(info(22_890, ClusterInfo(leader="", name="c")))
    with pytest.raises(NoStreamLeader):
        confirmed_last_seq(info(22_890, ClusterInfo(leader=None, name="c")))


def test_a_server_outside_a_cluster_is_its_streams_word():
    assert confirmed_last_seq(info(10, None)) == 10

"""wire.py, the one definition of every judge-worker message: what the worker serves and the
judge accepts follow from it, and a reply field of the wrong kind or out of bounds is a protocol
violation that names the field."""


import pytest

from kernelvet import protocol, spawn, wire
from kernelvet.worker import REQUESTS, Worker


def test_every_request_has_a_handler_and_one_reply():
    assert REQUESTS is wire.REQUESTS and spawn.REPLIES is wire.REPLIES
    for name in wire.REQUESTS:
        if name != "bye":
            assert callable(getattr(Worker, "_do_" + name)), name
            assert wire.ANSWERS[name] in wire.REPLIES, name
    assert set(wire.ANSWERS.values()) | {"failed"} == set(wire.REPLIES)
    assert all("integrity" in body for body in wire.REPLIES.values())


@pytest.mark.parametrize("body, why", [
    ({"times_ms": "fast"}, "field 'times_ms': not a list"),
    ({"times_ms": [0.1, -0.5]}, "field 'times_ms': item 1: -0.5 is below 0.0"),
    ({"times_ms": [float("nan")]}, "field 'times_ms': item 0: nan is below 0.0"),
    ({"mismatches": True}, "field 'mismatches': not an integer"),
    ({"unseen_pairs": [[0.1, "x"]]}, "field 'unseen_pairs': item 0: item 1: not a number"),
    ({"lead_ms": float("inf")}, "field 'lead_ms': infinite"),
])
def test_a_reply_field_of_the_wrong_kind_is_a_protocol_violation_naming_it(pair, body, why):
    a, b = pair
    protocol.send(a, "timed", body)
    with pytest.raises(protocol.ProtocolError) as exc:
        protocol.recv(b, deadline=None, max_blob_bytes=0, allowed=spawn.REPLIES)
    assert why in str(exc.value)


def test_a_well_formed_reply_passes_with_null_where_allowed(pair):
    a, b = pair
    protocol.send(a, "timed", {"times_ms": [0.1, 0], "unseen_pairs": [[0.1, 0.2]], "order": [1, 2], "integrity": {}})
    assert protocol.recv(b, deadline=None, max_blob_bytes=0, allowed=spawn.REPLIES).body["order"] == [1, 2]
    assert wire.REQUESTS["load"].problem({"output_arg": None, "weight_seed": None}) is None
    assert wire.REQUESTS["load"].problem({"out_nbytes": None}) == "field 'out_nbytes': null"

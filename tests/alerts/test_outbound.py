"""Requests the console sends out (alerts/outbound.py), to a real receiver on loopback: a URL refused as written
with the reason, the policy checked again at send time, what the receiver got, each answer sorted into delivered,
refused for good or worth a retry, a timeout and a closed port retried, a redirect never followed, and a name
that resolves slowly (a real name server that takes its time) given up at the deadline of the whole request."""

from __future__ import annotations

import json
import socket
import subprocess
import time

import pytest

from alerts import outbound
from tests.alerts.receiver import devenv_certificate, receiver
from tests.processes import BIN, ROOT
from tests.slow_dns import slow_names


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("hooks.example.com/x", "must start with https://"),
        ("ftp://hooks.example.com/x", "must start with https://"),
        ("https:///x", "no host"),
        ("https://user:pw@hooks.example.com/x", "user name or password"),
        ("https://hooks.example.com:port/x", "not a URL"),
    ],
)
def test_a_url_is_refused_as_written_with_the_reason(url, reason):
    assert reason in outbound.url_problem(url)
    with pytest.raises(outbound.OutboundError, match=reason.replace("/", "\\/")) as caught:
        outbound.post(url, b"{}", {})
    assert caught.value.retry is False


def test_plain_http_only_where_the_settings_allow_it(settings):
    settings.ALERTS_ALLOW_PLAIN_HTTP = False
    assert "must use https" in outbound.url_problem("http://127.0.0.1:9/hook")
    settings.ALERTS_ALLOW_PLAIN_HTTP = True
    assert outbound.url_problem("http://127.0.0.1:9/hook") is None


def test_the_receiver_gets_the_body_the_path_and_the_headers():
    with receiver(202) as r:
        answer = outbound.post(r.url + "?team=db", b'{"a": 1}', {"X-Test": "yes"})
    assert (answer.status, answer.body, answer.delivered, answer.retry) == (202, "ok", True, False)
    (request,) = r.requests
    assert request.path == "/hook?team=db" and request.body == b'{"a": 1}'
    assert request.headers["X-Test"] == "yes" and request.headers["User-Agent"] == outbound.USER_AGENT
    assert request.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("status", "delivered", "retry"),
    [
        (200, True, False),
        (204, True, False),
        (400, False, False),
        (404, False, False),
        (408, False, True),
        (429, False, True),
        (500, False, True),
        (503, False, True),
    ],
)
def test_each_answer_is_delivered_refused_for_good_or_worth_a_retry(status, delivered, retry):
    with receiver(status) as r:
        answer = outbound.post(r.url, b"{}", {})
    assert (answer.status, answer.delivered, answer.retry) == (status, delivered, retry)


def test_a_redirect_is_an_answer_not_followed():
    with receiver(302) as r:
        answer = outbound.post(r.url, b"{}", {})
    assert (answer.status, answer.delivered, answer.retry, len(r.requests)) == (302, False, False, 1)


def test_a_hanging_receiver_and_a_closed_port_are_worth_a_retry():
    with receiver("hang") as r:
        started = time.monotonic()
        with pytest.raises(outbound.OutboundError, match="no answer from 127.0.0.1 within 0.5 s") as hung:
            outbound.post(r.url, b"{}", {}, timeout_s=0.5)
        assert time.monotonic() - started < 3
    assert hung.value.retry is True
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(outbound.OutboundError) as closed:
        outbound.post(f"http://127.0.0.1:{port}/hook", b"{}", {}, timeout_s=2)
    # The console's words only: the OS's (refused, no route...) would map the console's network for a tenant.
    assert closed.value.message == "could not send to 127.0.0.1: the connection failed" and closed.value.retry


def test_a_receiver_trickling_its_answer_is_cut_at_the_deadline_of_the_whole_request():
    """A status line, then a byte every 0.2 s: each read gets an answer well within the timeout, and yet the
    request is over when the whole of it has taken the timeout."""
    with receiver("trickle") as r:
        started = time.monotonic()
        with pytest.raises(outbound.OutboundError, match="no answer from 127.0.0.1 within 1 s") as trickled:
            outbound.post(r.url, b"{}", {}, timeout_s=1)
        took = time.monotonic() - started
    assert 1 <= took < 2, took
    assert trickled.value.retry is True and len(r.requests) == 1


def test_over_https_the_name_is_verified_and_a_trickle_is_cut_at_the_deadline_too(monkeypatch):
    """The receiver's certificate for localhost (devenv's), its CA trusted: delivered; the same receiver
    trickling its answer over TLS is cut at the deadline as over plain HTTP; and a certificate nobody vouches for
    is refused (worth a retry: the receiver's operator may fix it)."""
    cert, key, ca = devenv_certificate()
    with receiver(200, "trickle", tls=(cert, key)) as r:
        with pytest.raises(outbound.OutboundError, match="localhost: its certificate does not verify") as untrusted:
            outbound.post(r.url, b"{}", {}, timeout_s=5)
        assert untrusted.value.retry is True
        monkeypatch.setenv("SSL_CERT_FILE", str(ca))
        answer = outbound.post(r.url, b'{"a": 1}', {}, timeout_s=5)
        assert (answer.status, answer.body) == (200, "ok")
        started = time.monotonic()
        with pytest.raises(outbound.OutboundError, match="no answer from localhost within 1 s"):
            outbound.post(r.url, b"{}", {}, timeout_s=1)
        took = time.monotonic() - started
    assert 1 <= took < 2, took
    assert [req.body for req in r.requests] == [b'{"a": 1}', b"{}"]


def test_a_metadata_address_is_refused_without_being_dialled():
    for check in (outbound.check_url, lambda url: outbound.post(url, b"{}", {})):
        with pytest.raises(outbound.OutboundError, match="169.254.169.254") as refused:
            check("https://169.254.169.254/latest/meta-data/")
        assert refused.value.retry is False


def test_the_policy_is_checked_again_at_send_time(settings):
    with receiver(200) as r:
        outbound.check_url(r.url)  # allowed when saved
        settings.MONITOR_ALLOW_LOOPBACK = False
        with pytest.raises(outbound.OutboundError, match="loopback") as refused:
            outbound.check_url(r.url)
        with pytest.raises(outbound.OutboundError, match="loopback"):
            outbound.post(r.url, b"{}", {})
    assert refused.value.retry is False and r.requests == []


# Run in a process of its own whose lookups go to the slow name server (tests/slow_dns.py): each call's
# outcome and how long it took, as JSON.
_CALLS = """
import json, sys, time
import django
django.setup()
from alerts import outbound
out = []
for call, url, timeout_s in json.loads(sys.argv[1]):
    started = time.monotonic()
    try:
        if call == "post":
            out.append({"status": outbound.post(url, b"{}", {}, timeout_s=timeout_s).status})
        else:
            outbound.check_url(url, timeout_s=timeout_s)
            out.append({"status": None})
    except outbound.OutboundError as exc:
        out.append({"error": exc.message, "retry": exc.retry})
    out[-1]["took_s"] = time.monotonic() - started
print(json.dumps(out))
"""


def test_a_name_that_resolves_slowly_is_given_up_at_the_deadline_of_the_whole_request(tmp_path):
    """A name server that answers after 2 s: a send within 1 s is given up at 1 s, the lookup counted in its
    deadline (retried later), and so is the check of a channel being saved (refused); a send within 4 s waits
    for the name and is delivered. Before, the lookup came before the deadline started: a name that took a
    minute to resolve held the worker's thread a minute."""
    with receiver(200) as r, slow_names(2.0, tmp_path) as dns:
        url = f"http://{dns.name('slow')}:{r.port}/hook"
        calls = [("post", url, 1), ("check", url, 1), ("post", url, 4)]
        done = subprocess.run(
            dns.within([str(BIN / "python"), "-c", _CALLS, json.dumps(calls)]),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    late, refused, delivered = json.loads(done.stdout)
    assert late["error"] == "the host slow.pgconsole.test did not resolve within 1 s" and late["retry"] is True
    assert refused["error"] == late["error"] and refused["retry"] is False  # a channel is not saved on it
    for given_up in (late, refused):
        assert 1 <= given_up["took_s"] < 1.5, given_up
    assert delivered["status"] == 200 and 2 <= delivered["took_s"] < 4, delivered
    assert len(r.requests) == 1 and dns.asked(dns.name("slow")) == 3  # one lookup a call, each the server's

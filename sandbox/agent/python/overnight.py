"""A client of the overnight gateway protocol v1, standard library only.

The contract is sandbox/protocol/PROTOCOL.md; this module is a convenience
over it for agents written in Python (3.8+), as the Go SDK (sandbox/agent)
is for Go. Copy it next to your agent; it needs nothing but Python.

    from overnight import Client
    c = Client()                      # OVERNIGHT_URL, OVERNIGHT_TOKEN
    info = c.run()                    # task, attempt, lessons
    cp = c.resume()                   # the last durable checkpoint
    res = c.effect("cloud.create_network", {"name": "prod-net"})
    c.checkpoint(1, {"network_id": res["result"]["id"]})
    c.done("success", "deployed")

What it does for you:

- Every call carries the attempt's bearer token. A transport failure (the
  socket refuses connections while the harness restarts) is retried for up
  to two minutes: every call is safe to repeat but an unkeyed effect, which
  is retried only when the request certainly never left.
- effect() derives a stable idempotency key from the last checkpointed
  step ("step-<N>/<k>"), so an attempt that resumes after a crash sends
  the same keys and gets the recorded answers instead of acting twice.
- checkpoint() sends expect_seq (the seq resume() read, or the last
  checkpoint's), so a checkpoint another writer made in between is refused
  (Conflict), never overwritten; call resume() first. A zombie of an
  earlier attempt is refused anyway: its token is fenced.
- chat() calls the model through the gateway's OpenAI-compatible endpoint
  and waits out a 429 for its Retry-After (in real time), retries a 5xx
  and a reset connection, and returns the answer as a dict.
- Gateway errors raise GatewayError (Fenced, Conflict, RunEnded,
  Interrupted are subclasses), with status, code and message.
"""

import calendar
import http.client
import json
import os
import re
import socket
import time
import urllib.parse

__all__ = ["Client", "GatewayError", "Fenced", "Conflict", "RunEnded", "Interrupted", "ModelError"]


class GatewayError(Exception):
    """A non-2xx answer of the gateway: {"error": {"code", "message"}}."""

    def __init__(self, status, code, message, body=None, headers=None):
        super().__init__("%s (%s, HTTP %d)" % (message, code, status))
        self.status, self.code, self.message = status, code, message
        self.body, self.headers = body, headers or {}


class Fenced(GatewayError):
    """409 fenced: a newer attempt owns the run. Stop."""


class Conflict(GatewayError):
    """409 conflict: a stale expect_seq."""


class RunEnded(GatewayError):
    """409 run_ended: the run is over."""


class Interrupted(GatewayError):
    """409 interrupted: a fault cut a sleep short. Sleep again."""


class ModelError(GatewayError):
    """An LLM endpoint error in OpenAI's shape, after the retries."""


_BY_CODE = {"fenced": Fenced, "conflict": Conflict, "run_ended": RunEnded, "interrupted": Interrupted}


class Client:
    """One attempt's connection to the gateway."""

    def __init__(self, url=None, token=None, retry_for=120.0, timeout=300.0):
        u = urllib.parse.urlsplit(url or os.environ["OVERNIGHT_URL"])
        self.host, self.port = u.hostname, u.port or 80
        self.token = token or os.environ["OVERNIGHT_TOKEN"]
        self.retry_for, self.timeout = retry_for, timeout
        self.step, self.seq, self._n = 0, 0, 0

    # -- transport ---------------------------------------------------------

    def _once(self, method, path, body):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            headers = {"Authorization": "Bearer " + self.token}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def _request(self, method, path, body=None, dial_only=False):
        """Sends one request, retrying transport failures: every one while
        retrying is safe, only a refused connection when it is not."""
        deadline, wait = time.monotonic() + self.retry_for, 0.1
        while True:
            try:
                return self._once(method, path, body)
            except (ConnectionRefusedError, FileNotFoundError):
                pass  # the request never left
            except (OSError, http.client.HTTPException):
                if dial_only:
                    raise
            if time.monotonic() + wait > deadline:
                raise ConnectionError("the gateway at %s:%d did not answer for %.0fs" % (self.host, self.port, self.retry_for))
            time.sleep(wait)
            wait = min(2 * wait, 2.0)

    def _call(self, method, path, body=None, dial_only=False):
        status, headers, data = self._request(method, path, body, dial_only)
        try:
            doc = json.loads(data) if data else {}
        except ValueError:
            if status < 300:
                raise
            doc = {}  # an error body that is not JSON: its text is the message
        if status >= 300:
            err = doc.get("error", {}) if isinstance(doc, dict) else {}
            cls = _BY_CODE.get(err.get("code"), GatewayError)
            raise cls(status, err.get("code", "unknown"), err.get("message", data.decode(errors="replace")), doc, headers)
        return doc

    # -- the protocol ------------------------------------------------------

    def run(self):
        """GET /v1/run: {run_id, attempt, scenario, task, lessons, now}."""
        return self._call("GET", "/v1/run")

    def resume(self):
        """GET /v1/checkpoint: {seq, step, state}; remembers step and seq
        (keys and expect_seq follow from them)."""
        cp = self._call("GET", "/v1/checkpoint")
        self.step, self.seq, self._n = cp.get("step", 0), cp.get("seq", 0), 0
        return cp

    def checkpoint(self, step, state):
        """PUT /v1/checkpoint with expect_seq: durable before it returns."""
        out = self._call("PUT", "/v1/checkpoint", {"step": step, "state": state, "expect_seq": self.seq})
        self.step, self.seq, self._n = step, out["seq"], 0
        return out["seq"]

    def effect(self, kind, args, key=None):
        """POST /v1/effects under a stable key ("step-<N>/<k>", N the step
        after the last checkpoint, k counting this step's effects) unless
        key is given. Returns {key, status, result, error, replayed}; a
        refusal is status "failed" with error {code, message, details,
        transient}, an answer to handle, not an exception."""
        if key is None:
            key = "step-%d/%d" % (self.step + 1, self._n)
            self._n += 1
        return self._call("POST", "/v1/effects", {"key": key, "kind": kind, "args": args})

    def effect_unkeyed(self, kind, args):
        """An effect nothing protects from running twice (reported as
        unkeyed); retried only when it certainly never left."""
        return self._call("POST", "/v1/effects", {"kind": kind, "args": args}, dial_only=True)

    def clock(self):
        """GET /v1/clock: the run's virtual time (RFC 3339)."""
        return self._call("GET", "/v1/clock")["now"]

    def sleep(self, seconds):
        """Sleeps seconds of the run's virtual time: POST /v1/sleep {until},
        the clock now plus seconds, which is safe to send again (a sleep
        whose reply was lost is not slept twice). A fault that cuts the
        sleep short (409 interrupted) is slept through."""
        until = _format_time(_parse_time(self.clock()) + int(round(seconds * 1e9)))
        while True:
            try:
                return self._call("POST", "/v1/sleep", {"until": until})["now"]
            except Interrupted:
                continue

    def event(self, type, message="", data=None):
        """POST /v1/events: one entry of the trajectory."""
        body = {"type": type}
        if message:
            body["message"] = message
        if data is not None:
            body["data"] = data
        self._call("POST", "/v1/events", body)

    def done(self, outcome, summary="", claims=None):
        """POST /v1/done: the agent's claim, "success" or "failure"."""
        body = {"outcome": outcome, "summary": summary}
        if claims is not None:
            body["claims"] = claims
        self._call("POST", "/v1/done", body)

    def chat(self, request, tries=8):
        """POST /v1/llm/chat/completions (OpenAI's shape). A 429 is waited
        out for its Retry-After, in real time, as OpenAI's own clients do; a
        5xx or a reset connection is retried after a back-off; an error the
        gateway says a retry cannot fix (x-should-retry: false) is raised at
        once. Raises ModelError with the last error."""
        wait = 0.5
        for attempt in range(1, tries + 1):
            try:
                # dial_only: a connection lost after the request left comes
                # back here, to this loop's back-off.
                status, headers, data = self._request("POST", "/v1/llm/chat/completions", request, dial_only=True)
            except (OSError, http.client.HTTPException, ConnectionError) as e:
                if attempt == tries:
                    raise ModelError(0, "connection", str(e))
                time.sleep(wait)
                wait = min(2 * wait, 8.0)
                continue
            if status < 300:
                return json.loads(data)
            try:
                doc = json.loads(data) if data else {}
            except ValueError:
                doc = {"error": {"message": data.decode(errors="replace")}}
            err = doc.get("error", {}) if isinstance(doc, dict) else {}
            e = ModelError(status, err.get("code") or err.get("type") or "error", err.get("message", ""), doc, headers)
            if headers.get("x-should-retry") == "false" or attempt == tries or (status < 500 and status != 429):
                raise e
            delay = wait
            if status == 429 and "retry-after" in headers:
                try:
                    delay = float(headers["retry-after"])
                except ValueError:
                    pass
            time.sleep(delay)
            wait = min(2 * wait, 8.0)
        raise AssertionError("unreachable")


_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def _parse_time(text):
    """An RFC 3339 time (the gateway's clock) as integer nanoseconds since
    the epoch: exact, where a float would round the nanoseconds away."""
    m = _RFC3339.match(text)
    if not m:
        raise ValueError("not an RFC 3339 time: %r" % text)
    y, mo, d, h, mi, sec, frac, zone = m.groups()
    t = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(sec)))
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        t -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return t * 1000000000 + int((frac or "0").ljust(9, "0"))


def _format_time(ns):
    """Integer nanoseconds since the epoch as RFC 3339 in UTC."""
    secs, frac = divmod(ns, 1000000000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + ".%09dZ" % frac

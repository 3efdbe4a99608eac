#!/usr/bin/env python3
"""An MCP client over streamable HTTP with Python's standard library only, and an agent using it.

MCPClient speaks MCP to $OVERNIGHT_MCP_URL — the gateway's MCP endpoint, the attempt's token in
its path — with plain urllib: initialize, notifications/initialized, tools/list and tools/call,
each a JSON-RPC POST answered with JSON (or an event stream, which it reads too). initialize's
answer carries an Mcp-Session-Id, which it sends back; listen() opens that session's GET stream
and yields the server's notifications (notifications/tools/list_changed when a fault changes the
tools).

Run as a program it is the Python twin of examples/mcp/agent: it opens one ticket per title of the
task with tickets__create_ticket, resuming from its last checkpoint and giving each call a key in
_meta["overnight.dev/idempotency-key"]; with --no-keys it gives none and starts over every attempt.
With --watch-tools it also listens on its session's stream while it works, and once done waits for
notifications/tools/list_changed, lists the tools again and reports which went (a scenario with an
mcp-tool-gone fault, as the harness's specs run it).
The task and checkpoints come from the gateway protocol ($OVERNIGHT_URL, $OVERNIGHT_TOKEN).
"""
import json
import os
import queue
import sys
import threading
import time
import urllib.error
import urllib.request

KEY_FIELD = "overnight.dev/idempotency-key"
REPLAYED_FIELD = "overnight.dev/replayed"


class RPCError(Exception):
    """A JSON-RPC error answer: code, message and data (the harness's {code, retry_after_ms})."""

    def __init__(self, error):
        super().__init__("%s (JSON-RPC %s)" % (error.get("message"), error.get("code")))
        self.code, self.message, self.data = error.get("code"), error.get("message"), error.get("data") or {}


class MCPClient:
    def __init__(self, url, timeout=60):
        self.url, self.timeout, self.next_id = url, timeout, 1
        self.session, self.protocol = None, "2025-06-18"

    def _post(self, message):
        req = urllib.request.Request(self.url, data=json.dumps(message).encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "application/json, text/event-stream")
        req.add_header("MCP-Protocol-Version", self.protocol)
        if self.session:
            req.add_header("Mcp-Session-Id", self.session)
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            self.session = resp.headers.get("Mcp-Session-Id") or self.session
            body = resp.read().decode()
            if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                body = "".join(l[5:].strip() for l in body.splitlines() if l.startswith("data:"))
            return json.loads(body) if body.strip() else None

    def request(self, method, params=None):
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        self.next_id += 1
        answer = self._post(msg)
        if "error" in answer:
            raise RPCError(answer["error"])
        return answer["result"]

    def notify(self, method, params=None):
        self._post({"jsonrpc": "2.0", "method": method, "params": params or {}})

    def initialize(self):
        result = self.request("initialize", {
            "protocolVersion": self.protocol, "capabilities": {},
            "clientInfo": {"name": "client.py", "version": "1"}})
        self.protocol = result.get("protocolVersion", self.protocol)
        self.notify("notifications/initialized")
        return result

    def list_tools(self):
        return self.request("tools/list")["tools"]

    def call_tool(self, name, arguments, key=None):
        params = {"name": name, "arguments": arguments}
        if key:
            params["_meta"] = {KEY_FIELD: key}
        return self.request("tools/call", params)

    def listen(self, opened=None):
        """Open the session's GET stream and yield each message the server sends on it.

        The stream is server-sent events: "data:" lines, an event ending at a blank line. It
        stays open until the session ends (the gateway closes an attempt's sessions with it).
        """
        req = urllib.request.Request(self.url, method="GET")
        req.add_header("Accept", "text/event-stream")
        req.add_header("MCP-Protocol-Version", self.protocol)
        req.add_header("Mcp-Session-Id", self.session)
        with urllib.request.urlopen(req, timeout=None) as resp:
            if opened:
                opened()
            data = []
            for raw in resp:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line and data:
                    yield json.loads("".join(data))
                    data = []


def gateway(method, path, body=None):
    """One call of the gateway protocol (task, checkpoints, done)."""
    req = urllib.request.Request(os.environ["OVERNIGHT_URL"] + path, method=method,
                                 data=None if body is None else json.dumps(body).encode())
    req.add_header("Authorization", "Bearer " + os.environ["OVERNIGHT_TOKEN"])
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as resp:
        data = resp.read()
        return json.loads(data) if data.strip() else None


def call_retrying(client, name, arguments, key):
    """tools/call, retried under the same key while the harness says to try again later."""
    for _ in range(30):
        try:
            return client.call_tool(name, arguments, key)
        except RPCError as e:
            wait = e.data.get("retry_after_ms") if isinstance(e.data, dict) else None
            if not wait:
                raise
            print("%s: %s, retrying in %sms" % (name, e.data.get("code"), wait), flush=True)
            time.sleep(wait / 1000)
    raise RuntimeError("%s: gave up" % name)


def watch(client):
    """Read the session's stream in a thread; the notifications it carries arrive on the queue."""
    got, opened = queue.Queue(), threading.Event()

    def read():
        try:
            for msg in client.listen(opened.set):
                got.put(msg)
        except Exception as e:  # noqa: BLE001 - the stream ends with the session
            print("stream ended: %s" % e, flush=True)
        opened.set()

    threading.Thread(target=read, daemon=True).start()
    opened.wait(20)  # a notification sent before the stream is open reaches no one
    return got


def tools_changed(client, got, before):
    """Wait for notifications/tools/list_changed, then list the tools again: which went?"""
    msg = got.get(timeout=20)
    if msg.get("method") != "notifications/tools/list_changed":
        raise RuntimeError("the stream carried %r, not notifications/tools/list_changed" % msg)
    print("notified: %s" % msg["method"], flush=True)
    after = [t["name"] for t in client.list_tools()]
    gone = sorted(set(before) - set(after))
    print("tools gone: %s" % gone, flush=True)
    for name in gone:
        res = client.call_tool(name, {})
        print("calling %s: isError %s: %s" % (name, res.get("isError"), res["content"][0]["text"]), flush=True)
    return gone


def main(argv):
    keyed = "--no-keys" not in argv
    info = gateway("GET", "/v1/run")
    titles = info["task"]["titles"]
    step = gateway("GET", "/v1/checkpoint")["step"] if keyed else 0
    client = MCPClient(os.environ["OVERNIGHT_MCP_URL"])
    client.initialize()
    tools = [t["name"] for t in client.list_tools()]
    got = watch(client) if "--watch-tools" in argv else None
    print("attempt %d: tools %s; opening tickets %d..%d" % (info["attempt"], tools, step, len(titles) - 1), flush=True)
    for i in range(step, len(titles)):
        key = "ticket-%d" % i if keyed else None
        res = call_retrying(client, "tickets__create_ticket", {"title": titles[i]}, key)
        if res.get("isError"):
            raise RuntimeError("create_ticket %r: %s" % (titles[i], res["content"]))
        print("ticket %d: %s (replayed: %s)" % (i, res["content"][0]["text"], bool((res.get("_meta") or {}).get(REPLAYED_FIELD))), flush=True)
        gateway("PUT", "/v1/checkpoint", {"step": i + 1, "state": {"opened": i + 1}})
    summary = "opened %d tickets" % len(titles)
    if got is not None:
        summary += "; tools gone: %s" % ", ".join(tools_changed(client, got, tools))
    gateway("POST", "/v1/done", {"outcome": "success", "summary": summary})


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception as e:  # noqa: BLE001 - report any failure to the harness, then exit non-zero
        print("client.py:", e, file=sys.stderr, flush=True)
        try:
            gateway("POST", "/v1/done", {"outcome": "failure", "summary": str(e)})
        except Exception:  # noqa: BLE001
            pass
        sys.exit(1)

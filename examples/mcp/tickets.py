#!/usr/bin/env python3
"""A small ticket system as an MCP server over stdio, with the standard library only.

JSON-RPC 2.0, one message per line on stdin and stdout (MCP's stdio transport). Its state is a
JSON file, $TICKETS_DB (default ./tickets.json), rewritten after every change.

It deliberately does NOT deduplicate by idempotency key: it records the key each call carried in
_meta["overnight.dev/idempotency-key"] beside the ticket, and creates a ticket on every
create_ticket. So a call executed twice shows as two tickets in its own file — the harness's
journal is not the only witness.

Tools:
  create_ticket {title}   mutating, not idempotent: opens a ticket (a title of at most 40 characters)
  close_ticket  {id}      mutating, idempotent: closes a ticket (closing it again changes nothing)
  list_tickets  {}        read-only
"""
import json
import os
import sys

PROTOCOL_VERSION = "2025-06-18"
KEY_FIELD = "overnight.dev/idempotency-key"
DB = os.environ.get("TICKETS_DB", "tickets.json")
MAX_TITLE = 40  # a longer title is refused (isError): the reflection example's failure

TOOLS = [
    {
        "name": "create_ticket",
        "description": "Open a ticket with a title (at most 40 characters); answers the ticket.",
        "inputSchema": {
            "type": "object",
            "properties": {"title": {"type": "string"}},
            "required": ["title"],
        },
        "annotations": {"title": "Open a ticket", "readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
    },
    {
        "name": "close_ticket",
        "description": "Close a ticket by id.",
        "inputSchema": {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
        },
        "annotations": {"title": "Close a ticket", "readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
    },
    {
        "name": "list_tickets",
        "description": "List every ticket.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"title": "List tickets", "readOnlyHint": True},
    },
]


def load():
    try:
        with open(DB) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"tickets": []}


def save(state):
    tmp = DB + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, DB)


def text(value, is_error=False):
    out = {"content": [{"type": "text", "text": json.dumps(value)}]}
    if not is_error:
        out["structuredContent"] = value
    else:
        out["isError"] = True
    return out


def call(name, args, meta):
    state = load()
    if name == "create_ticket":
        title = args.get("title")
        if not isinstance(title, str) or not title:
            return text({"error": "title: want a non-empty string"}, is_error=True)
        if len(title) > MAX_TITLE:
            return text({"error": "title: at most %d characters, got %d" % (MAX_TITLE, len(title))}, is_error=True)
        ticket = {"id": len(state["tickets"]) + 1, "title": title, "status": "open", "key": meta.get(KEY_FIELD)}
        state["tickets"].append(ticket)
        save(state)
        return text(ticket)
    if name == "close_ticket":
        for t in state["tickets"]:
            if t["id"] == args.get("id"):
                t["status"] = "closed"
                save(state)
                return text(t)
        return text({"error": "no ticket %r" % args.get("id")}, is_error=True)
    if name == "list_tickets":
        return text({"tickets": state["tickets"]})
    return None


def handle(msg):
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "tickets", "version": "1.0.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        res = call(params.get("name"), params.get("arguments") or {}, params.get("_meta") or {})
        if res is None:
            raise RpcError(-32602, "unknown tool %r" % params.get("name"))
        return res
    raise RpcError(-32601, "method not found: %s" % method)


class RpcError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            reply({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            continue
        if "id" not in msg:
            continue  # a notification (notifications/initialized, cancelled): nothing to answer
        try:
            reply({"jsonrpc": "2.0", "id": msg["id"], "result": handle(msg)})
        except RpcError as e:
            reply({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": e.code, "message": e.message}})


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

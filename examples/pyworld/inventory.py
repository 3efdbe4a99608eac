#!/usr/bin/env python3
"""inventory: an example overnight world, in Python with the standard library only.

A *world* is the system an agent acts on. The overnight harness sends it every
effect the agent asks for and judges the run by what the world says really
happened, not by what the agent claims. This file is a complete world that
speaks the world protocol (overnight-world/1: HTTP + JSON) -- copy it, keep the
plumbing, and replace the inventory with your own system.

The inventory: a warehouse with items (a SKU, a name, a quantity in stock) and
reservations of stock for orders. Three effect kinds:

    inventory.add_item  {sku, name, quantity}   stocks an item. NOT idempotent:
                                                a second add of the same sku
                                                makes a second record (a
                                                duplicate the harness catches).
    inventory.reserve   {sku, quantity, order}  reserves stock for an order.
                                                NOT idempotent: a second
                                                reserve of the same order
                                                reserves the stock again.
    inventory.get_item  {sku}                   reads one SKU's stock.

API v2 renames the argument `quantity` to `count`; a v2 request that still
sends `quantity` is refused with 400 field_renamed, whose details say how to
correct it. The harness switches versions with set_version (the api-version
fault).

Run it by hand:

    python3 inventory.py --addr 127.0.0.1:8088 --data ./inventory-data
    curl -s localhost:8088/v1/describe

It prints `serving world inventory on http://HOST:PORT` once it listens.

The rules every world must keep (and how this one keeps them):

  1. Record every request in a ledger, with its idempotency key, in the SAME
     durable write as the change it makes, and answer only once that write is
     durable: here, one SQLite transaction per request (synchronous=FULL), so
     a crash can never leave a change without its record, nor the reverse.
  2. Never deduplicate by key yourself. A repeated key is recorded again as a
     new entry; the harness decides what is a retry. `lookup` answers with
     the outcome of the LAST request received with the key.
  3. A refusal of an effect (bad arguments, no stock) is an *outcome*, in a
     200 answer, recorded like any other. A non-2xx answer means the call
     itself was wrong (a bad body, an unknown instance).
  4. Instances: the harness may ask for an isolated copy (a "shadow") rebuilt
     from a ledger, to replay or verify an agent without touching the real
     world. Replaying must give the recorded answers, or the copy is refused.
"""

import argparse
import functools
import json
import os
import re
import signal
import socket
import sqlite3
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# --------------------------------------------------------------------------
# What the world is: its name, versions and kinds (the `describe` answer).
# --------------------------------------------------------------------------

PROTOCOL = "overnight-world/1"  # the protocol this file speaks
NAME = "inventory"  # the world's name; a scenario's `world: {name: ...}`

V1, V2 = "v1", "v2"
VERSIONS = [V1, V2]  # the first is the one a new world starts in

KIND_ADD_ITEM = "inventory.add_item"
KIND_RESERVE = "inventory.reserve"
KIND_GET_ITEM = "inventory.get_item"

# A world event's ledger kind: an API version change (key "", not an effect).
EVENT_API_VERSION = "world.api_version"

# Go's zero time: the `now` of a request that gives none.
ZERO_TIME = "0001-01-01T00:00:00Z"


def quantity_arg(version):
    """The name of the quantity argument in an API version."""
    return "count" if version == V2 else "quantity"


def kinds(version):
    """The effect kinds an API version offers, as the harness reads them.

    `identity` says which argument names the logical thing a request acts on:
    two successful requests of a non-idempotent kind with the same identity
    are a duplicate. `destructive` marks kinds whose effect cannot be had
    back by another request (here: reserving takes stock away).
    """
    q = quantity_arg(version)
    renamed = " (v1 called it quantity)" if version == V2 else ""
    return [
        {
            "name": KIND_ADD_ITEM,
            "idempotent": False,
            "read_only": False,
            "identity": "args.sku",
            "args": "{sku, name, %s}" % q,
            "result": "{id, sku, name, quantity}",
            "doc": "stocks %s units of an item%s; not idempotent: a second add "
            "of the same sku makes a second record" % (q, renamed),
        },
        {
            "name": KIND_RESERVE,
            "idempotent": False,
            "read_only": False,
            "destructive": True,
            "identity": "args.order",
            "args": "{sku, %s, order}" % q,
            "result": "{id, order, sku, quantity, available}",
            "doc": "reserves %s units of a sku for an order%s; not idempotent: "
            "a second reserve of the same order reserves the stock again; "
            "409 insufficient_stock when too little is available" % (q, renamed),
        },
        {
            "name": KIND_GET_ITEM,
            "idempotent": True,
            "read_only": True,
            "args": "{sku}",
            "result": "{sku, name, quantity, reserved, available, ids}",
            "doc": "reads one sku's stock (summed over its records); 404 not_found "
            "when it was never stocked",
        },
    ]


# Requests that succeed, in this order, on a fresh world (in v1): what the
# conformance kit (`overnight world check`) applies to check that this world
# keeps the protocol's promises. One of each kind.
EXAMPLES = [
    {"kind": KIND_ADD_ITEM, "args": {"sku": "A-1", "name": "widget", "quantity": 10}},
    {"kind": KIND_RESERVE, "args": {"sku": "A-1", "quantity": 3, "order": "order-7"}},
    {"kind": KIND_GET_ITEM, "args": {"sku": "A-1"}},
]


def describe():
    """The answer to /v1/describe."""
    return {
        "protocol": PROTOCOL,
        "name": NAME,
        "summary": "a warehouse: items in stock and reservations for orders "
        "(an example world in Python)",
        "versions": [{"name": v, "kinds": kinds(v)} for v in VERSIONS],
        "capabilities": {
            "goal": True,
            "duplicates": True,
            "versions": True,
            "instances": True,
        },
        "examples": EXAMPLES,
    }


# --------------------------------------------------------------------------
# Outcomes and errors.
# --------------------------------------------------------------------------


def done(result):
    """A successful outcome."""
    return {"status": "done", "result": result}


def failed(status, code, message, details=None):
    """A failed outcome: the world refused the effect.

    Status is an HTTP-like code: 4xx is permanent (the same request will be
    refused again, so the harness keeps the answer), 5xx is transient (the
    harness may retry it with the same key). Details are machine-readable
    hints an agent can act on.
    """
    error = {
        "code": code,
        "message": message,
        "status": status,
        "transient": status >= 500,
    }
    if details is not None:
        error["details"] = details
    return {"status": "failed", "error": error}


class Refused(Exception):
    """Raised while working a request out: the effect is refused (an outcome)."""

    def __init__(self, outcome):
        super().__init__(outcome["error"]["message"])
        self.outcome = outcome


class CallError(Exception):
    """Raised while handling a call: the call itself is refused (a non-2xx)."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def bad_request(message):
    return CallError(400, "bad_request", message)


# --------------------------------------------------------------------------
# Arguments of effects.
# --------------------------------------------------------------------------

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_QUANTITY = 1_000_000_000


def invalid(message, details=None):
    return Refused(failed(400, "invalid_argument", message, details))


def check_label(args, name):
    """A sku or an order id: 1-64 of [A-Za-z0-9._-], starting with a letter or digit."""
    value = args.get(name)
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise invalid(
            "%s %s: want 1-64 of [A-Za-z0-9._-], starting with a letter or digit"
            % (name, json.dumps(value))
        )
    return value


def check_text(args, name):
    value = args.get(name)
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise invalid("%s %s: want a non-empty string of at most 200 characters" % (name, json.dumps(value)))
    return value


def check_quantity(args, name):
    value = args.get(name)
    # bool is an int in Python; JSON true is not a quantity.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_QUANTITY:
        raise invalid("%s %s: want an integer in 1..%d" % (name, json.dumps(value), MAX_QUANTITY))
    return value


def decode_args(version, kind, args, takes):
    """Checks a request's arguments against the names the kind takes.

    In v2, the v1 name `quantity` is refused first with field_renamed, whose
    details tell an agent exactly how to correct its request.
    """
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise invalid("arguments of %s: want a JSON object, got %s" % (kind, json.dumps(args)))
    if version == V2 and "quantity" in args and "count" in takes:
        raise Refused(
            failed(
                400,
                "field_renamed",
                "argument quantity is called count in API v2",
                {"renamed": {"quantity": "count"}},
            )
        )
    unknown = sorted(set(args) - set(takes))
    if unknown:
        raise invalid(
            "%s takes no argument %s (it takes %s)" % (kind, ", ".join(unknown), ", ".join(takes)),
            {"unknown": unknown},
        )
    return args


# --------------------------------------------------------------------------
# The world: state and ledger in one SQLite database.
# --------------------------------------------------------------------------

SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    seq      INTEGER PRIMARY KEY,  -- 1, 2, 3, ... in arrival order
    key      TEXT NOT NULL,        -- the harness's idempotency key ('' for a world event)
    kind     TEXT NOT NULL,
    args     TEXT NOT NULL,        -- JSON, as received
    outcome  TEXT NOT NULL,        -- JSON, as answered
    at       TEXT NOT NULL,        -- the run's virtual time (RFC 3339)
    resource TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS ledger_by_key ON ledger (key, seq);
CREATE TABLE IF NOT EXISTS items (
    n INTEGER PRIMARY KEY, id TEXT NOT NULL, sku TEXT NOT NULL, name TEXT NOT NULL,
    quantity INTEGER NOT NULL, key TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS reservations (
    n INTEGER PRIMARY KEY, id TEXT NOT NULL, order_id TEXT NOT NULL, sku TEXT NOT NULL,
    quantity INTEGER NOT NULL, key TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def compact(value):
    return json.dumps(value, separators=(",", ":"))


def locked(method):
    """Runs a World method under the world's lock.

    The HTTP server answers each connection in its own thread, and a World
    has one SQLite connection: reads take the lock too, so that none sees
    another thread's transaction half-done. (It is re-entrant: apply reads
    the API version under it.)
    """

    @functools.wraps(method)
    def under_lock(self, *args, **kwargs):
        with self.lock:
            return method(self, *args, **kwargs)

    return under_lock


class World:
    """One world: the real one, or an isolated instance.

    Everything -- the ledger and the state -- lives in one SQLite database
    (a file for the real world, `:memory:` for an instance), so one
    transaction records a request and makes its change. Nothing is cached in
    Python: every read goes to the database, so what is answered is always
    what is durable. One call at a time (@locked).
    """

    def __init__(self, path):
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, so it is
        # plain to see what one transaction holds.
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # FULL: COMMIT returns only after the data is fsynced.
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        self.lock = threading.RLock()

    @locked
    def close(self):
        self.db.close()

    # -- reads ------------------------------------------------------------

    @locked
    def api_version(self):
        row = self.db.execute("SELECT value FROM meta WHERE name='api_version'").fetchone()
        return row[0] if row else VERSIONS[0]

    def stock(self, sku):
        """(records, stocked, reserved) of a sku; records oldest first."""
        records = self.db.execute(
            "SELECT id, name, quantity, key FROM items WHERE sku=? ORDER BY n", (sku,)
        ).fetchall()
        stocked = sum(r[2] for r in records)
        reserved = self.db.execute(
            "SELECT COALESCE(SUM(quantity), 0) FROM reservations WHERE sku=?", (sku,)
        ).fetchone()[0]
        return records, stocked, reserved

    @locked
    def last_seq(self):
        return self.db.execute("SELECT COALESCE(MAX(seq), 0) FROM ledger").fetchone()[0]

    def count(self, table):
        return self.db.execute("SELECT COUNT(*) FROM %s" % table).fetchone()[0]

    # -- the one write path ------------------------------------------------

    def commit(self, statements):
        """Runs statements in one transaction: all of them durable, or none."""
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for sql, params in statements:
                cur.execute(sql, params)
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return cur.lastrowid

    def record(self, key, kind, args, outcome, now, resource, changes):
        """Makes a request durable: its changes and its ledger entry at once.

        Returns the entry's seq. The ledger INSERT comes last, so the
        cursor's lastrowid is its seq.
        """
        entry = (
            "INSERT INTO ledger (key, kind, args, outcome, at, resource) VALUES (?, ?, ?, ?, ?, ?)",
            (key, kind, compact(args), compact(outcome), now, resource),
        )
        return self.commit(changes + [entry])

    @locked
    def apply(self, key, kind, args, now):
        """Applies one effect request: returns (seq, outcome), durable."""
        try:
            outcome, resource, changes = self.work_out(key, kind, args, now)
        except Refused as r:
            outcome, resource, changes = r.outcome, "", []
        seq = self.record(key, kind, args, outcome, now, resource, changes)
        return seq, outcome

    def work_out(self, key, kind, args, now):
        """What a request does: (outcome, resource id, SQL changes).

        It reads the state but changes nothing; apply commits the changes
        with the ledger entry. A refusal is raised as Refused.
        """
        version = self.api_version()
        q = quantity_arg(version)
        if kind == KIND_ADD_ITEM:
            a = decode_args(version, kind, args, ["sku", "name", q])
            sku, name, quantity = check_label(a, "sku"), check_text(a, "name"), check_quantity(a, q)
            n = self.count("items") + 1
            item_id = "item-%d" % n
            change = (
                "INSERT INTO items (n, id, sku, name, quantity, key, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (n, item_id, sku, name, quantity, key, now),
            )
            result = {"id": item_id, "sku": sku, "name": name, "quantity": quantity}
            return done(result), item_id, [change]
        if kind == KIND_RESERVE:
            a = decode_args(version, kind, args, ["sku", q, "order"])
            sku, quantity, order = check_label(a, "sku"), check_quantity(a, q), check_label(a, "order")
            records, stocked, reserved = self.stock(sku)
            if not records:
                raise Refused(failed(404, "not_found", "sku %s is not stocked" % sku))
            available = stocked - reserved
            if quantity > available:
                raise Refused(
                    failed(
                        409,
                        "insufficient_stock",
                        "order %s wants %d of %s; %d available" % (order, quantity, sku, available),
                        {"sku": sku, "requested": quantity, "available": available},
                    )
                )
            n = self.count("reservations") + 1
            res_id = "res-%d" % n
            change = (
                "INSERT INTO reservations (n, id, order_id, sku, quantity, key, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (n, res_id, order, sku, quantity, key, now),
            )
            result = {"id": res_id, "order": order, "sku": sku, "quantity": quantity,
                      "available": available - quantity}
            return done(result), res_id, [change]
        if kind == KIND_GET_ITEM:
            a = decode_args(version, kind, args, ["sku"])
            sku = check_label(a, "sku")
            records, stocked, reserved = self.stock(sku)
            if not records:
                raise Refused(failed(404, "not_found", "sku %s is not stocked" % sku))
            result = {"sku": sku, "name": records[0][1], "quantity": stocked, "reserved": reserved,
                      "available": stocked - reserved, "ids": [r[0] for r in records]}
            return done(result), "", []
        offered = ", ".join(k["name"] for k in kinds(version))
        raise Refused(
            failed(400, "unknown_kind", "the inventory world has no effect %s in API %s (it offers %s)"
                   % (json.dumps(kind), version, offered))
        )

    @locked
    def set_version(self, version, now):
        """Switches the API version: a world event in the ledger, durable.

        Switching to the current version changes and records nothing, so the
        harness may safely repeat a switch after a crash.
        """
        if version not in VERSIONS:
            raise CallError(400, "unknown_version",
                            "API version %s: this world serves %s" % (json.dumps(version), ", ".join(VERSIONS)))
        previous = self.api_version()
        if version != previous:
            change = ("INSERT OR REPLACE INTO meta (name, value) VALUES ('api_version', ?)", (version,))
            outcome = done({"previous": previous, "version": version})
            self.record("", EVENT_API_VERSION, {"version": version}, outcome, now, "", [change])
        return {"previous": previous, "version": version}

    # -- what the harness reads -------------------------------------------

    @locked
    def lookup(self, key):
        """The outcome of the last request received with key, or None."""
        row = self.db.execute(
            "SELECT outcome FROM ledger WHERE key=? ORDER BY seq DESC LIMIT 1", (key,)
        ).fetchone()
        return json.loads(row[0]) if row else None

    @locked
    def ledger(self):
        entries = []
        for seq, key, kind, args, outcome, at, resource in self.db.execute(
            "SELECT seq, key, kind, args, outcome, at, resource FROM ledger ORDER BY seq"
        ):
            entry = {"seq": seq, "key": key, "kind": kind, "args": json.loads(args),
                     "outcome": json.loads(outcome), "at": at}
            if resource:
                entry["resource"] = resource
            entries.append(entry)
        return entries

    @locked
    def state(self):
        """The whole state, for a person, for fingerprinting, for a goal's probe."""
        items = [
            {"id": i, "sku": s, "name": nm, "quantity": q, "key": k, "created_at": c}
            for i, s, nm, q, k, c in self.db.execute(
                "SELECT id, sku, name, quantity, key, created_at FROM items ORDER BY n")
        ]
        reservations = [
            {"id": i, "order": o, "sku": s, "quantity": q, "key": k, "created_at": c}
            for i, o, s, q, k, c in self.db.execute(
                "SELECT id, order_id, sku, quantity, key, created_at FROM reservations ORDER BY n")
        ]
        stock = {}
        for item in items:
            s = stock.setdefault(item["sku"], {"quantity": 0, "reserved": 0})
            s["quantity"] += item["quantity"]
        for r in reservations:
            stock[r["sku"]]["reserved"] += r["quantity"]
        for s in stock.values():
            s["available"] = s["quantity"] - s["reserved"]
        return {"api_version": self.api_version(), "items": items,
                "reservations": reservations, "stock": stock}

    @locked
    def duplicates(self):
        """Logical things created more than once: items per sku, reservations per order."""
        out = []
        for kind, table, name_col in (("item", "items", "sku"), ("reservation", "reservations", "order_id")):
            groups = {}
            for rid, name, key in self.db.execute(
                "SELECT id, %s, key FROM %s ORDER BY n" % (name_col, table)
            ):
                groups.setdefault(name, []).append((rid, key))
            for name, rows in groups.items():
                if len(rows) > 1:
                    out.append({"kind": kind, "name": name, "ids": [r[0] for r in rows],
                                "keys": [r[1] for r in rows], "count": len(rows)})
        return out

    @locked
    def goal(self, task):
        """Judges a task from the state: (ok, detail).

        The task, as a scenario gives it to the agent:
            {"items": [{"sku": "A-1", "quantity": 10}, ...],
             "reservations": ["order-7", {"order": "order-8", "sku": "B-2", "quantity": 2}, ...]}
        Each item must be stocked with exactly `quantity` units in all (a
        duplicate add overstocks it); each order must be reserved exactly
        once (and, when given, for that sku and quantity).
        """
        items, reservations = parse_goal(task)
        problems, facts = [], []
        for want in items:
            records, stocked, reserved = self.stock(want["sku"])
            if not records:
                problems.append("%s is not stocked" % want["sku"])
            elif want.get("quantity") is not None and stocked != want["quantity"]:
                problems.append("%s has %d stocked in %d record(s), want %d"
                                % (want["sku"], stocked, len(records), want["quantity"]))
            else:
                facts.append("%s: %d stocked (%d reserved, %d available)"
                              % (want["sku"], stocked, reserved, stocked - reserved))
        for want in reservations:
            rows = self.db.execute(
                "SELECT id, sku, quantity FROM reservations WHERE order_id=? ORDER BY n", (want["order"],)
            ).fetchall()
            if not rows:
                problems.append("order %s has no reservation" % want["order"])
            elif len(rows) > 1:
                problems.append("order %s is reserved %d times (%s)"
                                % (want["order"], len(rows), ", ".join(r[0] for r in rows)))
            elif want.get("sku") is not None and rows[0][1] != want["sku"]:
                problems.append("order %s reserves %s, want %s" % (want["order"], rows[0][1], want["sku"]))
            elif want.get("quantity") is not None and rows[0][2] != want["quantity"]:
                problems.append("order %s reserves %d of %s, want %d"
                                % (want["order"], rows[0][2], rows[0][1], want["quantity"]))
            else:
                facts.append("order %s: %d of %s (%s)" % (want["order"], rows[0][2], rows[0][1], rows[0][0]))
        if problems:
            return False, "; ".join(problems)
        return True, "; ".join(facts)


def parse_goal(task):
    """Checks a goal task's shape; a CallError names the field that is wrong."""
    if not isinstance(task, dict):
        raise bad_request("task: want an object {items, reservations}, got %s" % compact(task))
    items, reservations = task.get("items") or [], task.get("reservations") or []
    if not isinstance(items, list) or not isinstance(reservations, list):
        raise bad_request("task: items and reservations must be lists")
    if not items and not reservations:
        raise bad_request("task: names no items and no reservations; there is nothing to judge")
    out_items = []
    for i, item in enumerate(items):
        where = "task.items[%d]" % i
        if not isinstance(item, dict) or not isinstance(item.get("sku"), str) or not item["sku"]:
            raise bad_request("%s.sku: want a non-empty string" % where)
        q = item.get("quantity")
        if q is not None and (isinstance(q, bool) or not isinstance(q, int) or q < 0):
            raise bad_request("%s.quantity: want an integer >= 0" % where)
        out_items.append({"sku": item["sku"], "quantity": q})
    out_res = []
    for i, r in enumerate(reservations):
        where = "task.reservations[%d]" % i
        if isinstance(r, str):
            r = {"order": r}
        if not isinstance(r, dict) or not isinstance(r.get("order"), str) or not r["order"]:
            raise bad_request("%s: want an order id, or an object with a non-empty string order" % where)
        q = r.get("quantity")
        if q is not None and (isinstance(q, bool) or not isinstance(q, int)):
            raise bad_request("%s.quantity: want an integer" % where)
        out_res.append({"order": r["order"], "sku": r.get("sku"), "quantity": q})
    return out_items, out_res


# --------------------------------------------------------------------------
# Instances: the real world ("") and isolated copies for shadows.
# --------------------------------------------------------------------------


def same_outcome(a, b):
    """Whether two outcomes say the same (absent and null fields are alike)."""

    def norm(o):
        return {k: v for k, v in (o or {}).items() if v is not None}

    return norm(a) == norm(b)


class Worlds:
    """The real world and its instances, by name ("" is the real one)."""

    def __init__(self, real):
        self.real = real
        self.instances = {}
        self.lock = threading.Lock()

    def get(self, name):
        if name == "":
            return self.real
        with self.lock:
            world = self.instances.get(name)
        if world is None:
            raise CallError(404, "unknown_instance", "no instance %s (create it with create_instance)" % json.dumps(name))
        return world

    def create(self, name, ledger):
        """A new in-memory instance, restored by replaying ledger in order."""
        if name == "":
            raise bad_request("instance: want the new instance's name; \"\" is the real world, which exists")
        with self.lock:  # held throughout, so two creates of one name cannot race
            if name in self.instances:
                raise CallError(409, "instance_exists", "instance %s exists (drop it first)" % json.dumps(name))
            world = World(":memory:")
            try:
                for i, entry in enumerate(ledger):
                    replay(world, i, entry)
            except BaseException:
                world.close()  # a failed restore leaves no instance behind
                raise
            self.instances[name] = world
            return {"instance": name, "seq": world.last_seq()}

    def drop(self, name):
        if name == "":
            raise bad_request("instance: the real world (\"\") cannot be dropped")
        with self.lock:
            world = self.instances.pop(name, None)
        if world is None:
            raise CallError(404, "unknown_instance", "no instance %s" % json.dumps(name))
        world.close()
        return {}

    def close(self):
        with self.lock:
            for world in self.instances.values():
                world.close()
            self.instances.clear()
        self.real.close()


def replay(world, i, entry):
    """Applies ledger entry i to world and checks it answers as recorded."""
    where = "ledger[%d]" % i
    if not isinstance(entry, dict):
        raise bad_request("%s: want an object, got %s" % (where, compact(entry)))
    key, kind, now = entry.get("key", ""), entry.get("kind"), entry.get("at") or ZERO_TIME
    if not isinstance(key, str):
        raise bad_request("%s.key: want a string" % where)
    if not isinstance(kind, str) or not kind:
        raise bad_request("%s.kind: want a non-empty string" % where)
    if not isinstance(now, str):
        raise bad_request("%s.at: want an RFC 3339 time" % where)
    recorded = entry.get("outcome")
    if not isinstance(recorded, dict):
        raise bad_request("%s.outcome: want an object" % where)
    if key == "" and kind == EVENT_API_VERSION:
        args = entry.get("args") or {}
        version = args.get("version") if isinstance(args, dict) else None
        answer = done(world.set_version(version, now))
    elif key == "" and kind.startswith("world."):
        raise bad_request("%s: unknown world event %s" % (where, kind))
    else:
        _, answer = world.apply(key, kind, entry.get("args"), now)
    if not same_outcome(answer, recorded):
        raise CallError(409, "replay_differs",
                        "%s (seq %s, %s, key %s) was answered %s, but replays as %s"
                        % (where, entry.get("seq"), kind, json.dumps(key), compact(recorded), compact(answer)))


# --------------------------------------------------------------------------
# HTTP: every call is a POST of a JSON object to /v1/<call>.
# --------------------------------------------------------------------------

MAX_BODY = 64 << 20
TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")


def string_field(body, name, required=False):
    value = body.get(name, "")
    if not isinstance(value, str):
        raise bad_request("%s: want a string, got %s" % (name, compact(value)))
    if required and not value:
        raise bad_request("%s: required, a non-empty string" % name)
    return value


def time_field(body, name):
    value = body.get(name)
    if value is None:
        return ZERO_TIME
    if not isinstance(value, str) or not TIME_RE.match(value):
        raise bad_request("%s: want an RFC 3339 time, got %s" % (name, compact(value)))
    return value


def call_apply(worlds, body):
    world = worlds.get(string_field(body, "instance"))
    key = string_field(body, "key", required=True)
    kind = string_field(body, "kind", required=True)
    seq, outcome = world.apply(key, kind, body.get("args"), time_field(body, "now"))
    return {"outcome": outcome, "seq": seq}


def call_lookup(worlds, body):
    world = worlds.get(string_field(body, "instance"))
    key = string_field(body, "key")
    # The key "" is a world event's: nothing an agent sent, never found.
    outcome = world.lookup(key) if key else None
    return {"found": True, "outcome": outcome} if outcome is not None else {"found": False}


def call_goal(worlds, body):
    world = worlds.get(string_field(body, "instance"))
    if "task" not in body:
        raise bad_request("task: required, the scenario's task")
    ok, detail = world.goal(body["task"])
    return {"ok": ok, "detail": detail}


def call_set_version(worlds, body):
    world = worlds.get(string_field(body, "instance"))
    return world.set_version(string_field(body, "version", required=True), time_field(body, "now"))


def call_create_instance(worlds, body):
    name = string_field(body, "instance")
    ledger = body.get("ledger") or []
    if not isinstance(ledger, list):
        raise bad_request("ledger: want a list of ledger entries")
    return worlds.create(name, ledger)


def call_ledger(worlds, body):
    return {"entries": worlds.get(string_field(body, "instance")).ledger()}


def call_state(worlds, body):
    world = worlds.get(string_field(body, "instance"))
    return {"state": world.state(), "api_version": world.api_version()}


def call_duplicates(worlds, body):
    return {"duplicates": worlds.get(string_field(body, "instance")).duplicates()}


def call_drop_instance(worlds, body):
    return worlds.drop(string_field(body, "instance"))


CALLS = {
    "/v1/describe": lambda worlds, body: describe(),
    "/v1/apply": call_apply,
    "/v1/lookup": call_lookup,
    "/v1/ledger": call_ledger,
    "/v1/state": call_state,
    "/v1/goal": call_goal,
    "/v1/duplicates": call_duplicates,
    "/v1/set_version": call_set_version,
    "/v1/create_instance": call_create_instance,
    "/v1/drop_instance": call_drop_instance,
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the harness reuses its connections
    # TCP_NODELAY: the headers and the body are two writes; with Nagle's
    # algorithm the body waits for the client's delayed ACK (40 ms a call).
    disable_nagle_algorithm = True
    server_version = "inventory-world"
    worlds = None  # set in main
    verbose = False

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/v1/describe":
            self.answer(200, describe())
        elif path in CALLS:
            self.answer(405, {"error": {"code": "method_not_allowed", "message": "GET %s: use POST" % path}},
                        {"Allow": "POST"})
        else:
            self.not_found(path)

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        call = CALLS.get(path)
        try:
            body = self.read_body()  # read it always: the connection is reused
            if call is None:
                self.not_found(path)
                return
            self.answer(200, call(self.worlds, body))
        except CallError as e:
            if call is None:
                self.not_found(path)
                return
            self.answer(e.status, {"error": {"code": e.code, "message": e.message}})
        except Exception as e:  # a bug, or the disk failed: never a silent success
            traceback.print_exc(file=sys.stderr)
            self.answer(500, {"error": {"code": "internal", "message": "%s: %s" % (path, e)}})

    def read_body(self):
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise bad_request("Content-Length is not a number")
        if length > MAX_BODY:
            raise CallError(413, "bad_request", "body is %d bytes; at most %d" % (length, MAX_BODY))
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except ValueError as e:
            raise bad_request("body: not valid JSON (%s)" % e)
        if not isinstance(body, dict):
            raise bad_request("body: want a JSON object, got %s" % type(body).__name__)
        return body

    def not_found(self, path):
        self.answer(404, {"error": {"code": "not_found",
                                    "message": "no call %s in %s (calls: %s)" % (path, PROTOCOL, ", ".join(CALLS))}})

    def answer(self, status, value, headers=None):
        data = (compact(value) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, v in (headers or {}).items():
            self.send_header(name, v)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        if self.verbose:
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def main(argv):
    parser = argparse.ArgumentParser(description="The inventory world: an example overnight world.")
    parser.add_argument("--addr", default=os.environ.get("OVERNIGHT_WORLD_ADDR") or "127.0.0.1:8088",
                        help="host:port to listen on (default $OVERNIGHT_WORLD_ADDR, else 127.0.0.1:8088; port 0 picks one)")
    parser.add_argument("--data", default=os.environ.get("OVERNIGHT_WORLD_DATA") or "",
                        help="directory of the durable state (default $OVERNIGHT_WORLD_DATA; without one, in memory)")
    parser.add_argument("--verbose", action="store_true", help="log every request on stderr")
    opts = parser.parse_args(argv)

    host, sep, port = opts.addr.rpartition(":")
    if not sep or not port.isdigit():
        parser.error("--addr %s: want host:port, e.g. 127.0.0.1:8088" % opts.addr)
    host = host.strip("[]") or "127.0.0.1"

    if opts.data:
        os.makedirs(opts.data, exist_ok=True)
        real = World(os.path.join(opts.data, "inventory.db"))
    else:
        print("inventory: no data directory ($OVERNIGHT_WORLD_DATA or --data): the world is kept "
              "in memory and lost when this process ends", file=sys.stderr, flush=True)
        real = World(":memory:")
    worlds = Worlds(real)

    Handler.worlds = worlds
    Handler.verbose = opts.verbose
    server_class = ThreadingHTTPServer
    if ":" in host:  # an IPv6 address, such as [::1]:8088
        server_class = type("Server6", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
    try:
        server = server_class((host, int(port)), Handler)
    except OSError as e:
        print("inventory: listen on %s: %s" % (opts.addr, e), file=sys.stderr)
        return 1
    server.daemon_threads = True
    bound_host, bound_port = server.server_address[:2]
    if ":" in bound_host:
        bound_host = "[%s]" % bound_host
    # The one line on stdout: the harness (and the tests) wait for it.
    print("serving world %s on http://%s:%d" % (NAME, bound_host, bound_port), flush=True)

    # SIGTERM ends the process like Ctrl-C. Every answered request is already
    # durable, so stopping at any instant (even SIGKILL) loses nothing.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        worlds.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

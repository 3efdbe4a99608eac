#!/usr/bin/env python3
"""The five-step deployment of the `deploy` scenarios, written in Python
with the standard library only (and overnight.py beside it): an example of
an agent in another language, the counterpart of the Go deployer.

It resumes from its last checkpoint, sends every effect under a key derived
from the checkpointed step (so a restart repeats nothing), checkpoints after
each step with expect_seq, asks the run's model for its plan through the
gateway's OpenAI-compatible endpoint (and follows a built-in plan when the
run has no model), corrects a request the world refuses from the error's
details (an API version change), waits out transient failures in the run's
virtual time and a 429 from the model for its Retry-After, and reports done.

Run it with python3 -u (or PYTHONUNBUFFERED=1): a killed attempt's last
lines then reach `overnight logs`.
"""

import json
import sys

from overnight import Client, Fenced, ModelError

STEPS = ["create_network", "create_database", "run_migration", "deploy_service", "set_dns"]

TOOLS = [
    {"type": "function", "function": {"name": name, "description": "Step %d of the deployment." % (i + 1),
                                      "parameters": {"type": "object", "properties": props, "required": list(props)}}}
    for i, (name, props) in enumerate([
        ("create_network", {"name": {"type": "string"}}),
        ("create_database", {"name": {"type": "string"}}),
        ("run_migration", {"version": {"type": "integer"}}),
        ("deploy_service", {"name": {"type": "string"}, "image": {"type": "string"}}),
        ("set_dns", {"host": {"type": "string"}}),
    ])
]


def builtin_plan(task):
    return [
        {"tool": "create_network", "args": {"name": task["network"]}},
        {"tool": "create_database", "args": {"name": task["database"]}},
        {"tool": "run_migration", "args": {"version": task["migration"]}},
        {"tool": "deploy_service", "args": {"name": task["service"]["name"], "image": task["service"]["image"]}},
        {"tool": "set_dns", "args": {"host": task["dns"]}},
    ]


def ask_plan(c, task):
    """The model's plan as five tool calls; the built-in plan without a model."""
    brief = json.dumps({"task": task})
    messages = [
        {"role": "system", "content": "You are a deployment agent. Plan the deployment described by the task as tool calls, one per step, in the order they must run."},
        {"role": "user", "content": brief},
    ]
    for _ in range(5):
        try:
            resp = c.chat({"model": "any", "messages": messages, "tools": TOOLS})
        except ModelError as e:
            if e.status == 501:  # the run serves no model
                c.event("progress", "no model: following the built-in plan")
                return builtin_plan(task)
            raise
        choice = resp["choices"][0]
        calls = choice["message"].get("tool_calls") or []
        if choice.get("finish_reason") == "length" or not calls:
            messages.append({"role": "user", "content": "Your answer was cut short or had no tool call. Answer again with the tool calls only. " + brief})
            continue
        plan, answers, broken = [], [], False
        for call in calls:
            try:
                args = json.loads(call["function"]["arguments"])
                plan.append({"tool": call["function"]["name"], "args": args})
                answers.append({"role": "tool", "tool_call_id": call["id"], "content": "not run yet"})
            except ValueError as e:
                broken = True
                answers.append({"role": "tool", "tool_call_id": call["id"], "content": "invalid JSON arguments: %s" % e})
        if not broken and [s["tool"] for s in plan] == STEPS:
            return plan
        # A malformed call: answer the model with the error, and ask again.
        messages.append(dict(choice["message"], role="assistant"))
        messages.extend(answers)
        messages.append({"role": "user", "content": "Some tool calls were malformed or out of order (see above). Call all five tools again, in order. " + brief})
    raise RuntimeError("the model gave no usable plan after 5 tries")


def apply(api, kind, args):
    """What the agent learned of the world's API, applied to a request."""
    kind = api.get("replaced", {}).get(kind, kind)
    args = {api.get("renamed", {}).get(k, k): v for k, v in args.items()}
    args.update(api.get("extra", {}).get(kind, {}))
    if api.get("key"):
        args[api["key_field"]] = api["key"]
    return kind, args


def act(c, api, kind, args):
    """Sends an effect until it is done: waits out transient failures (in
    virtual time), corrects refusals from the error's details."""
    wait = 30
    for _ in range(20):
        k, a = apply(api, kind, args)
        res = c.effect(k, a)
        if res["status"] == "done":
            return res["result"]
        err = res.get("error") or {}
        c.event("error", "%s: %s (%s)" % (k, err.get("message"), err.get("code")), err)
        if err.get("transient"):
            c.sleep(wait)
            wait = min(2 * wait, 3600)
            continue
        d = err.get("details") or {}
        code = err.get("code")
        if code == "field_renamed" and d.get("renamed"):
            api.setdefault("renamed", {}).update(d["renamed"])
        elif code == "missing_field" and d.get("example"):
            api.setdefault("extra", {}).setdefault(k, {}).update(d["example"])
        elif code == "gone" and d.get("replacement"):
            api.setdefault("replaced", {})[kind] = d["replacement"]
        elif code == "unauthorized" and d.get("obtain") and d.get("field"):
            got = c.effect(d["obtain"], {})
            if got["status"] != "done":
                raise RuntimeError("obtain credentials with %s: %s" % (d["obtain"], got.get("error")))
            api["key"], api["key_field"] = got["result"][d["field"]], d["field"]
        else:
            raise RuntimeError("%s refused: %s (%s)" % (k, err.get("message"), code))
        c.event("adapt", "%s: adapted to %s" % (k, code), api)
    raise RuntimeError("%s: still not done after 20 tries" % kind)


def main():
    c = Client()
    info = c.run()
    task = info["task"]
    cp = c.resume()
    state = cp.get("state") or {}
    step = cp.get("step", 0)
    print("attempt %d: starting after step %d of 5" % (info["attempt"], step))
    if step:
        c.event("progress", "resumed after step %d" % step)
    api = state.setdefault("api", {})
    if not state.get("plan"):
        state["plan"] = ask_plan(c, task)
    plan = state["plan"]
    while step < 5:
        nxt = step + 1
        a = plan[step]["args"]
        if nxt == 1:
            state["network_id"] = act(c, api, "cloud.create_network", {"name": a["name"]})["id"]
        elif nxt == 2:
            state["database_id"] = act(c, api, "cloud.create_database", {"name": a["name"], "network_id": state["network_id"]})["id"]
        elif nxt == 3:
            act(c, api, "cloud.run_migration", {"database_id": state["database_id"], "version": a["version"]})
            state["migrated"] = a["version"]
        elif nxt == 4:
            state["endpoint"] = act(c, api, "cloud.deploy_service", {"name": a["name"], "image": a["image"], "database_id": state["database_id"]})["endpoint"]
        else:
            act(c, api, "cloud.set_dns", {"host": a["host"], "target": state["endpoint"]})
            state["dns"] = a["host"]
        c.checkpoint(nxt, state)
        print("step %d done" % nxt)
        step = nxt
    c.done("success", "deployed %s behind %s" % (task["service"]["name"], task["dns"]),
           {"dns": task["dns"], "endpoint": state["endpoint"], "database_id": state["database_id"]})
    print("deployment complete")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Fenced:
        print("fenced: a newer attempt owns the run", file=sys.stderr)
        sys.exit(3)

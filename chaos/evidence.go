package chaos

import (
	"fmt"
	"strings"
	"time"
)

// Paths a lasting fault can act on when the path holds one state at a time.
// Faults on one path stack: the most severe active one acts (Kind.Severity;
// the newest among equals), the one it covers acts again when it heals, and
// each is credited only with what hit the agent while it was acting.
const (
	PathLink   = "link"   // the agent's link to the gateway (Network's Drop, Blackhole, SetLatency)
	PathEffect = "effect" // the effect path (World.SetEffectToxic)
	PathLLM    = "llm"    // the LLM path (LLM.SetLLMToxic)
)

// MetBy says what shows that the agent really met a fault of a kind: a
// fault that fired but that the agent never met tested nothing, and the
// harness's faults-fired invariant makes such a run unknown. The harness
// gathers the evidence each rule names (see Evidence) and asks the rule.
type MetBy int

// The rules.
const (
	// MetWhenInjected: the Target says so as it acts (a live container was
	// killed, frozen or detached; the harness died; the clock jumped).
	MetWhenInjected MetBy = iota
	// MetByLink: while it acted, the agent's connections or responses were
	// hit, or an attempt was alive and cut off for the whole outage.
	MetByLink
	// MetByLaterEffect: an effect was sent after it fired (an API change
	// that no request ever met changed nothing for the agent). Fired at
	// effect:N:before, the N-th effect itself is the first: the world had
	// not seen it yet (see Evidence.Phase).
	MetByLaterEffect
	// MetByEffectHit: its toxic hit an effect while it was active.
	MetByEffectHit
	// MetByLLMFollowUp: it hit an LLM call and the agent followed up as a
	// correct client would (see LLMWait.FollowedUp).
	MetByLLMFollowUp
	// MetByLaterCallOfTool: the tool it changed (mcp-tool-gone,
	// mcp-schema) was called while the change held — refused (gone, or in
	// the old shape) or run (in the new shape). A call of another tool
	// never met the change. See ToolWindow and ToolCalls.
	MetByLaterCallOfTool
)

var metByNames = []string{"injected", "link", "later-effect", "effect-hit", "llm-follow-up", "later-call-of-tool"}

// String names the rule as `overnight faults --output json` shows it.
func (m MetBy) String() string {
	if int(m) < len(metByNames) {
		return metByNames[m]
	}
	return fmt.Sprintf("MetBy(%d)", int(m))
}

// MarshalText implements encoding.TextMarshaler.
func (m MetBy) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// Evidence is what the harness saw of one fault that bears on whether the
// agent met it. The harness journals it with the fault's record, so a run
// resumed after the harness died judges its faults exactly as the
// uninterrupted run would.
type Evidence struct {
	// IntentsAtFire is how many effect intents were journaled when it
	// fired (MetByLaterEffect counts the ones after).
	IntentsAtFire int `json:"intents_at_fire"`
	// Phase is where an effect:N trigger fired it (PhaseBefore, PhaseMid
	// or PhaseAfter); empty for any other trigger. At PhaseBefore the N-th
	// effect's intent is journaled (counted in IntentsAtFire) but the world
	// has not seen it: that effect is the first to meet the fault. At
	// PhaseMid and PhaseAfter the world executed it before the fault acted.
	Phase Phase `json:"phase,omitempty"`
	// Acted is whether it ever acted on its path (a more severe fault may
	// have covered it for its whole duration).
	Acted bool `json:"acted,omitempty"`
	// LinkHits counts the agent's connections and responses it hit while
	// it was the link's acting fault (MetByLink).
	LinkHits int64 `json:"link_hits,omitempty"`
	// LLM is the follow-up an LLM fault still waits for (MetByLLMFollowUp).
	LLM *LLMWait `json:"llm,omitempty"`
	// Spent says a one-shot toxic (a path fault without /DURATION) acted on
	// the call it was waiting for. One that fired but is not spent when the
	// harness dies waits for the next call again after the resume.
	Spent bool `json:"spent,omitempty"`
	// Tool is where the change of a tool held among the run's effects
	// (MetByLaterCallOfTool); nil in a record journaled before that rule
	// existed, which is judged as MetByLaterEffect judged it.
	Tool *ToolWindow `json:"tool,omitempty"`
}

// ToolWindow is where a fault's change of a tool held among the run's
// effects, by their order (history's EffectRecord.Order): from the first
// effect after FromOrder, up to ToOrder once it healed.
type ToolWindow struct {
	// FromOrder is the order of the run's newest effect when it fired.
	// Fired at effect:N:before, effect N is counted in it: that call had
	// passed the tool's check in its old shape.
	FromOrder int64 `json:"from_order"`
	// Healed says the tool is served unchanged again since ToOrder, the
	// order of the newest effect when it healed.
	Healed  bool  `json:"healed,omitempty"`
	ToOrder int64 `json:"to_order,omitempty"`
}

// Holds reports whether the effect of this order was sent while the
// change held. A repeat of a key sent before the change is the older
// effect, and does not count.
func (w ToolWindow) Holds(order int64) bool {
	return order > w.FromOrder && (!w.Healed || order <= w.ToOrder)
}

// ToolCalls are the calls of a changed tool while the change held, as the
// harness counts them from the run's journal.
type ToolCalls struct {
	Tool    string // as the agent sees it: SERVER__TOOL
	Refused int    // refused by the gateway: the tool gone, or the call in its old shape
	Ran     int    // ran as effects: in the new shape
}

// End is what a rule judging a fault at the run's end counts, from the
// run's journal.
type End struct {
	Intents   int       // effect intents journaled in all (MetByLaterEffect)
	ToolCalls ToolCalls // the changed tool's calls (MetByLaterCallOfTool)
}

// Judgement is a rule's answer: whether the agent met the fault, and why.
type Judgement struct {
	Met    bool
	Detail string
}

// Covered is the judgement of a fault on a path that a more severe one
// covered for its whole duration.
var Covered = Judgement{Detail: "a more severe fault on the same target covered it for its whole duration"}

// AtHeal judges a lasting fault as it heals; ok is false when the rule
// decides later (or already decided). alive names the attempt alive at the
// heal (0: none).
func (m MetBy) AtHeal(e Evidence, alive int) (j Judgement, ok bool) {
	if m != MetByLink {
		return Judgement{}, false
	}
	switch {
	case e.LinkHits > 0:
		return Judgement{true, fmt.Sprintf("%d of the agent's connections or responses were hit", e.LinkHits)}, true
	case alive > 0:
		return Judgement{true, fmt.Sprintf("attempt %d was alive and cut off for the whole outage", alive)}, true
	}
	return Judgement{Detail: "no agent was alive during the outage"}, true
}

// AtEnd judges a fault the run ended without deciding, by what the run's
// journal shows at its end.
func (m MetBy) AtEnd(e Evidence, end End) Judgement {
	if m == MetByLaterCallOfTool && e.Tool == nil {
		m = MetByLaterEffect // journaled before the rule: judged as it was
	}
	intents := end.Intents
	switch m {
	case MetByLaterCallOfTool:
		c := end.ToolCalls
		if c.Refused+c.Ran == 0 {
			return Judgement{Detail: fmt.Sprintf("the agent never called %s after it changed (calls of other tools do not meet the change)", c.Tool)}
		}
		var how []string
		if c.Refused > 0 {
			how = append(how, fmt.Sprintf("%d refused", c.Refused))
		}
		if c.Ran > 0 {
			how = append(how, fmt.Sprintf("%d in the new shape", c.Ran))
		}
		return Judgement{true, fmt.Sprintf("the agent called %s %s after it changed (%s)", c.Tool, times(c.Refused+c.Ran), strings.Join(how, ", "))}
	case MetByLaterEffect:
		first := e.IntentsAtFire + 1
		if e.Phase == PhaseBefore {
			first-- // the effect that fired it reached the world after it
		}
		switch n := intents - first + 1; {
		case n == 1:
			return Judgement{true, fmt.Sprintf("effect %d was sent under the new API", first)}
		case n > 1:
			return Judgement{true, fmt.Sprintf("%d effects were sent under the new API, from effect %d on", n, first)}
		}
		return Judgement{Detail: "no effect was sent after the API changed"}
	case MetByEffectHit:
		return Judgement{Detail: "no effect was sent while it was active"}
	case MetByLLMFollowUp:
		return e.LLM.unmet()
	}
	return Judgement{true, "applied"}
}

// times is "once", "twice" or "N times".
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// HitEffect is the judgement of an effect toxic that hit the n-th effect.
func HitEffect(n int) Judgement { return Judgement{true, fmt.Sprintf("hit effect %d", n)} }

// LLMWait is the follow-up that shows an agent met an LLM fault: for a 429,
// a later call at or after Retry-After — in the run's virtual time (After:
// an agent that sleeps through the gateway) or in real time (WallAfter: an
// OpenAI client's own retry, a time.sleep); for a malformed tool call, a
// later request answering that call with a tool message; for a 5xx, a
// timeout or a truncated answer, any later call.
type LLMWait struct {
	Kind  string    `json:"kind"` // the LLMToxic kind that hit
	Call  int       `json:"call"` // the LLM call it hit
	After time.Time `json:"after,omitzero"`
	// WallAfter is when the Retry-After the gateway sent is over in real
	// time, counted from before the 429 left the harness, so a client that
	// waits exactly what the header says calls again at or after it.
	WallAfter time.Time `json:"wall_after,omitzero"`
	// RetryAfterMS is the Retry-After the gateway sent, for the judgement's
	// detail.
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	CallID       string `json:"call_id,omitempty"`
}

// LLMCall is a later LLM call, as the evidence of an earlier LLM fault
// sees it.
type LLMCall struct {
	Virtual time.Time // the run's virtual time when it arrived
	Wall    time.Time // the real time when it arrived
	// Answers reports whether its messages answer the tool call callID
	// with a tool message (nil: they answer none).
	Answers func(callID string) bool
}

// FollowedUp judges a later LLM call c; applied is when the fault fired
// (virtual time). ok is false while the evidence is still to come. After a
// 429, the first later call decides: met when it came after Retry-After in
// virtual or in real time, unmet when it came sooner.
func (w LLMWait) FollowedUp(c LLMCall, applied time.Time) (j Judgement, ok bool) {
	switch w.Kind {
	case LLMRateLimit:
		switch {
		case !c.Virtual.Before(w.After):
			return Judgement{true, fmt.Sprintf("after the 429 on LLM call %d, the agent waited Retry-After (%s of virtual time) and called again", w.Call, w.retryAfter(applied))}, true
		case !w.WallAfter.IsZero() && !c.Wall.Before(w.WallAfter):
			return Judgement{true, fmt.Sprintf("after the 429 on LLM call %d, the agent waited Retry-After (%s of real time) and called again", w.Call, w.retryAfter(applied))}, true
		case !w.WallAfter.IsZero():
			// Real time always passes: were a too-early call left open, any
			// later call would be credited. The first call after the 429
			// decides. (Evidence journaled without a real-time deadline
			// keeps waiting for the virtual one, which only a sleep moves.)
			ra := w.retryAfter(applied)
			waited := c.Wall.Sub(w.WallAfter.Add(-ra)).Truncate(time.Millisecond)
			return Judgement{false, fmt.Sprintf("after the 429 on LLM call %d, the agent called again %s later in real time (and %s in virtual time), before its Retry-After of %s was over", w.Call, max(waited, 0), c.Virtual.Sub(applied), ra)}, true
		}
		return Judgement{}, false
	case LLMMalformed:
		if c.Answers == nil || !c.Answers(w.CallID) {
			return Judgement{}, false
		}
		return Judgement{true, fmt.Sprintf("the agent answered the model with the error of the malformed tool call %s (LLM call %d)", w.CallID, w.Call)}, true
	}
	return Judgement{true, fmt.Sprintf("after LLM call %d (%s), the agent called the model again", w.Call, w.Kind)}, true
}

// retryAfter is the Retry-After the 429 carried (evidence journaled before
// RetryAfterMS existed: as far as the fault's firing).
func (w LLMWait) retryAfter(applied time.Time) time.Duration {
	if w.RetryAfterMS > 0 {
		return time.Duration(w.RetryAfterMS) * time.Millisecond
	}
	return w.After.Sub(applied)
}

func (w *LLMWait) unmet() Judgement {
	switch {
	case w == nil:
		return Judgement{Detail: "no LLM call met it while it was active"}
	case w.Kind == LLMRateLimit:
		return Judgement{Detail: fmt.Sprintf("LLM call %d got the 429, but the agent never called again after waiting Retry-After (in virtual or real time)", w.Call)}
	case w.Kind == LLMMalformed:
		return Judgement{Detail: fmt.Sprintf("LLM call %d's tool call %s was broken, but the agent never answered the model with the error", w.Call, w.CallID)}
	}
	return Judgement{Detail: fmt.Sprintf("LLM call %d was hit (%s), but the agent never called the model again", w.Call, w.Kind)}
}

package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/harness/protocol"
	"github.com/overnight-dev/overnight/scenarios"
)

// prefixLLM keys the run's LLM exchanges: llm/<id>/<seq> -> LLMRecord.
const prefixLLM = "llm/"

// inlineLLMLimit is the largest request or response kept inline in an
// exchange's record; larger ones go to blobs.
const inlineLLMLimit = 64 << 10

// LLMRecord is one LLM exchange, as journaled: what was asked, what came
// back (or which fault answered instead), and what it cost.
type LLMRecord struct {
	Seq          int64               `json:"seq"`
	Attempt      int                 `json:"attempt"`
	Call         int                 `json:"call"`    // the n-th LLM call of the run (the llm:N trigger counts these)
	Ordinal      int                 `json:"ordinal"` // the n-th call of the attempt that reached the model (0: a fault answered)
	RequestHash  string              `json:"request_hash"`
	Request      json.RawMessage     `json:"request,omitempty"` // canonical
	RequestBlob  string              `json:"request_blob,omitempty"`
	Response     json.RawMessage     `json:"response,omitempty"`
	ResponseBlob string              `json:"response_blob,omitempty"`
	Status       int                 `json:"status"` // 200, or the error status answered
	Error        string              `json:"error,omitempty"`
	Code         string              `json:"code,omitempty"`  // the error's code, replayed exactly
	Param        string              `json:"param,omitempty"` // the error's param
	RetryAfterMS int64               `json:"retry_after_ms,omitempty"`
	Fault        string              `json:"fault,omitempty"` // the LLM fault that answered or damaged it
	Provider     string              `json:"provider"`
	Model        string              `json:"model"`
	Usage        *protocol.ChatUsage `json:"usage,omitempty"`
	CostUSD      float64             `json:"cost_usd"`
	Virtual      time.Time           `json:"virtual"`
	WallMicros   int64               `json:"wall_us"`
}

// LLMTotals summarise a run's LLM use in its result.
type LLMTotals struct {
	Provider         string  `json:"provider"`
	Model            string  `json:"model"`
	TestDouble       bool    `json:"test_double"`         // the scripted model: deterministic rules, not a real model
	ReplayOf         string  `json:"replay_of,omitempty"` // the run whose recording answered (provider and model are the recording's)
	Calls            int     `json:"calls"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// llmBudget is the scenario's ceiling on LLM use (zero: none).
type llmBudget struct {
	Calls   int
	Tokens  int
	CostUSD float64
}

// llmState is the LLM side of a live run.
type llmState struct {
	model     llm.Model
	spec      llm.Spec
	prices    llm.Prices
	budget    llmBudget
	totals    LLMTotals
	seq       int64
	calls     int         // every call made, faulted or not
	ordinals  map[int]int // attempt -> calls that reached the model
	replay    map[string]LLMRecord
	replayRun string
	toxic     chaos.LLMToxic
	toxicF    *faultState
	inflight  int             // calls asked of the model and not yet answered
	used      map[string]bool // replay: recorded exchanges already served
	exceeded  string          // why the budget ended the run
	diverged  string          // why a replay could not go on
	limitCh   chan struct{}   // closed when a budget is exceeded or a replay diverges
}

func replayKey(attempt, ordinal int) string { return fmt.Sprintf("%d/%d", attempt, ordinal) }

// LLMModels implements gateway.LLMBackend.
func (r *run) LLMModels(ctx context.Context, c gateway.Caller) (protocol.ModelList, error) {
	if r.llm == nil || r.llm.model == nil {
		return protocol.ModelList{}, noModel(r)
	}
	return protocol.ModelList{Object: "list", Data: []protocol.ModelInfo{{
		ID: r.llm.model.Name(), Object: "model", OwnedBy: r.llm.model.Provider(),
	}}}, nil
}

func noModel(r *run) error {
	return gateway.Errorf(http.StatusNotImplemented, protocol.CodeNotImplemented,
		"run %s has no model: give one with --llm (e.g. --llm openai:gpt-4o-mini) or an llm: block in scenario %s", r.rec.ID, r.rec.Scenario)
}

// LLMChat implements gateway.LLMBackend: settle earlier LLM faults' evidence,
// count the call, fire llm:N faults, reserve the call against the budget,
// apply the LLM path's toxics, ask the model (or the recording), journal the
// exchange durably, then answer.
func (r *run) LLMChat(ctx context.Context, c gateway.Caller, req protocol.ChatRequest) (protocol.ChatResponse, error) {
	dctx := context.WithoutCancel(ctx)
	canon, err := llm.Canonical(req)
	if err != nil {
		return protocol.ChatResponse{}, gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "chat request: %v", err)
	}
	started := time.Now()

	r.mu.Lock()
	if r.llm == nil || r.llm.model == nil {
		r.mu.Unlock()
		return protocol.ChatResponse{}, noModel(r)
	}
	if err := r.acting(c); err != nil {
		r.mu.Unlock()
		return protocol.ChatResponse{}, err
	}
	st := r.llm
	canon = r.scrub(canon)
	r.settleLLMEvidence(dctx, req)
	st.calls++
	call := st.calls
	for _, f := range r.faults {
		if !f.rec.Applied && f.spec.Trigger.Type == chaos.TriggerLLM && f.spec.Trigger.N == call {
			r.fire(dctx, f)
		}
	}
	if err := r.acting(c); err != nil { // a fault may have ended the attempt
		r.mu.Unlock()
		return protocol.ChatResponse{}, err
	}
	if st.budget.Calls > 0 && st.totals.Calls+st.inflight >= st.budget.Calls {
		reason := fmt.Sprintf("LLM budget: %d calls spent (budget %d)", st.budget.Calls, st.budget.Calls)
		r.exceedLocked(reason)
		r.mu.Unlock()
		return protocol.ChatResponse{}, budgetError(reason)
	}
	rec := LLMRecord{Attempt: c.Attempt, Call: call, RequestHash: hashHex(canon), Provider: st.model.Provider(), Model: st.model.Name(), Virtual: r.clock}
	tx, by := st.toxic, st.toxicF
	if tx.Once {
		st.toxic = chaos.LLMToxic{}
		r.reapplyTop("llm")
	}
	var faultErr *gateway.Error
	switch tx.Kind {
	case chaos.LLMRateLimit:
		faultErr = gateway.Errorf(http.StatusTooManyRequests, protocol.CodeRateLimited, "rate limited (llm-429 fault): retry after %s", tx.RetryAfter)
		faultErr.RetryAfter = tx.RetryAfter
	case chaos.LLMServerError:
		faultErr = gateway.Errorf(http.StatusServiceUnavailable, protocol.CodeProviderError, "the model's provider failed (llm-5xx fault)")
	case chaos.LLMTimeout:
		faultErr = gateway.Errorf(http.StatusGatewayTimeout, "timeout", "the model did not answer (llm-timeout fault)")
		faultErr.Hold = gateway.MaxHold
	}
	if faultErr != nil {
		rec.Status, rec.Error, rec.Code, rec.Fault = faultErr.Status, faultErr.Message, faultErr.Code, "llm-"+tx.Kind
		rec.RetryAfterMS = faultErr.RetryAfter.Milliseconds()
		r.awaitLLMEvidence(by, tx.Kind, call, r.clock.Add(tx.RetryAfter), "")
		err := r.saveLLM(dctx, &rec, canon, nil)
		r.mu.Unlock()
		if err != nil {
			return protocol.ChatResponse{}, err
		}
		return protocol.ChatResponse{}, faultErr
	}
	st.ordinals[c.Attempt]++
	rec.Ordinal = st.ordinals[c.Attempt]
	st.inflight++
	model, replaying := st.model, st.replay != nil
	r.mu.Unlock()

	// The model is asked without the run's lock: a real provider may take
	// seconds. The request is still in flight, so the clock holds still.
	var resp protocol.ChatResponse
	var recorded *LLMRecord
	if replaying {
		resp, recorded, err = r.replayAnswer(rec, canon)
	} else {
		resp, err = model.Complete(ctx, req)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	st.inflight--
	rec.WallMicros = time.Since(started).Microseconds()
	// The call's outcome is journaled whatever it is; an attempt that lost
	// the run meanwhile (killed, fenced, the run over) does not get it.
	late := r.acting(c)
	if err == nil && len(resp.Choices) == 0 {
		err = gateway.Errorf(http.StatusBadGateway, protocol.CodeProviderError, "the model answered no choice")
	}
	if err != nil {
		ge := providerError(err)
		rec.Status, rec.Error, rec.Code, rec.Param, rec.RetryAfterMS = ge.Status, ge.Message, ge.Code, ge.Param, ge.RetryAfter.Milliseconds()
		if serr := r.saveLLM(dctx, &rec, canon, nil); serr != nil {
			return protocol.ChatResponse{}, serr
		}
		if ge.Code == protocol.CodeDivergence {
			r.divergeLocked(dctx, ge.Message)
		}
		if late != nil {
			return protocol.ChatResponse{}, late
		}
		return protocol.ChatResponse{}, ge
	}
	// Answers get ids of the run's own, so two honest runs answer alike.
	resp.ID = fmt.Sprintf("chatcmpl-%d-%d", c.Attempt, rec.Ordinal)
	resp.Object = "chat.completion"
	resp.Created = r.clock.Unix()
	// The model's answer is journaled as it came, before a fault damages
	// it: a replay re-applies the fault to the same answer.
	answer, err := json.Marshal(resp)
	if err != nil {
		return protocol.ChatResponse{}, err
	}
	if tx.Kind == chaos.LLMTruncated || tx.Kind == chaos.LLMMalformed {
		resp = cloneResponse(answer) // damage a copy, never the journaled answer
	}
	switch tx.Kind {
	case chaos.LLMTruncated:
		truncate(&resp)
		rec.Fault = "llm-truncated"
		r.awaitLLMEvidence(by, tx.Kind, call, r.clock, "")
	case chaos.LLMMalformed:
		if id, ok := malform(&resp); ok {
			rec.Fault = "llm-malformed-tool-call"
			r.awaitLLMEvidence(by, tx.Kind, call, r.clock, id)
		}
	}
	rec.Status, rec.Usage = http.StatusOK, resp.Usage
	switch {
	case recorded != nil:
		rec.CostUSD = recorded.CostUSD // what it cost when it was recorded
	case resp.Usage != nil:
		rec.CostUSD = llm.Cost(*resp.Usage, st.prices)
	}
	if err := r.saveLLM(dctx, &rec, canon, answer); err != nil {
		return protocol.ChatResponse{}, err
	}
	st.add(rec)
	if reason := st.over(); reason != "" {
		r.exceedLocked(reason)
	}
	if late != nil {
		return protocol.ChatResponse{}, late
	}
	return resp, nil
}

// tokenPattern finds what may be an attempt's token in a request.
var tokenPattern = regexp.MustCompile(`[0-9a-f]{64}`)

// scrub takes the run's id and its attempts' tokens out of a canonical
// request, so that an honest replay asks what the recording asked.
func (r *run) scrub(canon []byte) []byte {
	out := bytes.ReplaceAll(canon, []byte(r.rec.ID), []byte("<run-id>"))
	return tokenPattern.ReplaceAllFunc(out, func(m []byte) []byte {
		if _, ok := r.tokens[hashHex(m)]; ok {
			return []byte("<token>")
		}
		return m
	})
}

// awaitLLMEvidence notes what would show that the agent met an LLM fault:
// for a 429, a later call after Retry-After of virtual time; for a 5xx, a
// timeout or a truncated answer, a later call; for a malformed tool call,
// a later request answering that call with a tool message.
func (r *run) awaitLLMEvidence(f *faultState, kind string, call int, after time.Time, callID string) {
	if f == nil || f.rec.Met || f.llmWait != nil {
		return
	}
	f.llmWait = &llmWait{kind: kind, call: call, after: after, callID: callID}
}

// settleLLMEvidence marks the LLM faults whose evidence this request is.
func (r *run) settleLLMEvidence(ctx context.Context, req protocol.ChatRequest) {
	for _, f := range r.faults {
		w := f.llmWait
		if w == nil || f.rec.Met {
			continue
		}
		switch w.kind {
		case chaos.LLMRateLimit:
			if !r.clock.Before(w.after) {
				f.rec.Met, f.rec.MetDetail = true, fmt.Sprintf("after the 429 on LLM call %d, the agent waited Retry-After (%s of virtual time) and called again", w.call, w.after.Sub(f.rec.AppliedVirtual))
			}
		case chaos.LLMMalformed:
			for _, m := range req.Messages {
				if m.Role == "tool" && m.ToolCallID == w.callID {
					f.rec.Met, f.rec.MetDetail = true, fmt.Sprintf("the agent answered the model with the error of the malformed tool call %s (LLM call %d)", w.callID, w.call)
				}
			}
		default:
			f.rec.Met, f.rec.MetDetail = true, fmt.Sprintf("after LLM call %d (%s), the agent called the model again", w.call, w.kind)
		}
		if f.rec.Met {
			f.llmWait = nil
			r.saveFault(ctx, f)
		}
	}
}

func budgetError(reason string) error {
	return gateway.Errorf(http.StatusTooManyRequests, protocol.CodeBudget, "%s; the run ends", reason)
}

// exceedLocked ends the run for its LLM budget.
func (r *run) exceedLocked(reason string) {
	if r.llm.exceeded != "" {
		return
	}
	r.llm.exceeded = reason
	close(r.llm.limitCh)
	r.h.progress("run %s: %s", r.rec.ID, reason)
}

// divergeLocked ends a replay that can no longer reproduce its recording:
// the run's verdict is unknown, with the first difference as the reason.
func (r *run) divergeLocked(ctx context.Context, why string) {
	st := r.llm
	if st.diverged != "" || st.exceeded != "" {
		return
	}
	st.diverged = why
	_ = r.appendEventLocked(ctx, "harness.divergence", why, nil)
	close(st.limitCh)
	r.h.progress("run %s: %s", r.rec.ID, why)
}

// add counts an answered exchange in the totals.
func (st *llmState) add(rec LLMRecord) {
	if rec.Status != http.StatusOK {
		return
	}
	st.totals.Calls++
	if rec.Usage != nil {
		st.totals.PromptTokens += rec.Usage.PromptTokens
		st.totals.CompletionTokens += rec.Usage.CompletionTokens
	}
	st.totals.CostUSD += rec.CostUSD
}

// over says which budget the totals exceed, if any.
func (st *llmState) over() string {
	b, t := st.budget, st.totals
	switch {
	case b.Calls > 0 && t.Calls > b.Calls:
		return fmt.Sprintf("LLM budget: %d calls spent (budget %d)", t.Calls, b.Calls)
	case b.Tokens > 0 && t.PromptTokens+t.CompletionTokens > b.Tokens:
		return fmt.Sprintf("LLM budget: %d tokens spent (budget %d)", t.PromptTokens+t.CompletionTokens, b.Tokens)
	case b.CostUSD > 0 && t.CostUSD > b.CostUSD:
		return fmt.Sprintf("LLM budget: $%.4f spent (budget $%.4f)", t.CostUSD, b.CostUSD)
	}
	return ""
}

// saveLLM journals an exchange durably (one commit; large bodies as blobs).
func (r *run) saveLLM(ctx context.Context, rec *LLMRecord, canon, answer []byte) error {
	r.llm.seq++
	rec.Seq = r.llm.seq
	if len(canon) > inlineLLMLimit {
		h, err := r.j.PutBlob(ctx, canon)
		if err != nil {
			return fmt.Errorf("store LLM request: %w", err)
		}
		rec.RequestBlob = h
	} else {
		rec.Request = canon
	}
	if answer != nil {
		b := answer
		if len(b) > inlineLLMLimit {
			h, err := r.j.PutBlob(ctx, b)
			if err != nil {
				return fmt.Errorf("store LLM response: %w", err)
			}
			rec.ResponseBlob = h
		} else {
			rec.Response = b
		}
	}
	if err := put(ctx, r.j, seqKey(prefixLLM, r.rec.ID, rec.Seq), rec); err != nil {
		return fmt.Errorf("journal LLM exchange %d: %w", rec.Seq, err)
	}
	return nil
}

func providerError(err error) *gateway.Error {
	var ge *gateway.Error
	if errors.As(err, &ge) {
		return ge
	}
	if errors.Is(err, llm.ErrNoRule) || errors.Is(err, llm.ErrReference) {
		return gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "%v", err)
	}
	var pe *llm.ProviderError
	if errors.As(err, &pe) {
		ge = gateway.Errorf(pe.Status, pe.Code, "%s", pe.Message)
		ge.RetryAfter, ge.Param = pe.RetryAfter, pe.Param
		return ge
	}
	return gateway.Errorf(http.StatusBadGateway, protocol.CodeProviderError, "%v", err)
}

// cloneResponse decodes a deep copy of an answer.
func cloneResponse(b []byte) protocol.ChatResponse {
	var resp protocol.ChatResponse
	_ = json.Unmarshal(b, &resp)
	return resp
}

// truncate cuts an answer short: half its text, no tool calls.
func truncate(resp *protocol.ChatResponse) {
	ch := &resp.Choices[0]
	text := []rune(ch.Message.Content.Text)
	ch.Message.Content = protocol.MessageContent{Text: string(text[:len(text)/2])}
	ch.Message.ToolCalls = nil
	ch.FinishReason = "length"
}

// malform breaks the JSON of the first tool call's arguments and returns
// that call's id; it reports false when the answer has no tool call.
func malform(resp *protocol.ChatResponse) (string, bool) {
	calls := resp.Choices[0].Message.ToolCalls
	if len(calls) == 0 {
		return "", false
	}
	args := calls[0].Function.Arguments
	calls[0].Function.Arguments = strings.TrimSuffix(args, "}") + `,"` // an unterminated object
	return calls[0].ID, true
}

// replayAnswer serves an exchange from the recording — the answer it
// recorded, or its error exactly (status, code, param, Retry-After) — or
// reports how the run diverged from it. Calls of an attempt are matched in
// order; a call that arrives out of order (concurrent calls) is served the
// unused exchange of its attempt with the same request, if there is one.
func (r *run) replayAnswer(rec LLMRecord, canon []byte) (protocol.ChatResponse, *LLMRecord, error) {
	r.mu.Lock()
	st := r.llm
	key := replayKey(rec.Attempt, rec.Ordinal)
	want, ok := st.replay[key]
	if ok && (want.RequestHash != rec.RequestHash || st.used[key]) {
		for k, other := range st.replay {
			if other.Attempt == rec.Attempt && other.RequestHash == rec.RequestHash && !st.used[k] {
				key, want = k, other
				break
			}
		}
	}
	if ok && want.RequestHash == rec.RequestHash {
		st.used[key] = true
	}
	run := st.replayRun
	r.mu.Unlock()
	if !ok {
		return protocol.ChatResponse{}, nil, gateway.Errorf(http.StatusConflict, protocol.CodeDivergence,
			"replay of run %s diverged: it recorded no LLM call %d in attempt %d, and this run asked: %s", run, rec.Ordinal, rec.Attempt, lastMessage(canon))
	}
	if want.RequestHash != rec.RequestHash {
		recorded, err := r.recordedRequest(want)
		if err != nil {
			return protocol.ChatResponse{}, nil, err
		}
		return protocol.ChatResponse{}, nil, gateway.Errorf(http.StatusConflict, protocol.CodeDivergence,
			"replay of run %s diverged at LLM call %d of attempt %d: %s", run, rec.Ordinal, rec.Attempt, firstDifference(recorded, canon))
	}
	if want.Status != http.StatusOK {
		ge := gateway.Errorf(want.Status, want.Code, "%s", want.Error)
		if ge.Code == "" {
			ge.Code = protocol.CodeProviderError
		}
		ge.Param, ge.RetryAfter = want.Param, time.Duration(want.RetryAfterMS)*time.Millisecond
		return protocol.ChatResponse{}, &want, ge
	}
	body := want.Response
	if want.ResponseBlob != "" {
		b, err := r.j.Blob(want.ResponseBlob)
		if err != nil {
			return protocol.ChatResponse{}, nil, fmt.Errorf("read recorded LLM response: %w", err)
		}
		body = b
	}
	var resp protocol.ChatResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return protocol.ChatResponse{}, nil, fmt.Errorf("decode recorded LLM response: %w", err)
	}
	return resp, &want, nil
}

// lastMessage is the last message of a canonical request, for a report.
func lastMessage(canon []byte) string {
	var c struct {
		Messages []json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(canon, &c)
	if len(c.Messages) == 0 {
		return clip(canon)
	}
	return clip(c.Messages[len(c.Messages)-1])
}

func (r *run) recordedRequest(rec LLMRecord) ([]byte, error) {
	if rec.RequestBlob == "" {
		return rec.Request, nil
	}
	b, err := r.j.Blob(rec.RequestBlob)
	if err != nil {
		return nil, fmt.Errorf("read recorded LLM request: %w", err)
	}
	return b, nil
}

// firstDifference names the first place two canonical requests differ.
func firstDifference(recorded, got []byte) string {
	var a, b struct {
		Messages []json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(recorded, &a)
	_ = json.Unmarshal(got, &b)
	for i := 0; i < len(a.Messages) || i < len(b.Messages); i++ {
		switch {
		case i >= len(a.Messages):
			return fmt.Sprintf("message %d is new: %s", i, clip(b.Messages[i]))
		case i >= len(b.Messages):
			return fmt.Sprintf("message %d is missing: recorded %s", i, clip(a.Messages[i]))
		case !bytes.Equal(a.Messages[i], b.Messages[i]):
			return fmt.Sprintf("message %d differs: recorded %s, got %s", i, clip(a.Messages[i]), clip(b.Messages[i]))
		}
	}
	return fmt.Sprintf("the messages agree but the request's other fields differ: recorded %s, got %s", clip(recorded), clip(got))
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// loadLLM rebuilds a run's LLM side from the journal: totals, counters, and
// the model.
func (h *Harness) loadLLM(r *run, spec llm.Spec, model llm.Model, prices llm.Prices, budget llmBudget, replay map[string]LLMRecord, replayRun string) error {
	st := &llmState{model: model, spec: spec, prices: prices, budget: budget, ordinals: map[int]int{},
		replay: replay, replayRun: replayRun, limitCh: make(chan struct{}), used: map[string]bool{}}
	if model != nil {
		st.totals.Provider, st.totals.Model = model.Provider(), model.Name()
		st.totals.TestDouble = model.Provider() == llm.ProviderScripted
	}
	if replay != nil {
		// A replay answers as the recording's model did.
		st.totals.ReplayOf = replayRun
		for _, rec := range replay {
			st.totals.Provider, st.totals.Model = rec.Provider, rec.Model
			st.totals.TestDouble = rec.Provider == llm.ProviderScripted
			break
		}
	}
	recs, err := scan[LLMRecord](h.j, runPrefix(prefixLLM, r.rec.ID))
	if err != nil {
		return fmt.Errorf("read LLM exchanges of run %s: %w", r.rec.ID, err)
	}
	for _, rec := range recs {
		st.seq = max(st.seq, rec.Seq)
		st.calls = max(st.calls, rec.Call)
		if rec.Ordinal > st.ordinals[rec.Attempt] {
			st.ordinals[rec.Attempt] = rec.Ordinal
		}
		st.add(rec)
	}
	if reason := st.over(); reason != "" {
		st.exceeded = reason
		close(st.limitCh)
	}
	r.llm = st
	return nil
}

// recordedExchanges indexes a run's exchanges that reached the model, for
// replay.
func (h *Harness) recordedExchanges(runID string) (map[string]LLMRecord, error) {
	if _, err := h.runRecord(runID); err != nil {
		return nil, err
	}
	recs, err := scan[LLMRecord](h.j, runPrefix(prefixLLM, runID))
	if err != nil {
		return nil, fmt.Errorf("read LLM exchanges of run %s: %w", runID, err)
	}
	out := map[string]LLMRecord{}
	for _, rec := range recs {
		if rec.Ordinal > 0 {
			out[replayKey(rec.Attempt, rec.Ordinal)] = rec
		}
	}
	return out, nil
}

var _ gateway.LLMBackend = (*run)(nil)

// modelChoice is the model a run uses, with its prices, budget and, for a
// replay, the recording.
type modelChoice struct {
	spec      llm.Spec
	model     llm.Model // nil: the run serves no model
	prices    llm.Prices
	budget    llmBudget
	replay    map[string]LLMRecord
	replayRun string
}

// model builds the run's model: the override (--llm) or the scenario's
// llm.model; none when neither names one.
func (h *Harness) model(scen *scenarios.Scenario, override string) (modelChoice, error) {
	var mc modelChoice
	text := override
	if text == "" && scen.LLM != nil {
		text = scen.LLM.Model
	}
	if text == "" {
		return mc, nil
	}
	spec, err := llm.ParseSpec(text)
	if err != nil {
		return mc, err
	}
	mc.spec = spec
	if scen.LLM != nil {
		mc.budget = llmBudget{Calls: scen.LLM.Budget.Calls, Tokens: scen.LLM.Budget.Tokens, CostUSD: scen.LLM.Budget.CostUSD}
	}
	switch spec.Provider {
	case llm.ProviderScripted:
		if scen.LLM == nil || len(scen.LLM.Rules) == 0 {
			return mc, fmt.Errorf("%w: the scripted model answers from rules, and scenario %s has none: add llm.rules to it, or pick a real model with --llm", llm.ErrConfig, scen.Name)
		}
		rules, err := llm.DecodeRules(scen.LLM.Rules)
		if err != nil {
			return mc, err
		}
		if mc.model, err = llm.NewScripted(llm.ProviderScripted, rules); err != nil {
			return mc, err
		}
	case llm.ProviderReplay:
		if mc.replay, err = h.recordedExchanges(spec.Model); err != nil {
			return mc, fmt.Errorf("--llm %s: %w", text, err)
		}
		mc.replayRun = spec.Model
		mc.model = replayModel{run: spec.Model}
	default:
		if mc.model, err = llm.New(spec, llm.Options{Env: h.opts.LLMEnv, HTTPClient: h.opts.LLMHTTPClient}); err != nil {
			return mc, err
		}
	}
	mc.prices = llm.DefaultPrices(spec)
	if scen.LLM != nil && scen.LLM.Prices != nil {
		mc.prices = llm.Prices{PromptPer1K: scen.LLM.Prices.PromptPer1K, CompletionPer1K: scen.LLM.Prices.CompletionPer1K}
	}
	return mc, nil
}

// replayModel stands for a recording: the harness answers from it (see
// replayAnswer); Complete is never the path.
type replayModel struct{ run string }

func (m replayModel) Provider() string { return llm.ProviderReplay }
func (m replayModel) Name() string     { return "replay:" + m.run }
func (m replayModel) Complete(context.Context, protocol.ChatRequest) (protocol.ChatResponse, error) {
	return protocol.ChatResponse{}, errors.New("replay: answers come from the recording")
}

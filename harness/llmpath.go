package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
	TestDouble       bool    `json:"test_double"` // the scripted model: deterministic rules, not a real model
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
	exceeded  string        // why the budget ended the run
	limitCh   chan struct{} // closed when a budget is exceeded
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

// LLMChat implements gateway.LLMBackend: count the call, fire llm:N faults,
// check the budget, apply the LLM path's toxics, ask the model (or the
// recording), journal the exchange durably, then answer.
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
	if err := r.writable(c); err != nil {
		r.mu.Unlock()
		return protocol.ChatResponse{}, err
	}
	st := r.llm
	if st.exceeded != "" {
		r.mu.Unlock()
		return protocol.ChatResponse{}, budgetError(st.exceeded)
	}
	st.calls++
	call := st.calls
	for _, f := range r.faults {
		if !f.rec.Applied && f.spec.Trigger.Type == chaos.TriggerLLM && f.spec.Trigger.N == call {
			r.fire(dctx, f)
		}
	}
	if st.budget.Calls > 0 && st.totals.Calls >= st.budget.Calls {
		reason := fmt.Sprintf("LLM budget: %d calls spent (budget %d)", st.totals.Calls, st.budget.Calls)
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
		rec.Status, rec.Error, rec.Fault = faultErr.Status, faultErr.Message, "llm-"+tx.Kind
		r.metLLM(dctx, by, fmt.Sprintf("answered LLM call %d", call))
		err := r.saveLLM(dctx, &rec, canon, nil)
		r.mu.Unlock()
		if err != nil {
			return protocol.ChatResponse{}, err
		}
		return protocol.ChatResponse{}, faultErr
	}
	st.ordinals[c.Attempt]++
	rec.Ordinal = st.ordinals[c.Attempt]
	model, replay := st.model, st.replay
	r.mu.Unlock()

	// The model is asked without the run's lock: a real provider may take
	// seconds. The request is still in flight, so the clock holds still.
	var resp protocol.ChatResponse
	if replay != nil {
		resp, err = r.replayAnswer(replay, rec, canon)
	} else {
		resp, err = model.Complete(ctx, req)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	rec.WallMicros = time.Since(started).Microseconds()
	if err != nil {
		ge := providerError(err)
		rec.Status, rec.Error = ge.Status, ge.Message
		if serr := r.saveLLM(dctx, &rec, canon, nil); serr != nil {
			return protocol.ChatResponse{}, serr
		}
		return protocol.ChatResponse{}, ge
	}
	if len(resp.Choices) == 0 {
		return protocol.ChatResponse{}, gateway.Errorf(http.StatusBadGateway, protocol.CodeProviderError, "the model answered no choice")
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
		r.metLLM(dctx, by, fmt.Sprintf("cut LLM call %d short", call))
	case chaos.LLMMalformed:
		if malform(&resp) {
			rec.Fault = "llm-malformed-tool-call"
			r.metLLM(dctx, by, fmt.Sprintf("broke the tool call of LLM call %d", call))
		}
	}
	rec.Status, rec.Usage = http.StatusOK, resp.Usage
	if resp.Usage != nil {
		rec.CostUSD = llm.Cost(*resp.Usage, st.prices)
	}
	if err := r.saveLLM(dctx, &rec, canon, answer); err != nil {
		return protocol.ChatResponse{}, err
	}
	st.add(rec)
	if reason := st.over(); reason != "" {
		r.exceedLocked(reason)
	}
	return resp, nil
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
	case b.Tokens > 0 && t.PromptTokens+t.CompletionTokens > b.Tokens:
		return fmt.Sprintf("LLM budget: %d tokens spent (budget %d)", t.PromptTokens+t.CompletionTokens, b.Tokens)
	case b.CostUSD > 0 && t.CostUSD > b.CostUSD:
		return fmt.Sprintf("LLM budget: $%.4f spent (budget $%.4f)", t.CostUSD, b.CostUSD)
	}
	return ""
}

// metLLM marks the fault behind an LLM toxic as met.
func (r *run) metLLM(ctx context.Context, f *faultState, detail string) {
	if f != nil && !f.rec.Met {
		f.rec.Met, f.rec.MetDetail = true, detail
		r.saveFault(ctx, f)
	}
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
		ge.RetryAfter = pe.RetryAfter
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
	text := ch.Message.Content.Text
	ch.Message.Content = protocol.MessageContent{Text: text[:len(text)/2]}
	ch.Message.ToolCalls = nil
	ch.FinishReason = "length"
}

// malform breaks the JSON of the first tool call's arguments; it reports
// false when the answer has no tool call.
func malform(resp *protocol.ChatResponse) bool {
	calls := resp.Choices[0].Message.ToolCalls
	if len(calls) == 0 {
		return false
	}
	args := calls[0].Function.Arguments
	calls[0].Function.Arguments = strings.TrimSuffix(args, "}") + `,"` // an unterminated object
	return true
}

// replayAnswer serves an exchange from the recording, or reports how the
// run diverged from it.
func (r *run) replayAnswer(replay map[string]LLMRecord, rec LLMRecord, canon []byte) (protocol.ChatResponse, error) {
	want, ok := replay[replayKey(rec.Attempt, rec.Ordinal)]
	if !ok {
		return protocol.ChatResponse{}, gateway.Errorf(http.StatusConflict, protocol.CodeDivergence,
			"replay of run %s diverged: it recorded no LLM call %d in attempt %d", r.llm.replayRun, rec.Ordinal, rec.Attempt)
	}
	if want.RequestHash != rec.RequestHash {
		recorded, err := r.recordedRequest(want)
		if err != nil {
			return protocol.ChatResponse{}, err
		}
		return protocol.ChatResponse{}, gateway.Errorf(http.StatusConflict, protocol.CodeDivergence,
			"replay of run %s diverged at LLM call %d of attempt %d: %s", r.llm.replayRun, rec.Ordinal, rec.Attempt, firstDifference(recorded, canon))
	}
	body := want.Response
	if want.ResponseBlob != "" {
		b, err := r.j.Blob(want.ResponseBlob)
		if err != nil {
			return protocol.ChatResponse{}, fmt.Errorf("read recorded LLM response: %w", err)
		}
		body = b
	}
	if want.Status != http.StatusOK || len(body) == 0 {
		return protocol.ChatResponse{}, gateway.Errorf(want.Status, protocol.CodeProviderError, "%s (replayed)", want.Error)
	}
	var resp protocol.ChatResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return protocol.ChatResponse{}, fmt.Errorf("decode recorded LLM response: %w", err)
	}
	return resp, nil
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
		replay: replay, replayRun: replayRun, limitCh: make(chan struct{})}
	if model != nil {
		st.totals.Provider, st.totals.Model = model.Provider(), model.Name()
		st.totals.TestDouble = model.Provider() == "scripted"
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

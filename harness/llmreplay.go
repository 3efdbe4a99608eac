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

	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios"
)

// replayAnswer serves an exchange from the recording — the answer it
// recorded, or its error exactly (status, code, param, Retry-After) — or
// reports how the run diverged from it. Calls of an attempt are matched in
// order; a call that arrives out of order (concurrent calls) is served the
// unused exchange of its attempt with the same request, if there is one.
func (p *llmPath) replayAnswer(rec LLMRecord, canon []byte) (protocol.ChatResponse, *LLMRecord, error) {
	r := p.r
	r.mu.Lock()
	st := p
	attempt := rec.Attempt + p.attemptOffset // the recording's attempt
	key := replayKey(attempt, rec.Ordinal)
	want, ok := st.replay[key]
	if ok && (want.RequestHash != rec.RequestHash || st.used[key]) {
		for k, other := range st.replay {
			if other.Attempt == attempt && other.RequestHash == rec.RequestHash && !st.used[k] {
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
			"replay of run %s diverged: it recorded no LLM call %d in attempt %d, and this run asked: %s", run, rec.Ordinal, attempt, lastMessage(canon))
	}
	if want.RequestHash != rec.RequestHash {
		recorded, err := r.h.history.LLMRequest(want)
		if err != nil {
			return protocol.ChatResponse{}, nil, err
		}
		return protocol.ChatResponse{}, nil, gateway.Errorf(http.StatusConflict, protocol.CodeDivergence,
			"replay of run %s diverged at LLM call %d of attempt %d: %s", run, rec.Ordinal, attempt, firstDifference(recorded, canon))
	}
	if want.Status != http.StatusOK {
		ge := gateway.Errorf(want.Status, want.Code, "%s", want.Error)
		if ge.Code == "" {
			ge.Code = protocol.CodeProviderError
		}
		ge.Param, ge.RetryAfter = want.Param, time.Duration(want.RetryAfterMS)*time.Millisecond
		return protocol.ChatResponse{}, &want, ge
	}
	body, err := r.h.history.LLMResponse(want)
	if err != nil {
		return protocol.ChatResponse{}, nil, err
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

// newLLMPath rebuilds a run's LLM side from its journaled exchanges:
// totals, counters, and the model.
func newLLMPath(r *run, mc modelChoice, recs []LLMRecord) *llmPath {
	p := &llmPath{r: r, model: mc.model, spec: mc.spec, prices: mc.prices, budget: mc.budget, ordinals: map[int]int{},
		replay: mc.replay, replayRun: mc.replayRun, limitCh: make(chan struct{}), used: map[string]bool{}}
	if iso := r.rec.Isolated; iso != nil && iso.ReplayAttempt > 0 {
		p.attemptOffset = iso.ReplayAttempt - 1
	}
	if mc.model != nil {
		p.totals.Provider, p.totals.Model = mc.model.Provider(), mc.model.Name()
		p.totals.TestDouble = mc.model.Provider() == llm.ProviderScripted
	}
	if mc.replay != nil {
		// A replay answers as the recording's model did.
		p.totals.ReplayOf = mc.replayRun
		for _, rec := range mc.replay {
			p.totals.Provider, p.totals.Model = rec.Provider, rec.Model
			p.totals.TestDouble = rec.Provider == llm.ProviderScripted
			break
		}
	}
	for _, rec := range recs {
		p.seq = max(p.seq, rec.Seq)
		p.calls = max(p.calls, rec.Call)
		if rec.Ordinal > p.ordinals[rec.Attempt] {
			p.ordinals[rec.Attempt] = rec.Ordinal
		}
		p.add(rec)
	}
	if reason := p.over(); reason != "" {
		p.exceeded = reason
		close(p.limitCh)
	}
	return p
}

// recordedExchanges indexes a run's exchanges that reached the model, for
// replay.
func (h *Harness) recordedExchanges(runID string) (map[string]LLMRecord, error) {
	if _, err := h.runRecord(runID); err != nil {
		return nil, err
	}
	recs, err := h.history.LLM(runID)
	if err != nil {
		return nil, err
	}
	out := map[string]LLMRecord{}
	for _, rec := range recs {
		if rec.Ordinal > 0 {
			out[replayKey(rec.Attempt, rec.Ordinal)] = rec
		}
	}
	return out, nil
}

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
		// "$task" in the rules reads the run's task, as the agent receives it.
		if mc.model, err = llm.NewScripted(llm.ProviderScripted, rules, llm.WithTask(scen.TaskJSON())); err != nil {
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

// Model is the live model a run of scen uses with the model spec (as
// RunRequest.LLM: "" for the scenario's llm.model); nil when it names none.
// A replay spec gives the scenario's own model instead: reflection writes
// its lessons with it.
func (h *Harness) Model(scen *scenarios.Scenario, spec string) (llm.Model, error) {
	if strings.HasPrefix(spec, llm.ProviderReplay+":") {
		spec = ""
	}
	mc, err := h.model(scen, spec)
	return mc.model, err
}

// replayModel stands for a recording: the harness answers from it (see
// replayAnswer); Complete is never the path.
type replayModel struct{ run string }

func (m replayModel) Provider() string { return llm.ProviderReplay }
func (m replayModel) Name() string     { return "replay:" + m.run }
func (m replayModel) Complete(context.Context, protocol.ChatRequest) (protocol.ChatResponse, error) {
	return protocol.ChatResponse{}, errors.New("replay: answers come from the recording")
}

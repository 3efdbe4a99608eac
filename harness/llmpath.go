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

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/gateway"
	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/llm"
	"github.com/overnight-dev/overnight/sandbox/protocol"
)

// inlineLLMLimit is the largest request or response kept inline in an
// exchange's record; larger ones go to blobs.
const inlineLLMLimit = 64 << 10

// LLMRecord is one LLM exchange, as journaled (history.LLMRecord).
type LLMRecord = history.LLMRecord

// LLMTotals summarise a run's LLM use in its result (history.LLMTotals).
type LLMTotals = history.LLMTotals

// llmBudget is the scenario's ceiling on LLM use (zero: none).
type llmBudget struct {
	Calls   int
	Tokens  int
	CostUSD float64
}

// llmPath is the LLM side of a live run: the OpenAI-compatible endpoint
// that settles earlier LLM faults' evidence, counts the call, fires llm:N
// faults, reserves the call against the budget, applies the LLM path's
// toxics, asks the model (or the recording), and journals the exchange
// before the agent hears it. Every request of the acting attempt that
// reaches it is journaled and counted in the totals, answered or refused
// (a request the gateway refuses as malformed too, see refuse), and the
// call budget bounds them all. Its state is guarded by the run's lock.
type llmPath struct {
	r         *run
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
	// attemptOffset maps this run's attempts to the recording's (an
	// isolated re-run of the parent's attempt k replays it as attempt 1).
	attemptOffset int
	toxic         chaos.LLMToxic
	toxicFault    *faultState
	inflight      int             // calls asked of the model and not yet answered
	used          map[string]bool // replay: recorded exchanges already served
	exceeded      string          // why the budget ended the run
	diverged      string          // why a replay could not go on
	limitCh       chan struct{}   // closed when a budget is exceeded or a replay diverges
}

var (
	_ gateway.LLMBackend  = (*run)(nil)
	_ gateway.LLMRefusals = (*run)(nil)
)

func replayKey(attempt, ordinal int) string { return fmt.Sprintf("%d/%d", attempt, ordinal) }

// limit is closed when the run's LLM budget is spent or its replay
// diverged (nil: no model, never).
func (p *llmPath) limit() <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.limitCh
}

// callCount is how many LLM calls the run has made (0: no model).
func (p *llmPath) callCount() int {
	if p == nil {
		return 0
	}
	return p.calls
}

// ending says why the LLM path is ending the run ("": it is not).
func (p *llmPath) ending() string {
	switch {
	case p == nil:
		return ""
	case p.diverged != "":
		return p.diverged
	}
	return p.exceeded
}

// end is how the LLM path ended the run: a spent budget fails it; a replay
// that diverged from its recording proves nothing either way.
func (p *llmPath) end() endState {
	if p.diverged != "" {
		return endState{verdict: VerdictUnknown, reason: p.diverged}
	}
	return endState{limit: true, reason: p.exceeded}
}

func noModel(r *run) error {
	return gateway.Errorf(http.StatusNotImplemented, protocol.CodeNotImplemented,
		"run %s has no model: give one with --llm (e.g. --llm openai:gpt-4o-mini) or an llm: block in scenario %s", r.rec.ID, r.rec.Scenario)
}

// LLMModels implements gateway.LLMBackend.
func (r *run) LLMModels(ctx context.Context, c gateway.Caller) (protocol.ModelList, error) {
	if r.llm == nil || r.llm.model == nil {
		return protocol.ModelList{}, noModel(r)
	}
	return protocol.ModelList{Object: "list", Data: []protocol.ModelInfo{{
		ID: r.llm.model.Name(), Object: "model", OwnedBy: r.llm.model.Provider(),
	}}}, nil
}

// LLMChat implements gateway.LLMBackend: see llmPath. Its span follows
// OpenTelemetry's GenAI semantic conventions: "chat MODEL", a client span
// with gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model
// (what the agent asked for), gen_ai.response.model (what answered),
// gen_ai.response.id, gen_ai.response.finish_reasons and
// gen_ai.usage.input_tokens / output_tokens, error.type on a refusal.
func (r *run) LLMChat(ctx context.Context, c gateway.Caller, req protocol.ChatRequest) (resp protocol.ChatResponse, err error) {
	if r.llm == nil || r.llm.model == nil {
		return protocol.ChatResponse{}, noModel(r)
	}
	model := r.llm.model
	r.mu.Lock()
	ctx = r.attemptContext(ctx)
	r.mu.Unlock()
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", model.Provider()),
		attribute.String("gen_ai.request.model", req.Model), AttrRunID.String(r.rec.ID), AttrAttempt.Int(c.Attempt),
		attribute.Bool("overnight.llm.test_double", model.Provider() == "scripted"),
	}
	if req.MaxTokens != nil {
		attrs = append(attrs, attribute.Int("gen_ai.request.max_tokens", *req.MaxTokens))
	}
	if req.Temperature != nil {
		attrs = append(attrs, attribute.Float64("gen_ai.request.temperature", *req.Temperature))
	}
	ctx, span := r.h.tracer().Start(ctx, "chat "+model.Name(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer func() {
		if err != nil {
			code := "error"
			var ge *gateway.Error
			if errors.As(err, &ge) {
				code = ge.Code
			}
			span.SetAttributes(attribute.String("error.type", code))
			endSpan(span, err)
			return
		}
		reasons := make([]string, 0, len(resp.Choices))
		for _, ch := range resp.Choices {
			reasons = append(reasons, ch.FinishReason)
		}
		span.SetAttributes(attribute.String("gen_ai.response.model", resp.Model), attribute.String("gen_ai.response.id", resp.ID),
			attribute.StringSlice("gen_ai.response.finish_reasons", reasons))
		if resp.Usage != nil {
			span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", resp.Usage.PromptTokens), attribute.Int("gen_ai.usage.output_tokens", resp.Usage.CompletionTokens))
		}
		span.End()
	}()
	return r.llm.chat(ctx, c, req)
}

// LLMRefused implements gateway.LLMRefusals: see llmPath.refuse.
func (r *run) LLMRefused(ctx context.Context, c gateway.Caller, e *gateway.Error) error {
	if r.llm == nil || r.llm.model == nil {
		return e
	}
	return r.llm.refuse(ctx, c, e)
}

// refuse journals and counts a request refused before it became a call (a
// malformed or unsupported one: it fires no llm:N fault and is evidence of
// no earlier one), and answers e — or, when the call budget is spent, the
// budget's refusal.
func (p *llmPath) refuse(ctx context.Context, c gateway.Caller, e *gateway.Error) error {
	ctx = context.WithoutCancel(ctx)
	r := p.r
	r.mu.Lock()
	defer r.unlock()
	if err := r.acting(c); err != nil {
		return err
	}
	if be := p.spend(); be != nil {
		e = be
	}
	rec := LLMRecord{Attempt: c.Attempt, Provider: p.model.Provider(), Model: p.model.Name(), Virtual: r.clock.now,
		Status: e.Status, Error: e.Message, Code: e.Code, Param: e.Param}
	if err := p.save(ctx, &rec, nil, nil); err != nil {
		return err
	}
	p.add(rec)
	return e
}

// spend reserves a request against the call budget: when the budget is
// spent, it ends the run and returns the refusal to answer instead.
func (p *llmPath) spend() *gateway.Error {
	if p.budget.Calls > 0 && p.totals.Calls+p.inflight >= p.budget.Calls {
		reason := p.callsSpent()
		p.exceed(reason)
		return budgetError(reason)
	}
	return nil
}

func (p *llmPath) callsSpent() string {
	return fmt.Sprintf("LLM budget: %s spent (budget %d)", history.Count(p.budget.Calls, "call"), p.budget.Calls)
}

func (p *llmPath) chat(ctx context.Context, c gateway.Caller, req protocol.ChatRequest) (protocol.ChatResponse, error) {
	dctx := context.WithoutCancel(ctx)
	started := time.Now()
	canon, err := llm.Canonical(req)
	if err != nil {
		return protocol.ChatResponse{}, p.refuse(ctx, c, gateway.Errorf(http.StatusBadRequest, protocol.CodeBadRequest, "chat request: %v", err))
	}
	r := p.r

	r.mu.Lock()
	if err := r.acting(c); err != nil {
		r.unlock()
		return protocol.ChatResponse{}, err
	}
	canon = p.scrub(canon)
	r.faults.settleLLM(dctx, chaos.LLMCall{Virtual: r.clock.now, Wall: started, Answers: func(callID string) bool {
		for _, m := range req.Messages {
			if m.Role == "tool" && m.ToolCallID == callID {
				return true
			}
		}
		return false
	}})
	p.calls++
	call := p.calls
	r.faults.fireLLM(dctx, call)
	if err := r.acting(c); err != nil { // a fault may have ended the attempt
		r.unlock()
		return protocol.ChatResponse{}, err
	}
	rec := LLMRecord{Attempt: c.Attempt, Call: call, RequestHash: hashHex(canon), Provider: p.model.Provider(), Model: p.model.Name(), Virtual: r.clock.now}
	if be := p.spend(); be != nil {
		rec.Status, rec.Error, rec.Code = be.Status, be.Message, be.Code
		err := p.save(dctx, &rec, canon, nil)
		if err == nil {
			p.add(rec)
			err = be
		}
		r.unlock()
		return protocol.ChatResponse{}, err
	}
	tx, by := p.toxic, p.toxicFault
	if tx.Once {
		p.toxic = chaos.LLMToxic{}
		r.faults.reapplyTop(chaos.PathLLM)
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
		w := &chaos.LLMWait{Kind: tx.Kind, Call: call, After: r.clock.now.Add(tx.RetryAfter)}
		if tx.Kind == chaos.LLMRateLimit {
			// The client's wait starts when the 429 reaches it, after now:
			// one that waits what the headers say calls at or after this.
			sent := gateway.RetryAfterSent(tx.RetryAfter)
			w.WallAfter, w.RetryAfterMS = time.Now().Add(sent), sent.Milliseconds()
		}
		r.faults.hitLLM(dctx, by, w, tx.Once)
		err := p.save(dctx, &rec, canon, nil)
		if err == nil {
			p.add(rec)
		}
		r.unlock()
		if err != nil {
			return protocol.ChatResponse{}, err
		}
		return protocol.ChatResponse{}, faultErr
	}
	p.ordinals[c.Attempt]++
	rec.Ordinal = p.ordinals[c.Attempt]
	p.inflight++
	model, replaying := p.model, p.replay != nil
	r.unlock()

	// The model is asked without the run's lock: a real provider may take
	// seconds. The request is still in flight, so the clock holds still.
	var resp protocol.ChatResponse
	var recorded *LLMRecord
	if replaying {
		resp, recorded, err = p.replayAnswer(rec, canon)
	} else {
		resp, err = model.Complete(ctx, req)
	}

	r.mu.Lock()
	defer r.unlock()
	p.inflight--
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
		if serr := p.save(dctx, &rec, canon, nil); serr != nil {
			return protocol.ChatResponse{}, serr
		}
		p.add(rec)
		if ge.Code == protocol.CodeDivergence {
			p.diverge(dctx, ge.Message)
		}
		if late != nil {
			return protocol.ChatResponse{}, late
		}
		return protocol.ChatResponse{}, ge
	}
	// Answers get ids of the run's own, so two honest runs answer alike.
	resp.ID = fmt.Sprintf("chatcmpl-%d-%d", c.Attempt, rec.Ordinal)
	resp.Object = "chat.completion"
	resp.Created = r.clock.now.Unix()
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
		r.faults.hitLLM(dctx, by, &chaos.LLMWait{Kind: tx.Kind, Call: call, After: r.clock.now}, tx.Once)
	case chaos.LLMMalformed:
		var w *chaos.LLMWait
		if id, ok := malform(&resp); ok {
			rec.Fault = "llm-malformed-tool-call"
			w = &chaos.LLMWait{Kind: tx.Kind, Call: call, After: r.clock.now, CallID: id}
		}
		r.faults.hitLLM(dctx, by, w, tx.Once)
	}
	rec.Status, rec.Usage = http.StatusOK, resp.Usage
	switch {
	case recorded != nil:
		rec.CostUSD = recorded.CostUSD // what it cost when it was recorded
	case resp.Usage != nil:
		rec.CostUSD = llm.Cost(*resp.Usage, p.prices)
	}
	if err := p.save(dctx, &rec, canon, answer); err != nil {
		return protocol.ChatResponse{}, err
	}
	p.add(rec)
	if reason := p.over(); reason != "" {
		p.exceed(reason)
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
func (p *llmPath) scrub(canon []byte) []byte {
	r := p.r
	out := bytes.ReplaceAll(canon, []byte(r.rec.ID), []byte("<run-id>"))
	return tokenPattern.ReplaceAllFunc(out, func(m []byte) []byte {
		if _, ok := r.sup.tokens[hashHex(m)]; ok {
			return []byte("<token>")
		}
		return m
	})
}

func budgetError(reason string) *gateway.Error {
	return gateway.Errorf(http.StatusTooManyRequests, protocol.CodeBudget, "%s; the run ends", reason)
}

// exceed ends the run for its LLM budget.
func (p *llmPath) exceed(reason string) {
	if p.exceeded != "" {
		return
	}
	p.exceeded = reason
	close(p.limitCh)
	p.r.progress("run %s: %s", p.r.rec.ID, reason)
	p.r.failed(Failure{Kind: FailureBudget, Detail: reason})
}

// diverge ends a replay that can no longer reproduce its recording: the
// run's verdict is unknown, with the first difference as the reason.
func (p *llmPath) diverge(ctx context.Context, why string) {
	if p.diverged != "" || p.exceeded != "" {
		return
	}
	p.diverged = why
	p.r.event(ctx, "harness.divergence", why, nil)
	close(p.limitCh)
	p.r.progress("run %s: %s", p.r.rec.ID, why)
}

// add counts a journaled exchange in the totals: answered or refused, and
// what an answered one used.
func (p *llmPath) add(rec LLMRecord) {
	p.totals.Count(rec.Status, rec.Code)
	if rec.Status != http.StatusOK {
		return
	}
	if rec.Usage != nil {
		p.totals.PromptTokens += rec.Usage.PromptTokens
		p.totals.CompletionTokens += rec.Usage.CompletionTokens
	}
	p.totals.CostUSD += rec.CostUSD
}

// over says which budget the totals exceed, if any.
func (p *llmPath) over() string {
	b, t := p.budget, p.totals
	switch {
	case b.Calls > 0 && t.Calls > b.Calls: // a resumed run whose budget refused a call
		return p.callsSpent()
	case b.Tokens > 0 && t.PromptTokens+t.CompletionTokens > b.Tokens:
		return fmt.Sprintf("LLM budget: %d tokens spent (budget %d)", t.PromptTokens+t.CompletionTokens, b.Tokens)
	case b.CostUSD > 0 && t.CostUSD > b.CostUSD:
		return fmt.Sprintf("LLM budget: $%.4f spent (budget $%.4f)", t.CostUSD, b.CostUSD)
	}
	return ""
}

// save journals an exchange durably (one commit; large bodies as blobs).
func (p *llmPath) save(ctx context.Context, rec *LLMRecord, canon, answer []byte) error {
	r := p.r
	p.seq++
	rec.Seq = p.seq
	if len(canon) > inlineLLMLimit {
		h, err := r.w.PutBlob(ctx, canon)
		if err != nil {
			return fmt.Errorf("store LLM request: %w", err)
		}
		rec.RequestBlob = h
	} else {
		rec.Request = canon
	}
	if answer != nil {
		if len(answer) > inlineLLMLimit {
			h, err := r.w.PutBlob(ctx, answer)
			if err != nil {
				return fmt.Errorf("store LLM response: %w", err)
			}
			rec.ResponseBlob = h
		} else {
			rec.Response = answer
		}
	}
	if err := r.put(ctx, history.LLMEntry(r.rec.ID, *rec)); err != nil {
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

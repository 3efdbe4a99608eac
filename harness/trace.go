package harness

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the harness's spans.
const TracerName = "github.com/overnight-dev/overnight/harness"

// The harness's spans, and the attributes it sets on them (besides the
// GenAI semantic conventions' gen_ai.* on the LLM calls' spans):
//
//	overnight.run      a run driven to its verdict (or a resume of it)
//	overnight.attempt  one attempt: a container, start to end
//	overnight.effect   one effect through the effect path (gate, world)
//	chat MODEL         one LLM call at the gateway's endpoint (GenAI)
const (
	SpanRun     = "overnight.run"
	SpanAttempt = "overnight.attempt"
	SpanEffect  = "overnight.effect"

	AttrRunID     = attribute.Key("overnight.run.id")
	AttrScenario  = attribute.Key("overnight.scenario")
	AttrAgent     = attribute.Key("overnight.agent")
	AttrSeed      = attribute.Key("overnight.seed")
	AttrParent    = attribute.Key("overnight.run.parent") // the run an isolated re-run re-runs
	AttrVerdict   = attribute.Key("overnight.verdict")
	AttrReason    = attribute.Key("overnight.reason")
	AttrAttempt   = attribute.Key("overnight.attempt")
	AttrContainer = attribute.Key("overnight.container.id")
	AttrEnd       = attribute.Key("overnight.attempt.end")
	AttrExitCode  = attribute.Key("overnight.attempt.exit_code")
	AttrEffectKey = attribute.Key("overnight.effect.key")
	AttrKind      = attribute.Key("overnight.effect.kind")
	AttrStatus    = attribute.Key("overnight.effect.status")
	AttrReplayed  = attribute.Key("overnight.effect.replayed")
)

// tracer is the harness's tracer: from Options.TracerProvider, else the
// global one (a no-op unless the program installed one).
func (h *Harness) tracer() trace.Tracer {
	tp := h.opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(TracerName)
}

// Tracer is the tracer the harness's spans come from, for a caller's own
// spans around its runs (a suite's, say): a run started under a span is
// its child.
func (h *Harness) Tracer() trace.Tracer { return h.tracer() }

// endSpan ends span, recording err (a harness error, not a verdict) when
// there is one.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// attemptContext is ctx under the run's current attempt's span, for the
// spans of the agent's requests (which arrive on connections of their
// own): they are the attempt's children. The caller holds r.mu.
func (r *run) attemptContext(ctx context.Context) context.Context {
	if !r.sup.span.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, r.sup.span)
}

package main

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// span is one span as an OTLP receiver got it.
type span struct {
	name, trace, id, parent string
	service                 string
	attrs                   map[string]string
}

// otlpReceiver is a local OTLP/HTTP trace receiver: what the standard
// exporters send to a collector's port 4318, decoded.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []span
}

func newOTLPReceiver() *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		defer GinkgoRecover()
		Expect(req.URL.Path).To(Equal("/v1/traces"))
		Expect(req.Header.Get("Content-Type")).To(Equal("application/x-protobuf"))
		body, err := io.ReadAll(req.Body)
		Expect(err).NotTo(HaveOccurred())
		var msg coltracepb.ExportTraceServiceRequest
		Expect(proto.Unmarshal(body, &msg)).To(Succeed())
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, rs := range msg.ResourceSpans {
			service := attrs(rs.Resource.Attributes)["service.name"]
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					r.spans = append(r.spans, span{name: s.Name, trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
						parent: hex.EncodeToString(s.ParentSpanId), service: service, attrs: attrs(s.Attributes)})
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	DeferCleanup(r.Close)
	return r
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = strconv.FormatBool(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		case *commonpb.AnyValue_ArrayValue:
			var parts []string
			for _, e := range v.ArrayValue.Values {
				parts = append(parts, e.GetStringValue())
			}
			m[kv.Key] = strings.Join(parts, ",")
		}
	}
	return m
}

func (r *otlpReceiver) named(name string) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []span
	for _, s := range r.spans {
		if s.name == name || strings.HasPrefix(s.name, name+" ") {
			out = append(out, s)
		}
	}
	return out
}

var _ = Describe("observability", func() {
	It("exports spans of the run and its attempts over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set", func(ctx SpecContext) {
		rcv := newOTLPReceiver()
		env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_SERVICE_NAME=overnight-under-test"}
		o := overnight(ctx, stateDir(), env, "run", "deploy", "--seed", "1", "--fault", "kill@step:3", "-o", "json", "-q")
		Expect(o.code).To(Equal(0), o.stderr)
		res := decodeResult(o.stdout)

		runs := rcv.named("overnight.run")
		Expect(runs).To(HaveLen(1), "the spans are flushed before the process exits")
		run := runs[0]
		Expect(run.service).To(Equal("overnight-under-test"))
		Expect(run.attrs).To(HaveKeyWithValue("overnight.run.id", res.RunID))
		Expect(run.attrs).To(HaveKeyWithValue("overnight.scenario", "deploy"))
		Expect(run.attrs).To(HaveKeyWithValue("overnight.verdict", "pass"))
		attempts := rcv.named("overnight.attempt")
		Expect(attempts).To(HaveLen(2), "killed after step 3, then resumed")
		for _, a := range attempts {
			Expect(a.trace).To(Equal(run.trace))
			Expect(a.parent).To(Equal(run.id))
		}
		Expect(attempts[0].attrs["overnight.attempt.end"]).To(ContainSubstring("killed by fault kill@step:3"))
		isAttempt := map[string]bool{attempts[0].id: true, attempts[1].id: true}

		effects := rcv.named("overnight.effect")
		Expect(len(effects)).To(BeNumerically(">=", 5), "one span per effect request")
		kinds := map[string]bool{}
		for _, e := range effects {
			Expect(isAttempt[e.parent]).To(BeTrue(), "an effect's span is its attempt's child: %+v", e)
			kinds[e.attrs["overnight.effect.kind"]] = true
			Expect(e.attrs["overnight.effect.status"]).To(Equal("done"))
		}
		Expect(kinds).To(HaveKey("cloud.create_network"))
		Expect(kinds).To(HaveKey("cloud.set_dns"))

		chats := rcv.named("chat")
		Expect(chats).NotTo(BeEmpty(), "the deployer asks the model for its plan")
		for _, c := range chats {
			Expect(c.name).To(Equal("chat " + c.attrs["gen_ai.response.model"]))
			Expect(isAttempt[c.parent]).To(BeTrue())
			Expect(c.attrs).To(HaveKeyWithValue("gen_ai.operation.name", "chat"))
			Expect(c.attrs).To(HaveKeyWithValue("gen_ai.provider.name", "scripted"))
			Expect(c.attrs).To(HaveKeyWithValue("overnight.llm.test_double", "true"))
			Expect(c.attrs).To(HaveKey("gen_ai.request.model"))
			Expect(c.attrs).To(HaveKey("gen_ai.usage.input_tokens"))
			Expect(c.attrs).To(HaveKey("gen_ai.usage.output_tokens"))
			Expect(c.attrs).To(HaveKey("gen_ai.response.finish_reasons"))
		}
	}, SpecTimeout(3*time.Minute))

	It("makes a suite's runs the children of its span", func(ctx SpecContext) {
		rcv := newOTLPReceiver()
		o := overnight(ctx, stateDir(), []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + rcv.URL + "/v1/traces"}, "suite", "deploy", "--seeds", "2", "-q", "--json", "-")
		Expect(o.code).To(Equal(0), o.stderr)
		suites := rcv.named("overnight.suite")
		Expect(suites).To(HaveLen(1))
		Expect(suites[0].attrs).To(HaveKeyWithValue("overnight.suite.passes", "2"))
		runs := rcv.named("overnight.run")
		Expect(runs).To(HaveLen(2))
		for _, r := range runs {
			Expect(r.parent).To(Equal(suites[0].id))
		}
	}, SpecTimeout(3*time.Minute))

	It("exports nothing without the variables, and writes its diagnostics as JSON lines with --log-format json", func(ctx SpecContext) {
		rcv := newOTLPReceiver()
		state := stateDir()
		o := overnight(ctx, state, nil, "-v", "--log-format", "json", "run", "deploy", "--seed", "1", "-o", "json", "-q")
		Expect(o.code).To(Equal(0), o.stderr)
		Expect(rcv.named("overnight.run")).To(BeEmpty())
		lines := 0
		for _, line := range strings.Split(strings.TrimSpace(o.stderr), "\n") {
			if !strings.HasPrefix(line, "{") {
				continue // the run id line and progress are for people
			}
			var rec map[string]any
			Expect(json.Unmarshal([]byte(line), &rec)).To(Succeed(), line)
			Expect(rec).To(HaveKey("level"))
			Expect(rec).To(HaveKey("msg"))
			lines++
		}
		Expect(lines).To(BeNumerically(">", 0), o.stderr)

		bad := overnight(ctx, state, nil, "--log-format", "xml", "runs", "-o", "json")
		Expect(bad.code).To(Equal(3))
		Expect(errorJSON(bad)["code"]).To(Equal("usage"))
	}, SpecTimeout(3*time.Minute))
})

package harness

import (
	"context"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openaigo "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/overnight-dev/overnight/chaos"
	"github.com/overnight-dev/overnight/harness/history"
)

// exchange is one HTTP round trip an OpenAI client made, as its transport
// saw it.
type exchange struct {
	sent, answered time.Time
	status         int
	header         http.Header
}

// tapTransport records the round trips of a client: an SDK's own retries
// are each a round trip of their own.
type tapTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []exchange
}

func (t *tapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Now()
	resp, err := t.next.RoundTrip(req)
	x := exchange{sent: sent, answered: time.Now()}
	if resp != nil {
		x.status, x.header = resp.StatusCode, resp.Header.Clone()
	}
	t.mu.Lock()
	t.log = append(t.log, x)
	t.mu.Unlock()
	return resp, err
}

func (t *tapTransport) exchanges() []exchange {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]exchange(nil), t.log...)
}

// retryingOpenAI is the official openai-go client as an agent uses it out
// of the box, its built-in retries on (it waits a 429's Retry-After in real
// time, then asks again), talking to the run's gateway through tap.
func (lr *liveRun) retryingOpenAI(token string) (openaigo.Client, *tapTransport) {
	hc := lr.httpClient()
	tap := &tapTransport{next: hc.Transport}
	hc.Transport = tap
	return openaigo.NewClient(option.WithBaseURL("http://gateway/v1/llm/"), option.WithAPIKey(token), option.WithHTTPClient(hc)), tap
}

func hello(ctx context.Context, c openaigo.Client) (*openaigo.ChatCompletion, error) {
	return c.Chat.Completions.New(ctx, openaigo.ChatCompletionNewParams{Model: "x",
		Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("hi")}})
}

var _ = Describe("a 429 waited out in real time (openai-go's own retry)", func() {
	var (
		ctx   context.Context
		state string
	)
	BeforeEach(func() {
		ctx = context.Background()
		state = GinkgoT().TempDir()
	})

	fault := func(lr *liveRun) history.FaultRecord {
		lr.r.mu.Lock()
		defer lr.r.mu.Unlock()
		return lr.r.faults.faults[0].rec
	}

	It("credits the client's retry after Retry-After in real time, while the virtual clock stands still", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{Faults: []chaos.Spec{mustParseSpec("llm-429:1s@llm:1")}})
		client, tap := lr.retryingOpenAI(lr.attempt())
		resp, err := hello(ctx, client)
		Expect(err).NotTo(HaveOccurred(), "openai-go waits out the 429 and asks again")
		Expect(resp.Choices[0].Message.Content).To(Equal("hello from the scripted model"))

		log := tap.exchanges()
		Expect(log).To(HaveLen(2))
		Expect(log[0].status).To(Equal(http.StatusTooManyRequests))
		Expect(log[0].header.Get("Retry-After")).To(Equal("1"))
		Expect(log[0].header.Get("Retry-After-Ms")).To(Equal("1000"))
		Expect(log[1].status).To(Equal(http.StatusOK))
		Expect(log[1].sent.Sub(log[0].answered)).To(BeNumerically(">=", time.Second), "the client waited Retry-After in real time")

		Expect(lr.r.clock.now).To(Equal(VirtualEpoch), "no virtual time passed: only a real wait can be credited")
		f := fault(lr)
		Expect(f.Met).To(BeTrue(), f.MetDetail)
		Expect(f.MetDetail).To(Equal("after the 429 on LLM call 1, the agent waited Retry-After (1s of real time) and called again"))
		Expect(f.Evidence.LLM).To(BeNil(), "the evidence is settled")
	})

	It("sets the real-time deadline by the Retry-After-Ms it sends, so a client that waits exactly that is credited", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{Faults: []chaos.Spec{mustParseSpec("llm-429:1500ms@llm:1")}})
		client, tap := lr.retryingOpenAI(lr.attempt())
		_, err := hello(ctx, client)
		Expect(err).NotTo(HaveOccurred())

		log := tap.exchanges()
		Expect(log).To(HaveLen(2))
		Expect(log[0].header.Get("Retry-After-Ms")).To(Equal("1500"))
		Expect(log[0].header.Get("Retry-After")).To(Equal("2"), "whole seconds, rounded up: never shorter than the wait")
		wait := log[1].sent.Sub(log[0].answered)
		Expect(wait).To(BeNumerically(">=", 1500*time.Millisecond))
		Expect(wait).To(BeNumerically("<", 2*time.Second), "openai-go reads Retry-After-Ms first")
		f := fault(lr)
		Expect(f.Met).To(BeTrue(), f.MetDetail)
		Expect(f.MetDetail).To(ContainSubstring("(1.5s of real time)"))
	})

	It("judges by the first call after the 429: one made before Retry-After is over in either time is not met, and a later wait does not undo that", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{Faults: []chaos.Spec{mustParseSpec("llm-429:2s@llm:1")}})
		raw := lr.openai(lr.attempt()) // no retries of its own
		_, err := hello(ctx, raw)
		Expect(err).To(MatchError(ContainSubstring("429")))
		refused := time.Now()

		time.Sleep(time.Second)
		_, err = hello(ctx, raw)
		Expect(err).NotTo(HaveOccurred(), "the one-shot 429 is spent")
		f := fault(lr)
		Expect(f.Met).To(BeFalse(), "a call after 1s of a 2s Retry-After did not wait it")
		Expect(f.MetDetail).To(MatchRegexp(`^after the 429 on LLM call 1, the agent called again 1\.\d+s later in real time \(and 0s in virtual time\), before its Retry-After of 2s was over$`))

		time.Sleep(time.Until(refused.Add(2 * time.Second)))
		_, err = hello(ctx, raw)
		Expect(err).NotTo(HaveOccurred())
		Expect(fault(lr).Met).To(BeFalse(), "real time always passes: the call after the early one proves nothing")
	})

	It("gives a windowed 429 a new chance after each early retry it refuses again", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{Faults: []chaos.Spec{mustParseSpec("llm-429:1s@llm:1/1h")}})
		raw := lr.openai(lr.attempt())
		_, err := hello(ctx, raw)
		Expect(err).To(MatchError(ContainSubstring("429")))
		_, err = hello(ctx, raw)
		Expect(err).To(MatchError(ContainSubstring("429")), "at once: refused again, inside the window")
		Expect(fault(lr).Met).To(BeFalse())
		time.Sleep(1100 * time.Millisecond)
		_, err = hello(ctx, raw)
		Expect(err).To(MatchError(ContainSubstring("429")), "still inside the hour's window (virtual time stood still)")
		f := fault(lr)
		Expect(f.Met).To(BeTrue(), f.MetDetail)
		Expect(f.MetDetail).To(ContainSubstring("(1s of real time)"))
	})

	It("keeps the real-time deadline in the fault's journaled evidence across a harness restart", func() {
		lr := startLLMRun(state, llmScenario, Options{}, RunRequest{Faults: []chaos.Spec{mustParseSpec("llm-429:1s@llm:1")}})
		_, err := hello(ctx, lr.openai(lr.attempt()))
		Expect(err).To(MatchError(ContainSubstring("429")))
		id := lr.r.rec.ID
		journaled, err := lr.h.history.Faults(id)
		Expect(err).NotTo(HaveOccurred())
		Expect(journaled[0].Evidence.LLM).NotTo(BeNil())
		Expect(journaled[0].Evidence.LLM.WallAfter).NotTo(BeZero())
		Expect(journaled[0].Evidence.LLM.RetryAfterMS).To(Equal(int64(1000)))
		lr.stop()

		time.Sleep(time.Until(journaled[0].Evidence.LLM.WallAfter))
		again := startLiveRun(state, id)
		_, err = hello(ctx, again.openai(again.attempt()))
		Expect(err).NotTo(HaveOccurred())
		f := fault(again)
		Expect(f.Met).To(BeTrue(), f.MetDetail)
		Expect(f.MetDetail).To(ContainSubstring("of real time"))
	})
})

package remote_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/cloud"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// send makes one HTTP request and returns the status and body.
func send(ctx context.Context, method, url, body string) (int, string) {
	GinkgoHelper()
	r, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(r)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"), "every answer is JSON: %s", b)
	Expect(json.Valid(b)).To(BeTrue(), "every answer is JSON: %s", b)
	return resp.StatusCode, string(b)
}

func post(ctx context.Context, url, body string) (int, string) {
	GinkgoHelper()
	return send(ctx, http.MethodPost, url, body)
}

// refusal decodes an ErrorBody.
func refusal(body string) remote.CallError {
	GinkgoHelper()
	var eb remote.ErrorBody
	Expect(json.Unmarshal([]byte(body), &eb)).To(Succeed(), body)
	return eb.Error
}

var _ = Describe("the server", func() {
	It("answers describe to GET and POST, with the options it was started with and the version served now", func(ctx SpecContext) {
		url := serveCloud(ctx, world.NewMemStore(), map[string]any{cloud.OptionGoal: cloud.GoalMaintenance})
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			status, body := send(ctx, method, url+remote.PathDescribe, "")
			Expect(status).To(Equal(200), body)
			var d remote.Description
			Expect(json.Unmarshal([]byte(body), &d)).To(Succeed())
			Expect(d.Protocol).To(Equal(remote.Protocol))
			Expect(d.Name).To(Equal("cloud"))
			Expect(d.APIVersion).To(Equal(cloud.V1))
			Expect(d.Options).To(Equal(map[string]any{"goal": "maintenance"}))
			Expect(d.Examples).To(Equal(cloud.Definition().Examples), "the definition's examples, for the conformance kit")
		}
	})

	It("refuses a world's bad options before serving it", func(ctx SpecContext) {
		_, err := remote.NewServer(ctx, cloud.Definition(), world.NewMemStore(), map[string]any{"colour": "red"})
		Expect(err).To(MatchError(ContainSubstring(`serve world cloud: open it with options map[colour:red]: cloud world: unknown option "colour"`)))
	})

	DescribeTable("refuses a bad call with a JSON error body naming what was wrong",
		func(ctx SpecContext, method, path, body string, status int, code, want string) {
			url := serveCloud(ctx, world.NewMemStore(), nil)
			got, answer := send(ctx, method, url+path, body)
			Expect(got).To(Equal(status), answer)
			e := refusal(answer)
			Expect(e.Code).To(Equal(code))
			Expect(e.Message).To(ContainSubstring(want))
		},
		Entry("an unknown path lists the calls", http.MethodPost, "/v1/reset", `{}`, 404, remote.CodeNotFound,
			"no call POST /v1/reset; the calls are POST /v1/apply, /v1/create_instance, /v1/describe, /v1/drop_instance, /v1/duplicates, /v1/event, /v1/goal, /v1/ledger, /v1/lookup, /v1/set_version, /v1/state (describe also GET)"),
		Entry("a GET of a call", http.MethodGet, remote.PathLedger, "", 405, remote.CodeMethodNotAllowed, "GET /v1/ledger: want POST"),
		Entry("an unknown field", http.MethodPost, remote.PathApply, `{"key":"k","kind":"cloud.list","args":{},"idempotency_key":"x"}`, 400, remote.CodeBadRequest,
			`apply: field "idempotency_key": unknown`),
		Entry("a field of the wrong type", http.MethodPost, remote.PathApply, `{"key":7,"kind":"cloud.list"}`, 400, remote.CodeBadRequest,
			`apply: field "key": want string, got a JSON number`),
		Entry("a bad time", http.MethodPost, remote.PathApply, `{"key":"k","kind":"cloud.list","now":"yesterday"}`, 400, remote.CodeBadRequest,
			"a time field (now, at): want RFC 3339"),
		Entry("no key", http.MethodPost, remote.PathApply, `{"kind":"cloud.list","args":{}}`, 400, remote.CodeBadRequest, `apply: field "key": required`),
		Entry("no kind", http.MethodPost, remote.PathApply, `{"key":"k"}`, 400, remote.CodeBadRequest, `apply: field "kind": required`),
		Entry("a forged world event", http.MethodPost, remote.PathApply, `{"key":"k","kind":"world.api_version","args":{"version":"v2"}}`, 400, remote.CodeBadRequest,
			`field "kind": "world.api_version" is a world event's kind`),
		Entry("not JSON", http.MethodPost, remote.PathLedger, `{instance}`, 400, remote.CodeBadRequest, "ledger: body: not JSON"),
		Entry("not an object", http.MethodPost, remote.PathLedger, `[]`, 400, remote.CodeBadRequest, "ledger: body: want a JSON object, got \"[]\""),
		Entry("an empty body", http.MethodPost, remote.PathState, ``, 400, remote.CodeBadRequest, "state: body: empty; want a JSON object"),
		Entry("two objects", http.MethodPost, remote.PathState, `{}{}`, 400, remote.CodeBadRequest, "state: body: more after the JSON object"),
		Entry("a cut object", http.MethodPost, remote.PathState, `{"instance":`, 400, remote.CodeBadRequest, "state: body: the JSON object is cut short"),
		Entry("an unknown instance", http.MethodPost, remote.PathLookup, `{"instance":"ghost","key":"k"}`, 404, remote.CodeUnknownInstance, `lookup: no instance "ghost"`),
		Entry("an event on a world that undergoes none", http.MethodPost, remote.PathEvent, `{"kind":"world.dep_update"}`, 501, remote.CodeUnsupported, "world cloud undergoes no world events"),
		Entry("set_version to an unknown version", http.MethodPost, remote.PathSetVersion, `{"version":"v9"}`, 400, remote.CodeUnknownVersion, "set_version: "),
		Entry("a ledger entry without a kind", http.MethodPost, remote.PathCreateInstance, `{"instance":"s","ledger":[{"seq":1,"key":"k","outcome":{"status":"done"}}]}`, 400, remote.CodeBadRequest,
			`create_instance: field "ledger[0].kind": required`),
		Entry("a version event without a version", http.MethodPost, remote.PathCreateInstance, `{"instance":"s","ledger":[{"seq":1,"key":"","kind":"world.api_version","args":{}}]}`, 400, remote.CodeBadRequest,
			`field "ledger[0].args": a world.api_version event's args are {"version": "..."}`),
		Entry("dropping the world itself", http.MethodPost, remote.PathDropInstance, `{"instance":""}`, 400, remote.CodeBadRequest,
			`drop_instance: field "instance": required; the world itself ("") cannot be dropped`),
	)
})

package harness

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var _ = Describe("a journaled tool result read back for the agent (decodeToolResult)", func() {
	// Every result, as the SDK's decoder reads it and as decodeToolResult
	// does, must marshal to the same bytes: what the agent receives.
	sameAsTheSDK := func(raw string) {
		GinkgoHelper()
		var want, got mcp.CallToolResult
		wantErr := json.Unmarshal([]byte(raw), &want)
		gotErr := decodeToolResult([]byte(raw), &got)
		if wantErr != nil {
			Expect(gotErr).To(HaveOccurred(), "the SDK refuses %s", raw)
			return
		}
		Expect(gotErr).NotTo(HaveOccurred())
		w, err := json.Marshal(&want)
		Expect(err).NotTo(HaveOccurred())
		g, err := json.Marshal(&got)
		Expect(err).NotTo(HaveOccurred())
		// A resultType "complete" is the default: the gateway's SDK server
		// sets it for the agent's client when its protocol has it.
		var wm map[string]any
		Expect(json.Unmarshal(w, &wm)).To(Succeed())
		if wm["resultType"] == "complete" {
			delete(wm, "resultType")
		}
		w, err = json.Marshal(wm)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(g)).To(MatchJSON(string(w)), "for %s", raw)
		Expect(got.IsError).To(Equal(want.IsError))
		Expect(got.Content).To(HaveLen(len(want.Content)))
	}

	DescribeTable("gives the agent what the SDK's decoder would",
		sameAsTheSDK,
		Entry("text content", `{"content":[{"type":"text","text":"counter c1 is 3"}]}`),
		Entry("text and structured content", `{"content":[{"type":"text","text":"{\"n\":3}"}],"structuredContent":{"n":3,"names":["a","b"],"deep":{"x":1.5}}}`),
		Entry("a tool's own error", `{"content":[{"type":"text","text":"no such ticket"}],"isError":true}`),
		Entry("no content", `{"content":[]}`),
		Entry("content null", `{"content":null}`),
		Entry("structured content null", `{"content":[],"structuredContent":null}`),
		Entry("an empty text", `{"content":[{"type":"text","text":""}]}`),
		Entry("a result's _meta (the SDK's decoder)", `{"_meta":{"progress":1},"content":[{"type":"text","text":"x"}]}`),
		Entry("an image (the SDK's decoder)", `{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"text","text":"x"}]}`),
		Entry("annotations on text (the SDK's decoder)", `{"content":[{"type":"text","text":"x","annotations":{"priority":0.5}}]}`),
		Entry("a text's _meta (the SDK's decoder)", `{"content":[{"type":"text","text":"x","_meta":{"a":"b"}}]}`),
		Entry("a complete result's resultType", `{"content":[{"type":"text","text":"3"}],"structuredContent":{"value":3},"resultType":"complete"}`),
		Entry("a result that asks for input (the SDK's decoder)", `{"resultType":"input_required","inputRequests":{}}`),
		Entry("another field of a newer protocol (the SDK's decoder)", `{"content":[],"requestState":"abc"}`),
		Entry("an unknown content type (the SDK's decoder)", `{"content":[{"type":"hologram"}]}`),
		Entry("not an object", `[1,2]`),
		Entry("trailing bytes", `{"content":[]} {}`),
	)

	It("reads the common shape itself, keeping structured content as the bytes it was journaled as", func() {
		for _, raw := range []string{
			`{"content":[],"structuredContent":{"b":1,"a":[2]}}`,
			`{"content":[{"type":"text","text":"3"}],"structuredContent":{"b":1,"a":[2]},"resultType":"complete"}`,
		} {
			var got mcp.CallToolResult
			Expect(decodeToolResult([]byte(raw), &got)).To(Succeed())
			Expect(got.StructuredContent).To(Equal(json.RawMessage(`{"b":1,"a":[2]}`)), "for %s", raw)
		}
	})
})

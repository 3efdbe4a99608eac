package worldtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/scenarios/world/remote"
	"github.com/overnight-dev/overnight/scenarios/world/worldtest"
)

// Broken worlds: the real cloud server's handler, wrapped to break one
// promise of the protocol each.

// forward sends a request to inner and returns its answer.
func forward(inner http.Handler, method, path string, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	inner.ServeHTTP(rec, httptest.NewRequest(method, path, bytes.NewReader(body)))
	return rec
}

// answerJSON writes v as a JSON answer.
func answerJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// relay writes rec's answer as it is.
func relay(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// tampered serves inner, except that calls to the paths in calls go to
// their function (with the request's body read, and inner to forward to).
func tampered(inner http.Handler, calls map[string]func(w http.ResponseWriter, r *http.Request, body []byte)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := calls[r.URL.Path]
		if !ok {
			inner.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		Expect(err).NotTo(HaveOccurred())
		f(w, r, body)
	})
}

// describing serves inner with its description changed by change.
func describing(change func(d map[string]any)) func(inner http.Handler) http.Handler {
	return func(inner http.Handler) http.Handler {
		return tampered(inner, map[string]func(http.ResponseWriter, *http.Request, []byte){
			remote.PathDescribe: func(w http.ResponseWriter, r *http.Request, body []byte) {
				rec := forward(inner, r.Method, r.URL.Path, body)
				var d map[string]any
				Expect(json.Unmarshal(rec.Body.Bytes(), &d)).To(Succeed())
				change(d)
				answerJSON(w, rec.Code, d)
			},
		})
	}
}

// sharingInstances applies what is applied to one instance to every
// other instance too.
func sharingInstances(inner http.Handler) http.Handler {
	var mu sync.Mutex
	names := map[string]bool{}
	instanceOf := func(body []byte) string {
		var x struct{ Instance string }
		_ = json.Unmarshal(body, &x)
		return x.Instance
	}
	return tampered(inner, map[string]func(http.ResponseWriter, *http.Request, []byte){
		remote.PathCreateInstance: func(w http.ResponseWriter, r *http.Request, body []byte) {
			rec := forward(inner, r.Method, r.URL.Path, body)
			if rec.Code == http.StatusOK {
				mu.Lock()
				names[instanceOf(body)] = true
				mu.Unlock()
			}
			relay(w, rec)
		},
		remote.PathDropInstance: func(w http.ResponseWriter, r *http.Request, body []byte) {
			mu.Lock()
			delete(names, instanceOf(body))
			mu.Unlock()
			relay(w, forward(inner, r.Method, r.URL.Path, body))
		},
		remote.PathApply: func(w http.ResponseWriter, r *http.Request, body []byte) {
			rec := forward(inner, r.Method, r.URL.Path, body)
			if in := instanceOf(body); in != "" {
				var req map[string]any
				Expect(json.Unmarshal(body, &req)).To(Succeed())
				mu.Lock()
				for other := range names {
					if other != in {
						req["instance"] = other
						b, _ := json.Marshal(req)
						forward(inner, r.Method, r.URL.Path, b)
					}
				}
				mu.Unlock()
			}
			relay(w, rec)
		},
	})
}

var _ = Describe("the world conformance kit on broken worlds", func() {
	DescribeTable("fails exactly the rule a world breaks, naming it and what it saw",
		func(ctx SpecContext, breakIt func(inner http.Handler) http.Handler, rule, evidence string, skipped ...string) {
			url := serve(breakIt(cloudServer(ctx)))
			report := worldtest.Check(ctx, url, worldtest.Options{})
			got, text := verdicts(report)
			GinkgoWriter.Println(text)
			others := map[string]worldtest.Verdict{rule: worldtest.Fail, "crash-reconciled": worldtest.Skip}
			for _, s := range skipped {
				others[s] = worldtest.Skip
			}
			Expect(got).To(Equal(want(others)), text)
			Expect(report.Failed()).To(HaveLen(1))
			Expect(report.Failed()[0].String()).To(HavePrefix("FAIL " + rule + ": "))
			Expect(report.Failed()[0].Evidence).To(ContainSubstring(evidence))
			Expect(report.OK()).To(BeFalse())
			Expect(report.Err).NotTo(HaveOccurred(), "the check was complete: the world failed it")
		},
		Entry("describe answers another protocol", describing(func(d map[string]any) { d["protocol"] = "overnight-world/0" }),
			"describe", `protocol is "overnight-world/0"; want "overnight-world/1"`),
		Entry("describe flags a read-only kind with an identity", describing(func(d map[string]any) {
			kinds := d["versions"].([]any)[0].(map[string]any)["kinds"].([]any)
			for _, k := range kinds {
				if k := k.(map[string]any); k["name"] == "cloud.list" {
					k["identity"] = "args.kind"
				}
			}
		}), "describe", `version v1, kind "cloud.list" is read_only with identity "args.kind": a read creates no resource to name`),
		Entry("an example fails on a fresh instance", describing(func(d map[string]any) {
			d["examples"] = append(d["examples"].([]any), map[string]any{"kind": "cloud.create_database", "args": map[string]any{"name": "db-x", "network_id": "net-9"}})
		}), "examples", `example 8: apply cloud.create_database {"name":"db-x","network_id":"net-9"}`,
			"same-key-twice", "lookup-after-apply", "instance-restore", "instance-isolation"),
		Entry("a repeated key creates again, and describe says every kind is idempotent", describing(func(d map[string]any) {
			for _, v := range d["versions"].([]any) {
				for _, k := range v.(map[string]any)["kinds"].([]any) {
					k.(map[string]any)["idempotent"] = true
				}
			}
		}), "same-key-twice", "kind cloud.create_network is declared idempotent, and the repeat"),
		Entry("a repeated key creates again, and duplicates hides it", func(inner http.Handler) http.Handler {
			return tampered(inner, map[string]func(http.ResponseWriter, *http.Request, []byte){
				remote.PathDuplicates: func(w http.ResponseWriter, _ *http.Request, _ []byte) {
					answerJSON(w, 200, map[string]any{"duplicates": []any{}})
				},
			})
		}, "same-key-twice", "the repeat made a second resource"),
		Entry("lookup never finds a key", func(inner http.Handler) http.Handler {
			return tampered(inner, map[string]func(http.ResponseWriter, *http.Request, []byte){
				remote.PathLookup: func(w http.ResponseWriter, r *http.Request, body []byte) {
					rec := forward(inner, r.Method, r.URL.Path, body)
					if rec.Code == http.StatusOK {
						answerJSON(w, 200, map[string]any{"found": false})
						return
					}
					relay(w, rec)
				},
			})
		}, "lookup-after-apply", "answered found=false; the apply of example 1 (cloud.create_network)"),
		Entry("lookup finds a key never applied", func(inner http.Handler) http.Handler {
			return tampered(inner, map[string]func(http.ResponseWriter, *http.Request, []byte){
				remote.PathLookup: func(w http.ResponseWriter, r *http.Request, body []byte) {
					rec := forward(inner, r.Method, r.URL.Path, body)
					var got remote.LookupResponse
					Expect(json.Unmarshal(rec.Body.Bytes(), &got)).To(Succeed())
					if rec.Code == 200 && !got.Found {
						answerJSON(w, 200, map[string]any{"found": true, "outcome": map[string]any{"status": "done", "result": map[string]any{}}})
						return
					}
					relay(w, rec)
				},
			})
		}, "lookup-unknown", "never applied, answered found=true with"),
		Entry("a doctored ledger makes an instance all the same", func(inner http.Handler) http.Handler {
			return tampered(inner, map[string]func(http.ResponseWriter, *http.Request, []byte){
				remote.PathCreateInstance: func(w http.ResponseWriter, r *http.Request, body []byte) {
					rec := forward(inner, r.Method, r.URL.Path, body)
					if rec.Code == http.StatusConflict {
						var req map[string]any
						Expect(json.Unmarshal(body, &req)).To(Succeed())
						delete(req, "ledger")
						b, _ := json.Marshal(req)
						rec = forward(inner, r.Method, r.URL.Path, b)
					}
					relay(w, rec)
				},
			})
		}, "instance-restore", "from a doctored ledger (entry 1's outcome replaced by a failure the world never answered): answered 200"),
		Entry("instances share what is applied to them", sharingInstances,
			"instance-isolation", "changed instance worldtest-"),
		Entry("a body it cannot read is answered 500 in plain text", func(inner http.Handler) http.Handler {
			return tampered(inner, map[string]func(http.ResponseWriter, *http.Request, []byte){
				remote.PathApply: func(w http.ResponseWriter, r *http.Request, body []byte) {
					if !json.Valid(body) {
						http.Error(w, "something went wrong", http.StatusInternalServerError)
						return
					}
					relay(w, forward(inner, r.Method, r.URL.Path, body))
				},
			})
		}, "error-shape", "apply with a body cut short (POST /v1/apply): answered 500 something went wrong; want 400"),
	)
})

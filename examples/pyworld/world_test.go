package pyworld_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

var t0 = time.Date(2025, 1, 6, 9, 0, 0, 0, time.UTC)

// created is create_instance's answer.
type created struct {
	Instance string `json:"instance"`
	Seq      int64  `json:"seq"`
}

// apply sends one effect request to an instance of w and returns the answer.
func apply(w *pyWorld, instance, key, kind string, args any) remote.ApplyResponse {
	GinkgoHelper()
	raw, err := json.Marshal(args)
	Expect(err).NotTo(HaveOccurred())
	var res remote.ApplyResponse
	w.must(remote.PathApply, remote.ApplyRequest{Instance: instance, Key: key, Kind: kind, Args: raw, Now: t0}, &res)
	return res
}

func ledger(w *pyWorld, instance string) []world.LedgerEntry {
	GinkgoHelper()
	var res remote.LedgerResponse
	w.must(remote.PathLedger, remote.InstanceRequest{Instance: instance}, &res)
	return res.Entries
}

func state(w *pyWorld, instance string) remote.StateResponse {
	GinkgoHelper()
	var res remote.StateResponse
	w.must(remote.PathState, remote.InstanceRequest{Instance: instance}, &res)
	return res
}

func goal(w *pyWorld, task string) remote.GoalResponse {
	GinkgoHelper()
	var res remote.GoalResponse
	w.must(remote.PathGoal, remote.GoalRequest{Task: json.RawMessage(task)}, &res)
	return res
}

func duplicates(w *pyWorld) []world.Duplicate {
	GinkgoHelper()
	var res remote.DuplicatesResponse
	w.must(remote.PathDuplicates, remote.InstanceRequest{}, &res)
	return res.Duplicates
}

// refusal posts body to path and expects the call refused with status and
// code; it returns the message.
func refusal(w *pyWorld, path string, body any, status int, code string) string {
	GinkgoHelper()
	var eb remote.ErrorBody
	Expect(w.post(path, body, &eb)).To(Equal(status), "POST %s %v", path, body)
	Expect(eb.Error.Code).To(Equal(code), "POST %s: %s", path, eb.Error.Message)
	Expect(eb.Error.Message).NotTo(BeEmpty())
	return eb.Error.Message
}

// failedWith expects a failed outcome with an error of status and code.
func failedWith(o world.Outcome, status int, code string) *protocol.EffectError {
	GinkgoHelper()
	Expect(o.Status).To(Equal(protocol.StatusFailed))
	Expect(o.Error).NotTo(BeNil())
	Expect(o.Error.Code).To(Equal(code), o.Error.Message)
	Expect(o.Error.Status).To(Equal(status))
	Expect(o.Error.Transient).To(BeFalse(), "a 4xx refusal is permanent")
	return o.Error
}

// expectKind checks what describe says of one kind.
func expectKind(k world.KindInfo, name string, idempotent, readOnly, destructive bool, identity string) {
	GinkgoHelper()
	Expect(k.Name).To(Equal(name))
	Expect([]bool{k.Idempotent, k.ReadOnly, k.Destructive}).To(Equal([]bool{idempotent, readOnly, destructive}), "%s: idempotent, read_only, destructive", name)
	Expect(k.Identity).To(Equal(identity), name)
	Expect(k.Args).NotTo(BeEmpty(), name)
	Expect(k.Result).NotTo(BeEmpty(), name)
	Expect(k.Doc).NotTo(BeEmpty(), name)
}

// expectEntry checks a ledger entry's key, kind, args and resource.
func expectEntry(e world.LedgerEntry, key, kind, args, resource string) {
	GinkgoHelper()
	Expect(e.Key).To(Equal(key))
	Expect(e.Kind).To(Equal(kind))
	Expect(e.Args).To(MatchJSON(args))
	Expect(e.Resource).To(Equal(resource))
}

func result(o world.Outcome) map[string]any {
	GinkgoHelper()
	Expect(o.Status).To(Equal(protocol.StatusDone), "outcome %+v", o.Error)
	var m map[string]any
	Expect(json.Unmarshal(o.Result, &m)).To(Succeed())
	return m
}

var _ = Describe("inventory.py over the world protocol", func() {
	var w *pyWorld
	BeforeEach(func() {
		w = startWorld(nil, "--addr", "127.0.0.1:0", "--data", GinkgoT().TempDir())
	})

	It("describes itself: protocol, name, two versions and their kinds, capabilities", func() {
		var d remote.Description
		w.must(remote.PathDescribe, map[string]any{}, &d)
		resp, err := httpClient.Get(w.URL + remote.PathDescribe)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK), "describe also answers GET")
		var viaGet remote.Description
		Expect(json.NewDecoder(resp.Body).Decode(&viaGet)).To(Succeed())
		Expect(viaGet).To(Equal(d))

		Expect(d.Protocol).To(Equal(remote.Protocol))
		Expect(d.Name).To(Equal("inventory"))
		Expect(d.Capabilities).To(Equal(remote.Capabilities{Goal: true, Duplicates: true, Versions: true, Instances: true}))
		Expect(d.Versions).To(HaveLen(2))
		Expect(d.Versions[0].Name).To(Equal("v1"), "a new world starts in the first version")
		Expect(d.Versions[1].Name).To(Equal("v2"))
		for _, v := range d.Versions {
			Expect(v.Kinds).To(HaveLen(3))
			add, reserve, get := v.Kinds[0], v.Kinds[1], v.Kinds[2]
			expectKind(add, "inventory.add_item", false, false, false, "args.sku")
			expectKind(reserve, "inventory.reserve", false, false, true, "args.order")
			expectKind(get, "inventory.get_item", true, true, false, "")
		}
		Expect(d.Versions[0].Kinds[0].Args).To(Equal("{sku, name, quantity}"))
		Expect(d.Versions[1].Kinds[0].Args).To(Equal("{sku, name, count}"))
	})

	It("records every request with its key and answers lookup with the last outcome of the key", func() {
		add := apply(w, "", "k/step-1/0", "inventory.add_item", map[string]any{"sku": "A-1", "name": "widget", "quantity": 10})
		Expect(add.Seq).To(Equal(int64(1)))
		Expect(result(add.Outcome)).To(Equal(map[string]any{"id": "item-1", "sku": "A-1", "name": "widget", "quantity": 10.0}))

		tooMany := apply(w, "", "k/r", "inventory.reserve", map[string]any{"sku": "A-1", "quantity": 30, "order": "order-7"})
		Expect(tooMany.Seq).To(Equal(int64(2)))
		e := failedWith(tooMany.Outcome, 409, "insufficient_stock")
		Expect(e.Details).To(MatchJSON(`{"sku": "A-1", "requested": 30, "available": 10}`))
		// The same key again: the world records it again, as a new entry;
		// deciding what is a retry is the harness's job, not the world's.
		fits := apply(w, "", "k/r", "inventory.reserve", map[string]any{"sku": "A-1", "quantity": 3, "order": "order-7"})
		Expect(fits.Seq).To(Equal(int64(3)))
		Expect(result(fits.Outcome)).To(HaveKeyWithValue("available", 7.0))

		var found remote.LookupResponse
		w.must(remote.PathLookup, remote.LookupRequest{Key: "k/r"}, &found)
		Expect(found.Found).To(BeTrue())
		Expect(*found.Outcome).To(Equal(fits.Outcome), "lookup answers the last outcome of the key")
		w.must(remote.PathLookup, remote.LookupRequest{Key: "k/step-1/0"}, &found)
		Expect(*found.Outcome).To(Equal(add.Outcome))
		var missing remote.LookupResponse
		w.must(remote.PathLookup, remote.LookupRequest{Key: "k/never-sent"}, &missing)
		Expect(missing).To(Equal(remote.LookupResponse{Found: false}))
		w.must(remote.PathLookup, remote.LookupRequest{Key: ""}, &missing)
		Expect(missing).To(Equal(remote.LookupResponse{Found: false}), "the key of world events finds nothing")

		entries := ledger(w, "")
		Expect(entries).To(HaveLen(3))
		for i, e := range entries {
			Expect(e.Seq).To(Equal(int64(i + 1)))
			Expect(e.At).To(BeTemporally("==", t0))
			Expect(e.IsEvent()).To(BeFalse())
		}
		expectEntry(entries[0], "k/step-1/0", "inventory.add_item", `{"sku": "A-1", "name": "widget", "quantity": 10}`, "item-1")
		Expect(entries[0].Outcome).To(Equal(add.Outcome))
		expectEntry(entries[1], "k/r", "inventory.reserve", `{"sku": "A-1", "quantity": 30, "order": "order-7"}`, "")
		Expect(entries[1].Outcome).To(Equal(tooMany.Outcome))
		expectEntry(entries[2], "k/r", "inventory.reserve", `{"sku": "A-1", "quantity": 3, "order": "order-7"}`, "res-1")

		get := apply(w, "", "k/get", "inventory.get_item", map[string]any{"sku": "A-1"})
		Expect(result(get.Outcome)).To(Equal(map[string]any{
			"sku": "A-1", "name": "widget", "quantity": 10.0, "reserved": 3.0, "available": 7.0, "ids": []any{"item-1"},
		}))
	})

	It("serves concurrent requests one at a time: a gapless ledger, each request recorded once", func() {
		const clients, each = 6, 5
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for i := range each {
					sku := fmt.Sprintf("S-%d-%d", c, i)
					apply(w, "", "k/"+sku, "inventory.add_item", map[string]any{"sku": sku, "name": "thing", "quantity": 1})
					var found remote.LookupResponse
					w.must(remote.PathLookup, remote.LookupRequest{Key: "k/" + sku}, &found)
					Expect(found.Found).To(BeTrue(), "lookup of a key already answered")
				}
			}()
		}
		wg.Wait()
		entries := ledger(w, "")
		Expect(entries).To(HaveLen(clients * each))
		keys, resources := map[string]bool{}, map[string]bool{}
		for i, e := range entries {
			Expect(e.Seq).To(Equal(int64(i + 1)))
			keys[e.Key], resources[e.Resource] = true, true
		}
		Expect(keys).To(HaveLen(clients * each))
		Expect(resources).To(HaveLen(clients*each), "each add made its own item")
		Expect(duplicates(w)).To(BeEmpty())
	})

	It("refuses bad effects as failed outcomes, recorded in the ledger, 4xx and permanent", func() {
		failedWith(apply(w, "", "k/1", "inventory.restock", map[string]any{}).Outcome, 400, "unknown_kind")
		failedWith(apply(w, "", "k/2", "inventory.add_item", map[string]any{"sku": "A-1", "name": "w", "quantity": 0}).Outcome, 400, "invalid_argument")
		e := failedWith(apply(w, "", "k/3", "inventory.add_item", map[string]any{"sku": "A-1", "name": "w", "quantity": 1, "colour": "red"}).Outcome, 400, "invalid_argument")
		Expect(e.Message).To(ContainSubstring("colour"))
		failedWith(apply(w, "", "k/4", "inventory.add_item", []int{1}).Outcome, 400, "invalid_argument")
		failedWith(apply(w, "", "k/5", "inventory.reserve", map[string]any{"sku": "Z-9", "quantity": 1, "order": "o-1"}).Outcome, 404, "not_found")
		failedWith(apply(w, "", "k/6", "inventory.get_item", map[string]any{"sku": "Z-9"}).Outcome, 404, "not_found")
		entries := ledger(w, "")
		Expect(entries).To(HaveLen(6))
		for i, e := range entries {
			Expect(e.Outcome.Status).To(Equal(protocol.StatusFailed), "entry %d", i)
			Expect(e.Resource).To(BeEmpty())
		}
		Expect(state(w, "").State).To(MatchJSON(`{"api_version": "v1", "items": [], "reservations": [], "stock": {}}`), "a refusal changes nothing")
	})

	It("reports a sku added twice under two keys as a duplicate, and judges the goal from its state", func() {
		task := `{"items": [{"sku": "A-1", "quantity": 10}], "reservations": ["order-7"]}`
		Expect(duplicates(w)).To(BeEmpty())
		check := goal(w, task)
		Expect(check.OK).To(BeFalse())
		Expect(check.Detail).To(Equal("A-1 is not stocked; order order-7 has no reservation"))

		apply(w, "", "k/1", "inventory.add_item", map[string]any{"sku": "A-1", "name": "widget", "quantity": 10})
		apply(w, "", "k/2", "inventory.reserve", map[string]any{"sku": "A-1", "quantity": 3, "order": "order-7"})
		Expect(goal(w, task)).To(Equal(world.Check{OK: true, Detail: "A-1: 10 stocked (3 reserved, 7 available); order order-7: 3 of A-1 (res-1)"}))
		Expect(goal(w, `{"reservations": [{"order": "order-7", "sku": "A-1", "quantity": 4}]}`)).To(Equal(world.Check{Detail: "order order-7 reserves 3 of A-1, want 4"}))

		apply(w, "", "k/3", "inventory.add_item", map[string]any{"sku": "A-1", "name": "widget", "quantity": 10})
		Expect(duplicates(w)).To(Equal([]world.Duplicate{{Kind: "item", Name: "A-1", IDs: []string{"item-1", "item-2"}, Keys: []string{"k/1", "k/3"}, Count: 2}}))
		Expect(goal(w, task)).To(Equal(world.Check{Detail: "A-1 has 20 stocked in 2 record(s), want 10"}))

		apply(w, "", "k/4", "inventory.reserve", map[string]any{"sku": "A-1", "quantity": 3, "order": "order-7"})
		Expect(duplicates(w)).To(ContainElement(world.Duplicate{Kind: "reservation", Name: "order-7", IDs: []string{"res-1", "res-2"}, Keys: []string{"k/2", "k/4"}, Count: 2}))
		Expect(goal(w, `{"reservations": ["order-7"]}`).Detail).To(Equal("order order-7 is reserved 2 times (res-1, res-2)"))

		Expect(refusal(w, remote.PathGoal, map[string]any{"task": map[string]any{"items": []any{map[string]any{"sku": 5}}}}, 400, remote.CodeBadRequest)).
			To(HavePrefix("task.items[0].sku:"))
		Expect(refusal(w, remote.PathGoal, map[string]any{"task": map[string]any{}}, 400, remote.CodeBadRequest)).
			To(ContainSubstring("nothing to judge"))
		Expect(refusal(w, remote.PathGoal, map[string]any{}, 400, remote.CodeBadRequest)).To(HavePrefix("task:"))
	})

	It("switches API version as a world event; v2 refuses the renamed field with details saying how to correct it", func() {
		var sv remote.SetVersionResponse
		w.must(remote.PathSetVersion, remote.SetVersionRequest{Version: "v2", Now: t0}, &sv)
		Expect(sv).To(Equal(remote.SetVersionResponse{Previous: "v1", Version: "v2"}))
		w.must(remote.PathSetVersion, remote.SetVersionRequest{Version: "v2", Now: t0}, &sv)
		Expect(sv).To(Equal(remote.SetVersionResponse{Previous: "v2", Version: "v2"}))
		Expect(refusal(w, remote.PathSetVersion, remote.SetVersionRequest{Version: "v3"}, 400, remote.CodeUnknownVersion)).To(ContainSubstring("v1, v2"))
		Expect(state(w, "").APIVersion).To(Equal("v2"))

		e := failedWith(apply(w, "", "k/1", "inventory.add_item", map[string]any{"sku": "A-1", "name": "widget", "quantity": 10}).Outcome, 400, "field_renamed")
		Expect(e.Details).To(MatchJSON(`{"renamed": {"quantity": "count"}}`))
		Expect(result(apply(w, "", "k/2", "inventory.add_item", map[string]any{"sku": "A-1", "name": "widget", "count": 10}).Outcome)).To(HaveKeyWithValue("quantity", 10.0))

		entries := ledger(w, "")
		Expect(entries).To(HaveLen(3), "one event (the repeated switch records nothing) and two requests")
		Expect(entries[0].IsEvent()).To(BeTrue())
		expectEntry(entries[0], "", world.EventAPIVersion, `{"version": "v2"}`, "")
		Expect(entries[0].Outcome.Result).To(MatchJSON(`{"previous": "v1", "version": "v2"}`))
		var found remote.LookupResponse
		w.must(remote.PathLookup, remote.LookupRequest{Key: "k/2"}, &found)
		Expect(found.Found).To(BeTrue())
	})

	It("keeps instances isolated from the real world, and restores one from a ledger, refusing a ledger that replays otherwise", func() {
		apply(w, "", "k/1", "inventory.add_item", map[string]any{"sku": "A-1", "name": "widget", "quantity": 10})
		apply(w, "", "k/2", "inventory.reserve", map[string]any{"sku": "A-1", "quantity": 30, "order": "order-7"}) // refused
		apply(w, "", "k/3", "inventory.reserve", map[string]any{"sku": "A-1", "quantity": 3, "order": "order-7"})
		w.must(remote.PathSetVersion, remote.SetVersionRequest{Version: "v2", Now: t0}, nil)
		apply(w, "", "k/4", "inventory.add_item", map[string]any{"sku": "B-2", "name": "gadget", "count": 5})
		real := ledger(w, "")
		realState := state(w, "")

		var c created
		w.must(remote.PathCreateInstance, remote.CreateInstanceRequest{Instance: "scratch"}, &c)
		Expect(c).To(Equal(created{Instance: "scratch", Seq: 0}))
		Expect(state(w, "scratch").APIVersion).To(Equal("v1"), "a new instance starts in the first version, empty")
		Expect(state(w, "scratch").State).To(MatchJSON(`{"api_version": "v1", "items": [], "reservations": [], "stock": {}}`))
		Expect(apply(w, "scratch", "k/s1", "inventory.add_item", map[string]any{"sku": "A-1", "name": "widget", "quantity": 1}).Seq).To(Equal(int64(1)))
		Expect(ledger(w, "")).To(Equal(real), "the real world does not see an instance's requests")
		Expect(state(w, "")).To(Equal(realState))
		refusal(w, remote.PathCreateInstance, remote.CreateInstanceRequest{Instance: "scratch"}, 409, remote.CodeInstanceExists)

		w.must(remote.PathCreateInstance, remote.CreateInstanceRequest{Instance: "shadow", Ledger: real}, &c)
		Expect(c).To(Equal(created{Instance: "shadow", Seq: int64(len(real))}))
		Expect(ledger(w, "shadow")).To(Equal(real), "a restored instance holds the same ledger")
		Expect(state(w, "shadow")).To(Equal(realState), "and the same state")
		apply(w, "shadow", "k/5", "inventory.reserve", map[string]any{"sku": "B-2", "count": 1, "order": "order-8"})
		Expect(ledger(w, "")).To(Equal(real))

		// A ledger doctored to say that reserving 30 of A-1 worked: the
		// replay answers insufficient_stock, and no instance is left.
		doctored := append([]world.LedgerEntry(nil), real...)
		doctored[1].Outcome = world.Outcome{Status: protocol.StatusDone, Result: json.RawMessage(`{"id":"res-1","order":"order-7","sku":"A-1","quantity":30,"available":-20}`)}
		msg := refusal(w, remote.PathCreateInstance, remote.CreateInstanceRequest{Instance: "doctored", Ledger: doctored}, 409, remote.CodeReplayDiffers)
		Expect(msg).To(ContainSubstring("ledger[1] (seq 2, inventory.reserve"))
		Expect(msg).To(ContainSubstring("insufficient_stock"))
		refusal(w, remote.PathState, remote.InstanceRequest{Instance: "doctored"}, 404, remote.CodeUnknownInstance)

		w.must(remote.PathDropInstance, remote.InstanceRequest{Instance: "shadow"}, nil)
		refusal(w, remote.PathLedger, remote.InstanceRequest{Instance: "shadow"}, 404, remote.CodeUnknownInstance)
		refusal(w, remote.PathDropInstance, remote.InstanceRequest{Instance: "shadow"}, 404, remote.CodeUnknownInstance)
		refusal(w, remote.PathDropInstance, remote.InstanceRequest{Instance: ""}, 400, remote.CodeBadRequest)
		refusal(w, remote.PathCreateInstance, remote.CreateInstanceRequest{Instance: ""}, 400, remote.CodeBadRequest)
		Expect(ledger(w, "")).To(Equal(real))
	})

	It("refuses malformed calls and unknown instances and paths in the documented error shape", func() {
		Expect(refusal(w, remote.PathApply, "{not json", 400, remote.CodeBadRequest)).To(HavePrefix("body: not valid JSON"))
		Expect(refusal(w, remote.PathApply, "[1, 2]", 400, remote.CodeBadRequest)).To(HavePrefix("body: want a JSON object"))
		Expect(refusal(w, remote.PathApply, map[string]any{"key": "k/1", "args": map[string]any{}}, 400, remote.CodeBadRequest)).To(HavePrefix("kind:"))
		Expect(refusal(w, remote.PathApply, map[string]any{"kind": "inventory.get_item"}, 400, remote.CodeBadRequest)).To(HavePrefix("key:"))
		Expect(refusal(w, remote.PathApply, map[string]any{"instance": 7, "key": "k", "kind": "inventory.get_item"}, 400, remote.CodeBadRequest)).To(HavePrefix("instance:"))
		Expect(refusal(w, remote.PathApply, map[string]any{"key": "k", "kind": "inventory.get_item", "now": "yesterday"}, 400, remote.CodeBadRequest)).To(HavePrefix("now:"))
		Expect(refusal(w, remote.PathLookup, map[string]any{"key": 7}, 400, remote.CodeBadRequest)).To(HavePrefix("key:"))
		Expect(refusal(w, remote.PathSetVersion, map[string]any{}, 400, remote.CodeBadRequest)).To(HavePrefix("version:"))
		Expect(refusal(w, remote.PathCreateInstance, map[string]any{"instance": "x", "ledger": "all of it"}, 400, remote.CodeBadRequest)).To(HavePrefix("ledger:"))
		Expect(ledger(w, "")).To(BeEmpty(), "a refused call records nothing")

		for _, path := range []string{remote.PathApply, remote.PathLookup, remote.PathLedger, remote.PathState, remote.PathGoal, remote.PathDuplicates, remote.PathSetVersion} {
			body := map[string]any{"instance": "nowhere", "key": "k/1", "kind": "inventory.get_item", "task": map[string]any{"reservations": []string{"o"}}, "version": "v2"}
			Expect(refusal(w, path, body, 404, remote.CodeUnknownInstance)).To(ContainSubstring(`"nowhere"`), path)
		}

		refusal(w, "/v1/nothing", map[string]any{}, 404, "not_found")
		resp, err := httpClient.Get(w.URL + remote.PathApply)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Body.Close()).To(Succeed())
		Expect(resp.StatusCode).To(Equal(http.StatusMethodNotAllowed))
		Expect(resp.Header.Get("Allow")).To(Equal("POST"))
	})
})

var _ = Describe("inventory.py's durability and configuration", func() {
	It("keeps its ledger and state across a SIGKILL: everything it answered was durable", func() {
		dir := GinkgoT().TempDir()
		w := startWorld(nil, "--addr", "127.0.0.1:0", "--data", dir)
		apply(w, "", "k/1", "inventory.add_item", map[string]any{"sku": "A-1", "name": "widget", "quantity": 10})
		w.must(remote.PathSetVersion, remote.SetVersionRequest{Version: "v2", Now: t0}, nil)
		last := apply(w, "", "k/2", "inventory.reserve", map[string]any{"sku": "A-1", "count": 3, "order": "order-7"})
		before, beforeState := ledger(w, ""), state(w, "")
		w.kill()

		again := startWorld(nil, "--addr", "127.0.0.1:0", "--data", dir)
		Expect(ledger(again, "")).To(Equal(before))
		Expect(state(again, "")).To(Equal(beforeState))
		Expect(beforeState.APIVersion).To(Equal("v2"))
		var found remote.LookupResponse
		again.must(remote.PathLookup, remote.LookupRequest{Key: "k/2"}, &found)
		Expect(found.Found).To(BeTrue())
		Expect(*found.Outcome).To(Equal(last.Outcome))
		Expect(apply(again, "", "k/3", "inventory.get_item", map[string]any{"sku": "A-1"}).Seq).To(Equal(int64(4)), "the seq goes on")
	})

	It("takes its address and data directory from $OVERNIGHT_WORLD_ADDR and $OVERNIGHT_WORLD_DATA", func() {
		dir := filepath.Join(GinkgoT().TempDir(), "not-yet")
		w := startWorld([]string{"OVERNIGHT_WORLD_ADDR=127.0.0.1:0", "OVERNIGHT_WORLD_DATA=" + dir})
		Expect(w.URL).To(MatchRegexp(`^http://127\.0\.0\.1:[1-9][0-9]*$`))
		apply(w, "", "k/1", "inventory.add_item", map[string]any{"sku": "A-1", "name": "widget", "quantity": 1})
		Expect(filepath.Join(dir, "inventory.db")).To(BeARegularFile(), "the data directory is made if missing")
		Expect(w.stderr.String()).NotTo(ContainSubstring("in memory"))
	})

	It("without a data directory keeps the world in memory, and says so on stderr", func() {
		w := startWorld([]string{"OVERNIGHT_WORLD_ADDR=127.0.0.1:0"})
		Eventually(w.stderr.String).WithTimeout(5 * time.Second).Should(ContainSubstring("kept in memory"))
		apply(w, "", "k/1", "inventory.add_item", map[string]any{"sku": "A-1", "name": "widget", "quantity": 1})
		Expect(ledger(w, "")).To(HaveLen(1))
		entries, err := os.ReadDir(".")
		Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			Expect(e.Name()).NotTo(HaveSuffix(".db"), "nothing is written to the working directory")
		}
	})
})

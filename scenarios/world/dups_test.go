package world_test

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
)

var _ = Describe("DupIndex", func() {
	// byName names an entry by its args' name; kind notes.get never counts.
	byName := func(_ context.Context, e world.LedgerEntry) (string, bool, error) {
		if e.Kind == "notes.get" {
			return "", false, nil
		}
		var a struct{ Name string }
		err := json.Unmarshal(e.Args, &a)
		return a.Name, true, err
	}
	seq := int64(0)
	entry := func(kind, key, name, status string) world.LedgerEntry {
		seq++
		return world.LedgerEntry{Seq: seq, Key: key, Kind: kind, Args: json.RawMessage(`{"name":"` + name + `"}`), Outcome: world.Outcome{Status: status}}
	}

	It("lists the groups done under more than one key, in the order their first entries came, as they become duplicates", func(ctx SpecContext) {
		x := world.NewDupIndex(byName)
		add := func(e world.LedgerEntry) { Expect(x.Add(ctx, e)).To(Succeed()) }
		names := func() []string {
			var out []string
			for _, d := range x.Duplicates() {
				out = append(out, d.Name)
				Expect(d.Keys).To(HaveLen(d.Count))
				Expect(d.IDs).To(HaveLen(d.Count))
			}
			return out
		}
		add(entry("notes.put", "k1", "a", protocol.StatusDone))
		add(entry("notes.put", "k2", "b", protocol.StatusDone))
		add(entry("notes.put", "k3", "c", protocol.StatusDone))
		add(entry("notes.put", "k3", "c", protocol.StatusDone)) // the same key: one effect
		add(entry("notes.put", "k4", "c", protocol.StatusFailed))
		add(entry("notes.get", "k5", "a", protocol.StatusDone))
		Expect(names()).To(BeEmpty())

		add(entry("notes.put", "k6", "c", protocol.StatusDone))
		Expect(names()).To(Equal([]string{"c"}))
		add(entry("notes.put", "k7", "a", protocol.StatusDone))
		Expect(names()).To(Equal([]string{"a", "c"}), "a came first, though c was a duplicate first")
		add(entry("notes.put", "k8", "a", protocol.StatusDone))
		add(entry("notes.put", "k9", "b", protocol.StatusDone))
		Expect(names()).To(Equal([]string{"a", "b", "c"}))

		d := x.Duplicates()[0]
		Expect(d.Count).To(Equal(3))
		Expect(d.Keys).To(Equal([]string{"k1", "k7", "k8"}))
		Expect(d.IDs).To(Equal([]string{"ledger#1", "ledger#8", "ledger#9"}))
		d.Keys[0] = "changed"
		Expect(x.Duplicates()[0].Keys[0]).To(Equal("k1"), "the caller gets copies")
	})
})

package world_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"

	"github.com/overnight-dev/overnight/scenarios/world"
)

// notes is the smallest model: notes.put creates a note (not idempotent),
// notes.get reads one. It has no optional capability but what a spec adds.
type notes struct {
	mu    sync.Mutex
	items map[string]string
	n     int
}

func openNotes(_ context.Context, state world.Reader, _ map[string]any) (world.Model, error) {
	m := &notes{items: map[string]string{}}
	err := state.Scan([]byte("note/"), func(k, v []byte) error {
		m.items[strings.TrimPrefix(string(k), "note/")] = string(v)
		m.n++
		return nil
	})
	return m, err
}

func (m *notes) Name() string { return "notes" }

func (m *notes) Kinds() []world.KindInfo {
	return []world.KindInfo{{Name: "notes.put", Identity: "args.text"}, {Name: "notes.get", ReadOnly: true, Idempotent: true}}
}

func (m *notes) Apply(_ context.Context, req world.Request) (world.Outcome, world.Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var a struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.Args, &a); err != nil {
		return world.Failed(400, "bad_args", "%v", err), world.Change{}, nil
	}
	switch req.Kind {
	case "notes.put":
		id := fmt.Sprintf("n%d", m.n+1)
		out, err := world.Done(map[string]string{"id": id})
		return out, world.Change{Resource: id, Writes: []world.Entry{{Key: []byte("note/" + id), Value: []byte(a.Text)}},
			Commit: func() { m.mu.Lock(); defer m.mu.Unlock(); m.items[id] = a.Text; m.n++ }}, err
	case "notes.get":
		text, ok := m.items[a.ID]
		if !ok {
			return world.Failed(404, "not_found", "no note %q", a.ID), world.Change{}, nil
		}
		out, err := world.Done(map[string]string{"text": text})
		return out, world.Change{}, err
	}
	return world.Failed(400, "unknown_kind", "%s", req.Kind), world.Change{}, nil
}

// sneaky writes into the ledger's own key space.
type sneaky struct{ notes }

func (s *sneaky) Apply(context.Context, world.Request) (world.Outcome, world.Change, error) {
	o, _ := world.Done(nil)
	return o, world.Change{Writes: []world.Entry{{Key: []byte("ledger/0000000000000009"), Value: []byte("{}")}}}, nil
}

// versioned notes have two API versions.
type versioned struct {
	notes
	version string
}

func (v *versioned) APIVersion() string { return v.version }

func (v *versioned) SwitchAPIVersion(_ context.Context, version string, _ time.Time) (string, world.Change, error) {
	if version != "v1" && version != "v2" {
		return "", world.Change{}, fmt.Errorf("%w %q", world.ErrUnknownAPIVersion, version)
	}
	prev := v.version
	if prev == version {
		return prev, world.Change{}, nil
	}
	return prev, world.Change{Writes: []world.Entry{{Key: []byte("version"), Value: []byte(version)}}, Commit: func() { v.version = version }}, nil
}

// countingStore is a MemStore that counts its commits, keeps each commit's
// keys, and fails the next commit when told to.
type countingStore struct {
	*world.MemStore
	commits [][]string
	failing bool
}

func (c *countingStore) Commit(ctx context.Context, entries ...world.Entry) error {
	if c.failing {
		c.failing = false
		return errors.New("the disk is gone")
	}
	var keys []string
	for _, e := range entries {
		keys = append(keys, string(e.Key))
	}
	c.commits = append(c.commits, keys)
	return c.MemStore.Commit(ctx, entries...)
}

var _ = Describe("a model wrapped in the durable ledger", func() {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	open := func(store world.Store, m world.Model) world.World {
		GinkgoHelper()
		w, err := world.Wrap(m, store, []byte("w/"))
		Expect(err).NotTo(HaveOccurred())
		return w
	}
	put := func(w world.World, key, text string) (world.Outcome, error) {
		return w.Execute(ctx, world.Request{Key: key, Kind: "notes.put", Args: json.RawMessage(`{"text":"` + text + `"}`), Now: now})
	}

	It("commits the model's change with the request's ledger entry and its key's outcome, in one commit", func() {
		store := &countingStore{MemStore: world.NewMemStore()}
		m, err := openNotes(ctx, world.NewMemStore(), nil)
		Expect(err).NotTo(HaveOccurred())
		w := open(store, m)
		out, err := put(w, "k/step-1/0", "hello")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out.Result)).To(Equal(`{"id":"n1"}`))
		Expect(store.commits).To(Equal([][]string{{"w/note/n1", "w/ledger/0000000000000001", "w/bykey/k/step-1/0"}}))
		ledger, err := w.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(HaveLen(1))
		Expect(ledger[0]).To(MatchFields(IgnoreExtras, Fields{"Seq": BeEquivalentTo(1), "Key": Equal("k/step-1/0"), "Resource": Equal("n1")}))
	})

	It("makes nothing visible when the commit fails: no change, no seq, no record for the key", func() {
		store := &countingStore{MemStore: world.NewMemStore(), failing: true}
		m, _ := openNotes(ctx, world.NewMemStore(), nil)
		w := open(store, m)
		_, err := put(w, "k/a", "lost")
		Expect(err).To(MatchError(ContainSubstring("the disk is gone")))
		_, found, err := w.Lookup(ctx, "k/a")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeFalse(), "the request is not recorded: a retry runs it")
		Expect(w.(world.Sequenced).LedgerSeq()).To(BeZero())
		Expect(m.(*notes).items).To(BeEmpty(), "the model's change was never made visible")
		out, err := put(w, "k/a", "kept")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out.Result)).To(Equal(`{"id":"n1"}`), "the retry is the first execution")
	})

	It("recovers its seq, the model's state and every key's outcome from the store", func() {
		store := world.NewMemStore()
		m, _ := openNotes(ctx, world.NewMemStore(), nil)
		w := open(store, m)
		for i, text := range []string{"a", "b", "c"} {
			_, err := put(w, fmt.Sprintf("k/%d", i), text)
			Expect(err).NotTo(HaveOccurred())
		}
		again, err := world.Definition{Name: "notes", Open: openNotes}.Instance(ctx, store, []byte("w/"), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.(world.Sequenced).LedgerSeq()).To(BeEquivalentTo(3))
		out, found, err := again.Lookup(ctx, "k/1")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(string(out.Result)).To(Equal(`{"id":"n2"}`))
		out, err = again.Execute(ctx, world.Request{Key: "k/get", Kind: "notes.get", Args: json.RawMessage(`{"id":"n3"}`), Now: now})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out.Result)).To(Equal(`{"text":"c"}`))
		Expect(again.(world.Sequenced).LedgerSeq()).To(BeEquivalentTo(4), "a refusal or a read is recorded too")
	})

	It("refuses a model's write into the ledger's own key space", func() {
		store := world.NewMemStore()
		w := open(store, &sneaky{})
		_, err := w.Execute(ctx, world.Request{Key: "k/x", Kind: "notes.put", Args: json.RawMessage(`{}`), Now: now})
		Expect(err).To(MatchError(ContainSubstring(`the model writes "ledger/0000000000000009", in the ledger's own key space`)))
	})

	It("answers for capabilities a model lacks: no duplicates, no goal, a snapshot of the ledger's length, no versions", func() {
		m, _ := openNotes(ctx, world.NewMemStore(), nil)
		w := open(world.NewMemStore(), m)
		_, err := put(w, "k/1", "x")
		Expect(err).NotTo(HaveOccurred())
		dups, err := w.Duplicates(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(dups).To(BeEmpty())
		_, err = w.CheckGoal(ctx, json.RawMessage(`{}`))
		Expect(err).To(MatchError(world.ErrNoGoal))
		snap, err := w.Snapshot(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(snap)).To(MatchJSON(`{"world":"notes","ledger_seq":1}`))
		_, ok := w.(world.Versioned)
		Expect(ok).To(BeFalse())
	})

	It("records an API version switch as a world event with the model's change, once", func() {
		store := &countingStore{MemStore: world.NewMemStore()}
		v := &versioned{notes: notes{items: map[string]string{}}, version: "v1"}
		w := open(store, v)
		vw, ok := w.(world.Versioned)
		Expect(ok).To(BeTrue())
		prev, err := vw.SetAPIVersion(ctx, "v2", now)
		Expect(err).NotTo(HaveOccurred())
		Expect(prev).To(Equal("v1"))
		Expect(vw.APIVersion()).To(Equal("v2"))
		Expect(store.commits).To(Equal([][]string{{"w/version", "w/ledger/0000000000000001"}}), "no key: a world event is nothing an agent sent")
		_, err = vw.SetAPIVersion(ctx, "v2", now)
		Expect(err).NotTo(HaveOccurred())
		Expect(store.commits).To(HaveLen(1), "switching to the current version records nothing")
		_, err = vw.SetAPIVersion(ctx, "v9", now)
		Expect(err).To(MatchError(world.ErrUnknownAPIVersion))
		ledger, err := w.Ledger(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ledger).To(HaveLen(1))
		Expect(ledger[0].IsEvent()).To(BeTrue())
		Expect(ledger[0].Kind).To(Equal(world.EventAPIVersion))
		Expect(world.ModelOf(w)).To(BeIdenticalTo(world.Model(v)))
	})
})

package world

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"sync"
)

// Entry is one key and value a world writes.
type Entry struct{ Key, Value []byte }

// ErrNotFound is what Store.Get returns for a key that holds nothing.
var ErrNotFound = errors.New("world store: no such key")

// Store is the durable key space a world writes through. Keys passed to it
// are already under the world's own prefix. The harness backs it with its
// journal (one durable commit per Commit); MemStore keeps it in memory.
type Store interface {
	// Commit writes every entry at once, durably, before it returns.
	Commit(ctx context.Context, entries ...Entry) error
	// Get returns the value under key, or an error wrapping ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for every key under prefix, in key order.
	Scan(prefix []byte, fn func(key, value []byte) error) error
}

// MemStore is a Store in memory, for worlds rebuilt to a point of their
// ledger (see StateAt) and for tests of logic. It is safe for concurrent
// use. Nothing in it is durable.
type MemStore struct {
	mu sync.Mutex
	kv map[string][]byte
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{kv: map[string][]byte{}} }

// Commit implements Store.
func (m *MemStore) Commit(_ context.Context, entries ...Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range entries {
		m.kv[string(e.Key)] = bytes.Clone(e.Value)
	}
	return nil
}

// Get implements Store.
func (m *MemStore) Get(key []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.kv[string(key)]
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(v), nil
}

// Scan implements Store.
func (m *MemStore) Scan(prefix []byte, fn func(key, value []byte) error) error {
	m.mu.Lock()
	keys := make([]string, 0, len(m.kv))
	for k := range m.kv {
		if bytes.HasPrefix([]byte(k), prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = bytes.Clone(m.kv[k])
	}
	m.mu.Unlock()
	for i, k := range keys {
		if err := fn([]byte(k), vals[i]); err != nil {
			return err
		}
	}
	return nil
}

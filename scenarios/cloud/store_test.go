package cloud_test

import (
	"context"
	"errors"

	"github.com/overnight-dev/overnight/harness/journal"
	"github.com/overnight-dev/overnight/scenarios/world"
)

// journalStore backs the world with a real Badger journal, as the harness
// does, so these tests exercise real durable commits.
type journalStore struct{ j *journal.Journal }

func (s journalStore) Commit(ctx context.Context, entries ...world.Entry) error {
	es := make([]journal.Entry, len(entries))
	for i, e := range entries {
		es[i] = journal.Entry{Key: e.Key, Value: e.Value}
	}
	return s.j.Commit(ctx, es...)
}

func (s journalStore) Get(key []byte) ([]byte, error) {
	v, err := s.j.Get(key)
	if errors.Is(err, journal.ErrNotFound) {
		return nil, world.ErrNotFound
	}
	return v, err
}

func (s journalStore) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return s.j.Scan(prefix, fn)
}

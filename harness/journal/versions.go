package journal

import (
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// Version is the journal's latest commit version: it grows with every
// commit, of this process or an earlier owner, so two equal versions read
// at different times mean nothing was written in between.
func (j *Journal) Version() (uint64, error) {
	var v uint64
	err := j.view(func(*badger.Txn) error {
		v = j.db.MaxVersion()
		return nil
	})
	return v, err
}

// Versions calls fn for every key with prefix, in ascending key order, with
// a copy of the key, the version of the commit that last wrote it, and a
// function that returns a copy of its value — read only if fn calls it,
// and only while fn runs. A reader that keeps decoded values between reads
// (a viewer's index of runs) decodes again only the keys whose version
// moved. An error from fn stops the scan and is returned as is.
func (j *Journal) Versions(prefix []byte, fn func(key []byte, version uint64, value func() ([]byte, error)) error) error {
	var fnErr error
	err := j.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			item := it.Item()
			value := func() ([]byte, error) { return item.ValueCopy(nil) }
			if fnErr = fn(item.KeyCopy(nil), item.Version(), value); fnErr != nil {
				return fnErr
			}
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil && err != ErrClosed {
		return fmt.Errorf("scan the versions of prefix %q of journal %s: %w", prefix, j.dir, err)
	}
	return err
}

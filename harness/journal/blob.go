package journal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// A blob is stored as chunks of at most blobChunkSize bytes under
// blob/<hash>/<index> plus a manifest under blob/<hash>. The manifest is
// committed last, after every chunk is durable, so a blob exists exactly when
// its manifest does; chunks left by an interrupted PutBlob are harmless (the
// content is fixed by the hash) and a retry rewrites them. Chunks keep every
// value under Badger's value threshold (see badgerOptions).
type blobManifest struct {
	Size   int64 `json:"size"`
	Chunks int   `json:"chunks"`
}

func blobKey(hash string) []byte { return []byte("blob/" + hash) }

func blobChunkKey(hash string, i int) []byte {
	return fmt.Appendf(nil, "blob/%s/%06d", hash, i)
}

// PutBlob stores data durably under its SHA-256 (lowercase hex) and returns
// that hash. Storing the same data again writes nothing. Data larger than
// MaxBlobSize is refused with an error matching ErrTooLarge. As with Commit,
// if ctx ends first the blob may or may not have been stored.
func (j *Journal) PutBlob(ctx context.Context, data []byte) (hash string, err error) {
	if len(data) > MaxBlobSize {
		return "", fmt.Errorf("put blob of %d bytes: limit is %d: %w; compress or split the payload", len(data), MaxBlobSize, ErrTooLarge)
	}
	sum := sha256.Sum256(data)
	hash = hex.EncodeToString(sum[:])
	if _, err := j.Get(blobKey(hash)); err == nil {
		return hash, nil
	} else if !errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("put blob %s: %w", hash, err)
	}

	chunks := (len(data) + blobChunkSize - 1) / blobChunkSize
	manifest, err := json.Marshal(blobManifest{Size: int64(len(data)), Chunks: chunks})
	if err != nil {
		return "", fmt.Errorf("put blob %s: encode manifest: %w", hash, err)
	}
	// Pack as many chunks per commit as one atomic write holds, with room to
	// spare for the manifest and Badger's per-entry overhead.
	perCommit := max(1, int(j.maxTxnSize-64<<10)/(blobChunkSize+256))
	for first := 0; first < chunks; first += perCommit {
		var entries []Entry
		for i := first; i < min(first+perCommit, chunks); i++ {
			chunk := data[i*blobChunkSize : min((i+1)*blobChunkSize, len(data))]
			entries = append(entries, Entry{Key: blobChunkKey(hash, i), Value: chunk})
		}
		if first+perCommit >= chunks {
			// The last chunks and the manifest go together: for a small blob
			// that is a single atomic commit.
			entries = append(entries, Entry{Key: blobKey(hash), Value: manifest})
		}
		if err := j.commit(ctx, true, entries); err != nil {
			return "", fmt.Errorf("put blob %s (%d bytes): %w", hash, len(data), err)
		}
	}
	if chunks == 0 {
		if err := j.commit(ctx, true, []Entry{{Key: blobKey(hash), Value: manifest}}); err != nil {
			return "", fmt.Errorf("put blob %s (empty): %w", hash, err)
		}
	}
	return hash, nil
}

// Blob returns the content stored under hash (as returned by PutBlob). It
// returns an error matching ErrNotFound if there is no such blob, and one
// matching ErrBlobCorrupt if the stored bytes do not hash to hash.
func (j *Journal) Blob(hash string) ([]byte, error) {
	if !isSHA256Hex(hash) {
		return nil, fmt.Errorf("blob %q: not a lowercase hex SHA-256 digest: %w", hash, ErrNotFound)
	}
	var data []byte
	err := j.view(func(txn *badger.Txn) error {
		item, err := txn.Get(blobKey(hash))
		if err != nil {
			return err
		}
		raw, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		var m blobManifest
		if err := json.Unmarshal(raw, &m); err != nil || m.Size < 0 || m.Size > MaxBlobSize {
			return fmt.Errorf("manifest %q: %w", raw, ErrBlobCorrupt)
		}
		data = make([]byte, 0, m.Size)
		for i := 0; i < m.Chunks; i++ {
			item, err := txn.Get(blobChunkKey(hash, i))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("chunk %d of %d is missing: %w", i, m.Chunks, ErrBlobCorrupt)
			}
			if err != nil {
				return err
			}
			if err := item.Value(func(v []byte) error {
				data = append(data, v...)
				return nil
			}); err != nil {
				return err
			}
		}
		if int64(len(data)) != m.Size {
			return fmt.Errorf("%d bytes stored, manifest says %d: %w", len(data), m.Size, ErrBlobCorrupt)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hash {
			return fmt.Errorf("content hashes to %x: %w", sum, ErrBlobCorrupt)
		}
		return nil
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return nil, fmt.Errorf("blob %s: %w", hash, ErrNotFound)
	case errors.Is(err, ErrClosed):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("read blob %s from journal %s: %w", hash, j.dir, err)
	}
	return data, nil
}

func isSHA256Hex(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

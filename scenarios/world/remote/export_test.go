package remote

// WALLog is the memtable log the store's syncer follows, "" when it syncs
// with Badger's own Sync instead.
func (s *BadgerStore) WALLog() string {
	if s.wal == nil {
		return ""
	}
	return s.wal.Log()
}

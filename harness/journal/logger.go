package journal

import (
	"fmt"
	"log/slog"
	"strings"
)

// badgerLogger adapts a *slog.Logger to badger.Logger. Badger is chatty at
// Info and Debug (compactions, table flushes), which a CLI user should not
// see, so only warnings and errors pass.
type badgerLogger struct {
	log *slog.Logger
}

func (l badgerLogger) Errorf(format string, args ...any) {
	l.log.Error(strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}

func (l badgerLogger) Warningf(format string, args ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}

func (badgerLogger) Infof(string, ...any) {}

func (badgerLogger) Debugf(string, ...any) {}

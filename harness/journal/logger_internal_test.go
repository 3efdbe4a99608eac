package journal

import (
	"bytes"
	"log/slog"

	// Not dot-imported: ginkgo's Entry would clash with journal.Entry.
	"github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = ginkgo.Describe("badgerLogger", func() {
	ginkgo.It("passes Badger's warnings and errors to slog and drops Info and Debug", func() {
		var buf bytes.Buffer
		l := badgerLogger{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		l.Debugf("debug %d\n", 1)
		l.Infof("info %d\n", 2)
		Expect(buf.String()).To(BeEmpty())
		l.Warningf("warn %d\n", 3)
		l.Errorf("error %d\n", 4)
		Expect(buf.String()).To(ContainSubstring(`level=WARN msg="warn 3" component=badger`))
		Expect(buf.String()).To(ContainSubstring(`level=ERROR msg="error 4" component=badger`))
	})
})

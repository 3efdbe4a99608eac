package writeup_test

import (
	"bytes"
	"errors"
	"html/template"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/writeup"
)

// failingWriter refuses every write.
type failingWriter struct{ writes int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.writes++
	return 0, errors.New("disk full")
}

var _ = Describe("the page shell", func() {
	It("writes a self-contained page: the title escaped, the one stylesheet inlined, the body as rendered, no script", func() {
		var page bytes.Buffer
		Expect(writeup.WritePage(&page, writeup.Page{Title: "run <a&b>", Body: template.HTML(`<h1 class="muted">Run</h1>`)})).To(Succeed())
		Expect(page.String()).To(Equal(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>run &lt;a&amp;b&gt;</title>
<style>` + string(writeup.Style) + `</style></head><body>
<h1 class="muted">Run</h1>
</body></html>
`))
	})

	It("refreshes itself only when asked to", func() {
		var live, still bytes.Buffer
		Expect(writeup.WritePage(&live, writeup.Page{Title: "live", Refresh: 2})).To(Succeed())
		Expect(live.String()).To(ContainSubstring("<title>live</title>\n<meta http-equiv=\"refresh\" content=\"2\">\n<style>"))
		for _, r := range []int{0, -1} {
			still.Reset()
			Expect(writeup.WritePage(&still, writeup.Page{Title: "still", Refresh: r})).To(Succeed())
			Expect(still.String()).NotTo(ContainSubstring("refresh"), "refresh %d", r)
		}
	})

	It("says why a page could not be written, and writes it in one piece", func() {
		w := &failingWriter{}
		Expect(writeup.WritePage(w, writeup.Page{Title: "t", Body: "<p>x</p>"})).To(MatchError("disk full"))
		Expect(w.writes).To(Equal(1))
	})

	It("renders a body, or says what in its template failed", func() {
		body, err := writeup.Render(template.Must(template.New("b").Parse(`<p>{{.}}</p>`)), "<x>")
		Expect(err).NotTo(HaveOccurred())
		Expect(body).To(Equal(template.HTML("<p>&lt;x&gt;</p>")))
		_, err = writeup.Render(template.Must(template.New("b").Parse(`{{.Missing}}`)), struct{}{})
		Expect(err).To(MatchError(ContainSubstring("Missing")))
	})

	It("has one stylesheet with nothing that reaches outside the page", func() {
		for _, banned := range []string{"url(", "@import", "http:", "https:", "<"} {
			Expect(strings.Contains(string(writeup.Style), banned)).To(BeFalse(), banned)
		}
	})
})

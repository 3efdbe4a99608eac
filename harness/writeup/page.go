package writeup

import (
	"bytes"
	"html/template"
	"io"
	"sync"
)

// Style is the stylesheet of every overnight HTML page — the run and
// suite reports, the reflection report and the viewer (overnight serve) —
// inlined in each page, so that a page needs nothing but itself. A command
// (div.cmd, its code) is laid out on one line that scrolls inside its own
// box: it never wraps inside a flag, and never widens the page.
const Style template.CSS = `body{font-family:system-ui,sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.5em;margin-bottom:.3em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #eee}h3{font-size:1em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.92em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f6f6f6}td.n,th.n{text-align:right}td:first-child{white-space:nowrap}
code,pre{background:#f4f4f4;padding:.1em .3em;white-space:pre-wrap;word-break:break-word}pre{max-height:32em;overflow:auto;padding:.5em}
blockquote{border-left:4px solid #1565c0;margin:.5em 0;padding:.2em .8em;background:#f3f7fc}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em}dl.facts dt{font-weight:600}dl.facts dd{margin:0}
.pass,.ok{color:#2e7d32}.fail,.bad{color:#c62828}.unknown,.hold{color:#ef6c00}.muted{color:#666}
nav{border-bottom:1px solid #ddd;padding:.4em 0;margin-bottom:1em}nav a{margin-right:1.2em}
form.filters{display:flex;flex-wrap:wrap;gap:.6em;align-items:end;margin:.5em 0}form.filters label{display:flex;flex-direction:column;font-size:.85em}
details{margin:.3em 0}summary{cursor:pointer}
td.name{white-space:normal;overflow-wrap:break-word}td.id,code.spec{white-space:nowrap}
div.cmd{display:flex;gap:.6em;align-items:baseline;width:0;min-width:100%}div.cmd code{flex:1;min-width:0;white-space:pre;word-break:normal;overflow-x:auto}
tr.cmd td{border-top:hidden;padding-top:0}`

// Page is what WritePage puts around a body.
type Page struct {
	// Title is the page's title, as the browser's tab shows it.
	Title string
	// Refresh, if above 0, makes the page reload itself every Refresh
	// seconds (a meta refresh: no script). Default 0: never.
	Refresh int
	// Body is the page's content, already rendered (see Render).
	Body template.HTML
}

// shell is the page around a body: the stylesheet inlined, no script, no
// external asset.
var shell = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
{{if gt .Refresh 0}}<meta http-equiv="refresh" content="{{.Refresh}}">
{{end}}<style>{{.Style}}</style></head><body>
{{.Body}}
</body></html>
`))
})

// WritePage writes p as one self-contained HTML page: doctype, head with
// its title and the inlined Style, and its body. Nothing is written when
// it fails.
func WritePage(w io.Writer, p Page) error {
	var buf bytes.Buffer
	if err := shell().Execute(&buf, struct {
		Page
		Style template.CSS
	}{p, Style}); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Render executes t with data into HTML, for a page's body or a part of
// it.
func Render(t *template.Template, data any) (template.HTML, error) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil
}

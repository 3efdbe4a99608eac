// Package writeup is how overnight writes a run up for a person, in the
// parts that the reflection report (reflect), the run and suite reports
// (harness/report) and the viewer (harness/viewer) share: the one HTML
// page shell with the one stylesheet (Style, WritePage), and a run's
// reflections and the gate's decisions as sections rendered from its
// history records, in Markdown (ReflectionsMarkdown) and HTML
// (ReflectionsHTML).
//
// A page needs nothing but itself: the stylesheet is inlined, and there is
// no script and no external asset (the viewer's Content-Security-Policy
// relies on it). The package renders what it is given; it reads nothing
// and stores nothing, and it sits below every package that writes a page,
// so that none of them imports another for its look.
package writeup

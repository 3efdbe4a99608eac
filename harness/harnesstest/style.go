package harnesstest

import (
	"regexp"
	"slices"
	"strings"
)

var (
	classAttr = regexp.MustCompile(`class="([^"]*)"`)
	// classSelector finds ".name" in a stylesheet, name up to the first
	// character that cannot be part of it.
	classSelector = regexp.MustCompile(`\.(-?[_a-zA-Z][-_a-zA-Z0-9]*)`)
)

// Unstyled lists, sorted and once each, the class names an HTML page's
// class attributes use that no selector of the stylesheet css names: the
// classes a page would show unstyled. A class naming a verdict or a
// status that has no look of its own would show up too, so a caller
// passes pages whose classes are all meant to be styled.
func Unstyled(css, page string) []string {
	styled := map[string]bool{}
	for _, m := range classSelector.FindAllStringSubmatch(css, -1) {
		styled[m[1]] = true
	}
	var missing []string
	for _, m := range classAttr.FindAllStringSubmatch(page, -1) {
		for _, class := range strings.Fields(m[1]) {
			if !styled[class] && !slices.Contains(missing, class) {
				missing = append(missing, class)
			}
		}
	}
	slices.Sort(missing)
	return missing
}

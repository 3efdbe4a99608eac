package world

// DuplicateCounter counts the logical resources a ledger shows made more
// than once: the shared work of a DuplicateFinder. A world walks its
// ledger, decides which entries made (or acted on) which logical resource
// — a kind, a scope and a name — and adds each; Duplicates then lists
// those added more than once, in the order they were first seen. The zero
// value is ready to use.
type DuplicateCounter struct {
	groups map[duplicateIdent]*Duplicate
	order  []duplicateIdent
}

type duplicateIdent struct{ kind, scope, name string }

// Add counts entry e as one making the logical resource (kind, scope,
// name); the resource id recorded is e.Resource and the key e.Key.
func (c *DuplicateCounter) Add(kind, scope, name string, e LedgerEntry) {
	id := duplicateIdent{kind: kind, scope: scope, name: name}
	if c.groups == nil {
		c.groups = map[duplicateIdent]*Duplicate{}
	}
	g := c.groups[id]
	if g == nil {
		g = &Duplicate{Kind: kind, Name: name, Scope: scope}
		c.groups[id] = g
		c.order = append(c.order, id)
	}
	g.IDs = append(g.IDs, e.Resource)
	g.Keys = append(g.Keys, e.Key)
	g.Count++
}

// Duplicates lists the resources added more than once, in the order each
// was first added (nil: none).
func (c *DuplicateCounter) Duplicates() []Duplicate {
	var out []Duplicate
	for _, id := range c.order {
		if g := c.groups[id]; g.Count > 1 {
			out = append(out, *g)
		}
	}
	return out
}

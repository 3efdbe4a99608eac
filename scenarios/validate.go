package scenarios

import (
	"errors"
	"strings"
)

// Validate finds a scenario as Resolve does and reports every problem it has in one pass:
// Parse's, and those check finds — the checks that need what this package does not know, such
// as the worlds and agents a harness offers — even when the file has problems of its own. It
// returns the scenario when there is none, and otherwise an error as Parse's: an *Error, an
// ErrorList sorted by position, or the error of a file that could not be read at all.
//
// check is given what Parse could read of a file with problems: a scenario that may be
// incomplete, never to be run. So a problem check reports about a value Parse already
// reported on — the same value, one inside it or one around it — is a consequence and left
// out, and so is every problem it reports in faults or draws when Parse reported one there
// (the items Parse could not read are missing from Scenario.Faults and Draws, so the others'
// indices would not be the file's). check may be nil.
func Validate(nameOrPath string, builtin func(name string) ([]byte, bool), builtinNames []string, check func(*Scenario) error) (*Scenario, error) {
	file, data, err := locate(nameOrPath, builtin, builtinNames)
	if err != nil {
		return nil, err
	}
	sc, err := parse(file, data)
	if sc == nil || check == nil {
		if err != nil {
			return nil, err
		}
		return sc, nil
	}
	var found ErrorList
	if err != nil {
		var ok bool
		if found, ok = Problems(err); !ok {
			return nil, err
		}
	}
	parsed := len(found)
	if cerr := check(sc); cerr != nil {
		more, ok := Problems(cerr)
		if !ok {
			return nil, errors.Join(found.Err(), cerr)
		}
		for _, e := range more {
			if !consequence(e.Pointer, found[:parsed]) {
				found = append(found, e)
			}
		}
	}
	if err := found.Err(); err != nil {
		return nil, err
	}
	return sc, nil
}

// consequence reports whether a later check's problem at ptr follows from one of the problems
// Parse found (see Validate).
func consequence(ptr string, parsed ErrorList) bool {
	related := func(a, b string) bool {
		return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
	}
	for _, e := range parsed {
		if e.Pointer == "" {
			continue // the document as a whole: every value is inside it
		}
		if related(ptr, e.Pointer) {
			return true
		}
		for _, list := range []string{"/faults", "/draws"} {
			if related(ptr, list) && related(e.Pointer, list) {
				return true
			}
		}
	}
	return false
}

package worldtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/overnight-dev/overnight/sandbox/protocol"
	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// describe asks the world to describe itself (POST), keeping what it
// answered for every rule.
func (k *kit) describe(ctx context.Context) {
	a, err := k.send(ctx, http.MethodPost, remote.PathDescribe, []byte(`{}`))
	switch {
	case err != nil:
		k.descErr = err
	case a.status != http.StatusOK:
		k.descErr = fmt.Errorf("POST %s: answered %d %s; want 200 with the world's description", remote.PathDescribe, a.status, excerpt(a.body))
	default:
		if err := json.Unmarshal(a.body, &k.desc); err != nil {
			k.descErr = fmt.Errorf("POST %s: answered %s, not a description: %v", remote.PathDescribe, excerpt(a.body), err)
			k.desc = remote.Description{}
		}
	}
}

// describeRule: describe answers the protocol, a name, versions with
// kinds flagged sensibly, and examples of kinds the first version offers;
// GET answers what POST does.
func (k *kit) describeRule(ctx context.Context) (string, error) {
	if k.descErr != nil {
		return "", k.descErr
	}
	d := k.desc
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if d.Protocol != remote.Protocol {
		add("protocol is %q; want %q", d.Protocol, remote.Protocol)
	}
	if d.Name == "" {
		add("name is empty")
	}
	if len(d.Versions) == 0 {
		add("versions is empty; a world with one API version gives one, with its kinds")
	}
	var names, shape []string
	for i, v := range d.Versions {
		switch {
		case v.Name == "":
			add("versions[%d] has no name", i)
		case slices.Contains(names, v.Name):
			add("version %q is given twice", v.Name)
		}
		names = append(names, v.Name)
		shape = append(shape, fmt.Sprintf("%s (%d kinds)", v.Name, len(v.Kinds)))
		if len(v.Kinds) == 0 {
			add("version %q offers no kinds", v.Name)
		}
		var kinds []string
		for j, kind := range v.Kinds {
			where := fmt.Sprintf("version %s, kind %q", v.Name, kind.Name)
			switch {
			case kind.Name == "":
				add("version %s, kinds[%d] has no name", v.Name, j)
			case slices.Contains(kinds, kind.Name):
				add("%s is given twice", where)
			case strings.HasPrefix(kind.Name, "world."):
				add("%s: a name beginning world. is a world event's, never an effect kind's", where)
			}
			kinds = append(kinds, kind.Name)
			if kind.ReadOnly && !kind.Idempotent {
				add("%s is read_only and not idempotent: what has no side effect is idempotent", where)
			}
			if kind.ReadOnly && kind.Identity != "" {
				add("%s is read_only with identity %q: a read creates no resource to name", where, kind.Identity)
			}
			if kind.ReadOnly && kind.Destructive {
				add("%s is both read_only and destructive", where)
			}
		}
	}
	if d.APIVersion != "" && !slices.Contains(names, d.APIVersion) {
		add("api_version %q is not among its versions (%s)", d.APIVersion, strings.Join(names, ", "))
	}
	if len(d.Versions) > 0 {
		for i, ex := range d.Examples {
			if !slices.ContainsFunc(d.Versions[0].Kinds, func(x world.KindInfo) bool { return x.Name == ex.Kind }) {
				add("examples[%d] is of kind %q, which version %s (where a fresh instance starts) does not offer", i, ex.Kind, d.Versions[0].Name)
			}
		}
	}
	a, err := k.send(ctx, http.MethodGet, remote.PathDescribe, nil)
	switch {
	case err != nil:
		add("GET %s: %v", remote.PathDescribe, err)
	case a.status != http.StatusOK:
		add("GET %s answered %d %s; describe answers GET as it answers POST", remote.PathDescribe, a.status, excerpt(a.body))
	default:
		var viaGet remote.Description
		if json.Unmarshal(a.body, &viaGet) != nil || !sameJSON(viaGet, d) {
			add("GET %s answered %s, not what POST answered", remote.PathDescribe, excerpt(a.body))
		}
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("describe: %s", strings.Join(problems, "; "))
	}
	var caps []string
	for _, c := range []struct {
		name string
		on   bool
	}{{"goal", d.Capabilities.Goal}, {"duplicates", d.Capabilities.Duplicates}, {"versions", d.Capabilities.Versions}, {"instances", d.Capabilities.Instances}} {
		if c.on {
			caps = append(caps, c.name)
		}
	}
	if len(caps) == 0 {
		caps = []string{"none"}
	}
	return fmt.Sprintf("%s, world %q, versions %s, capabilities %s, %d examples", d.Protocol, d.Name,
		strings.Join(shape, ", "), strings.Join(caps, ", "), len(d.Examples)), nil
}

// examplesRule: the examples succeed in order on a fresh instance, each
// answered with a greater seq, each in the ledger as answered.
func (k *kit) examplesRule(ctx context.Context) (string, error) {
	inst, err := k.fresh(ctx)
	if err != nil {
		return "", err
	}
	var keys []string
	var answers []remote.ApplyResponse
	var last int64
	for i, ex := range k.desc.Examples {
		key := k.key(fmt.Sprint(i + 1))
		resp, err := k.applyDone(ctx, inst, key, ex, k.now())
		if err != nil {
			return "", fmt.Errorf("example %d: %w", i+1, err)
		}
		if resp.Seq <= last {
			return "", fmt.Errorf("example %d (%s key %s) answered seq %d after seq %d; the seq of each apply's ledger entry increases", i+1, ex.Kind, key, resp.Seq, last)
		}
		last = resp.Seq
		keys, answers = append(keys, key), append(answers, resp)
	}
	entries, err := k.ledger(ctx, inst)
	if err != nil {
		return "", err
	}
	for i, resp := range answers {
		if err := recorded(entries, resp.Seq, keys[i], k.desc.Examples[i], resp.Outcome); err != nil {
			return "", fmt.Errorf("example %d: %w", i+1, err)
		}
	}
	where := "a fresh instance"
	if inst == "" {
		where = "the world itself"
	}
	return fmt.Sprintf("%d examples answered done in order on %s (seq %d..%d), each in the ledger as answered",
		len(answers), where, answers[0].Seq, last), nil
}

// recorded checks the ledger holds, at seq, the request and the outcome
// answered.
func recorded(entries []world.LedgerEntry, seq int64, key string, c world.Call, answered world.Outcome) error {
	i := slices.IndexFunc(entries, func(e world.LedgerEntry) bool { return e.Seq == seq })
	if i < 0 {
		return fmt.Errorf("apply %s key %s answered seq %d, and the ledger has no entry %d", c.Kind, key, seq, seq)
	}
	e := entries[i]
	switch {
	case e.Key != key || e.Kind != c.Kind:
		return fmt.Errorf("ledger entry %d is key %q kind %q; the apply that answered seq %d was key %q kind %q", seq, e.Key, e.Kind, seq, key, c.Kind)
	case !sameJSON(e.Args, c.Args):
		return fmt.Errorf("ledger entry %d (key %s) records args %s; the request's were %s", seq, key, jsonText(e.Args), jsonText(c.Args))
	case !sameJSON(e.Outcome, answered):
		return fmt.Errorf("ledger entry %d (key %s) records the outcome %s; the apply answered %s", seq, key, jsonText(e.Outcome), jsonText(answered))
	}
	return nil
}

// kindInfo is what describe says of kind in the first version.
func (k *kit) kindInfo(kind string) world.KindInfo {
	for _, x := range k.desc.Versions[0].Kinds {
		if x.Name == kind {
			return x
		}
	}
	return world.KindInfo{Name: kind}
}

// sameKeyTwiceRule: each example, applied twice under one key (the same
// request: key, kind, args and now), is recorded twice, and creates
// nothing twice unless its kind says it may — then duplicates names it.
func (k *kit) sameKeyTwiceRule(ctx context.Context) (string, error) {
	var unchanged, again, noIdentity []string
	for i, ex := range k.desc.Examples {
		inst, err := k.fresh(ctx)
		if err != nil {
			return "", err
		}
		if inst != "" {
			// A fresh instance: the examples before this one first. (On
			// the world itself, the iterations before applied them.)
			for j := range i {
				if _, err := k.applyDone(ctx, inst, k.key(fmt.Sprintf("%d/before-%d", i+1, j+1)), k.desc.Examples[j], k.now()); err != nil {
					return "", fmt.Errorf("example %d, before applying example %d twice: %w", j+1, i+1, err)
				}
			}
		}
		outcome, err := k.sameKeyTwice(ctx, inst, i, ex)
		if err != nil {
			return "", fmt.Errorf("example %d (%s %s): %w", i+1, ex.Kind, ex.Args, err)
		}
		switch outcome {
		case "unchanged":
			unchanged = append(unchanged, ex.Kind)
		case "again":
			again = append(again, ex.Kind)
		case "again, no identity":
			noIdentity = append(noIdentity, ex.Kind)
		}
		if inst != "" {
			if err := k.dropInstances(ctx); err != nil {
				return "", err
			}
		}
	}
	parts := []string{fmt.Sprintf("%d examples each applied twice under one key, each time recorded twice in the ledger", len(k.desc.Examples))}
	if len(unchanged) > 0 {
		parts = append(parts, fmt.Sprintf("the repeat changed nothing for %s", strings.Join(unchanged, ", ")))
	}
	if len(again) > 0 {
		parts = append(parts, fmt.Sprintf("made a second resource for %s, which describe declares not idempotent, and duplicates names it", strings.Join(again, ", ")))
	}
	if len(noIdentity) > 0 {
		parts = append(parts, fmt.Sprintf("acted again for %s, declared not idempotent (no identity: duplicates cannot name it)", strings.Join(noIdentity, ", ")))
	}
	return strings.Join(parts, "; "), nil
}

// sameKeyTwice applies example i twice under one key on inst and judges
// what the repeat did: "unchanged", "again" (a second resource, named by
// duplicates) or "again, no identity".
func (k *kit) sameKeyTwice(ctx context.Context, inst string, i int, ex world.Call) (string, error) {
	info := k.kindInfo(ex.Kind)
	key := k.key(fmt.Sprintf("%d/twice", i+1))
	now := k.now()
	s0, err := k.state(ctx, inst)
	if err != nil {
		return "", err
	}
	first, err := k.applyDone(ctx, inst, key, ex, now)
	if err != nil {
		return "", err
	}
	s1, err := k.state(ctx, inst)
	if err != nil {
		return "", err
	}
	if info.ReadOnly && !sameJSON(s0, s1) {
		return "", fmt.Errorf("kind %s is declared read_only, and applying it changed the state from %s to %s", ex.Kind, jsonText(s0), jsonText(s1))
	}
	second, err := k.apply(ctx, inst, key, ex, now)
	if err != nil {
		return "", fmt.Errorf("the same request again: %w", err)
	}
	s2, err := k.state(ctx, inst)
	if err != nil {
		return "", err
	}
	if second.Seq <= first.Seq {
		return "", fmt.Errorf("the repeat answered seq %d after seq %d; the ledger records every request received, the repeat a new entry", second.Seq, first.Seq)
	}
	entries, err := k.ledger(ctx, inst)
	if err != nil {
		return "", err
	}
	if err := recorded(entries, first.Seq, key, ex, first.Outcome); err != nil {
		return "", err
	}
	if err := recorded(entries, second.Seq, key, ex, second.Outcome); err != nil {
		return "", fmt.Errorf("the repeat: %w (the ledger records every request received, a repeated key too)", err)
	}
	if sameJSON(s1, s2) {
		return "unchanged", nil
	}
	if info.Idempotent || info.ReadOnly {
		return "", fmt.Errorf("kind %s is declared idempotent, and the repeat (answered %s, first %s) changed the state from %s to %s",
			ex.Kind, outcomeText(second.Outcome), outcomeText(first.Outcome), jsonText(s1), jsonText(s2))
	}
	if second.Outcome.Status != protocol.StatusDone || info.Identity == "" || !k.desc.Capabilities.Duplicates {
		return "again, no identity", nil
	}
	dups, err := k.duplicates(ctx, inst)
	if err != nil {
		return "", err
	}
	for _, d := range dups {
		if n := countKey(d.Keys, key); n >= 2 {
			return "again", nil
		}
	}
	return "", fmt.Errorf("the repeat made a second resource (answered %s, first %s), and duplicates does not name it with the key twice (it answered %s): a run's no-duplicate-effects cannot see it",
		outcomeText(second.Outcome), outcomeText(first.Outcome), jsonText(dups))
}

func countKey(keys []string, key string) int {
	n := 0
	for _, x := range keys {
		if x == key {
			n++
		}
	}
	return n
}

// lookupAfterApplyRule: lookup of each applied key finds the outcome the
// apply answered; of a key applied again, the last outcome.
func (k *kit) lookupAfterApplyRule(ctx context.Context) (string, error) {
	inst, err := k.fresh(ctx)
	if err != nil {
		return "", err
	}
	var keys []string
	var outcomes []world.Outcome
	for i, ex := range k.desc.Examples {
		key := k.key(fmt.Sprint(i + 1))
		resp, err := k.applyDone(ctx, inst, key, ex, k.now())
		if err != nil {
			return "", fmt.Errorf("example %d: %w", i+1, err)
		}
		keys, outcomes = append(keys, key), append(outcomes, resp.Outcome)
	}
	// The first key again: lookup answers the last outcome of a key.
	again, err := k.apply(ctx, inst, keys[0], k.desc.Examples[0], k.now())
	if err != nil {
		return "", fmt.Errorf("example 1 again under its key: %w", err)
	}
	outcomes[0] = again.Outcome
	for i, key := range keys {
		got, err := k.lookup(ctx, inst, key)
		if err != nil {
			return "", err
		}
		want := "the outcome its apply answered"
		if i == 0 {
			want = "the outcome of the last apply of the key (it was applied twice)"
		}
		switch {
		case !got.Found:
			return "", fmt.Errorf("lookup of key %s%s answered found=false; the apply of example %d (%s) was answered %s, so it is recorded and lookup finds it",
				key, on(inst), i+1, k.desc.Examples[i].Kind, outcomeText(outcomes[i]))
		case got.Outcome == nil || !sameJSON(*got.Outcome, outcomes[i]):
			return "", fmt.Errorf("lookup of key %s%s answered %s; want %s, %s", key, on(inst), lookupText(got), want, outcomeText(outcomes[i]))
		}
	}
	return fmt.Sprintf("lookup found each of %d applied keys with the outcome answered, and the last outcome of a key applied twice", len(keys)), nil
}

// lookupUnknownRule: lookup of a key never applied answers found=false,
// on the world itself (a read) and on a fresh instance.
func (k *kit) lookupUnknownRule(ctx context.Context) (string, error) {
	key := k.key("never-applied")
	places := []string{""}
	if k.desc.Capabilities.Instances {
		inst, err := k.newInstance(ctx, nil)
		if err != nil {
			return "", err
		}
		places = append(places, inst)
	}
	for _, inst := range places {
		got, err := k.lookup(ctx, inst, key)
		if err != nil {
			return "", err
		}
		if got.Found || got.Outcome != nil {
			return "", fmt.Errorf("lookup of key %s%s, never applied, answered %s; want found=false and no outcome", key, on(inst), lookupText(got))
		}
	}
	where := "the world itself"
	if len(places) > 1 {
		where += " and on a fresh instance"
	}
	return fmt.Sprintf("lookup of a key never applied (%s) answered found=false on %s", key, where), nil
}

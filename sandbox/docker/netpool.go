package docker

import (
	"github.com/overnight-dev/overnight/sandbox"

	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// LabelRole marks a container that is not a sandbox: RoleNetNS for a
// network-namespace holder (see NetPool). It carries no LabelRun.
// LabelPool names the NetPool a holder belongs to, from the moment it is
// created: a reaper spares a live pool's holders even while they start.
const (
	LabelRole = "overnight.role"
	RoleNetNS = "netns"
	LabelPool = "overnight.pool"
)

// NetPool keeps network-namespace holders ready: tiny containers (the init
// binary waiting for a signal, no network but loopback, every hardening
// default) whose network namespace a sandbox joins (Spec.NetNS) instead of
// having the engine make one for it.
//
// Why: on Docker 20.10 a container with a namespace of its own costs the
// engine two executions of its own binary (the libnetwork-setkey prestart
// hook and set-ipv6), about half a second of CPU on the reference machine —
// more than everything else a sandbox start costs. A holder pays that once
// and is reused, one sandbox at a time.
//
// Isolation: a holder serves one sandbox at a time, and goes back to the
// pool only after that sandbox's container is gone, its processes and
// their sockets with it. A sandbox has no capabilities, so nothing it could
// set in the namespace (routes, addresses, sysctls, firewall rules) can
// outlive it: the next sandbox finds loopback and nothing listening, as in a
// new namespace.
//
// The pool starts holders only when asked (Warm): a process that runs one
// sandbox gains nothing from it. Take never waits for one.
type NetPool struct {
	e     *Engine
	image string
	id    string // LabelPool of its holders

	mu       sync.Mutex
	idle     []string
	busy     map[string]bool
	starting int
	target   int
	closed   bool
	hits     int
	misses   int
	wg       sync.WaitGroup
}

// MaxNetHolders bounds the holders a pool keeps idle or starting.
const MaxNetHolders = 64

// NewNetPool makes a pool of holders made from image (a sandbox image, see
// EnsureImage: it holds the init binary at InitPath).
func (e *Engine) NewNetPool(image string) *NetPool {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &NetPool{e: e, image: image, id: hex.EncodeToString(b[:]), busy: map[string]bool{}}
}

// ID is the pool's LabelPool value, carried by each of its holders ("" for
// a nil pool).
func (p *NetPool) ID() string {
	if p == nil {
		return ""
	}
	return p.id
}

// Warm asks the pool to own n holders (idle, in use or starting), starting
// what is missing in the background; n below the current target changes
// nothing. It returns at once.
func (p *NetPool) Warm(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = min(max(p.target, n), MaxNetHolders)
	p.refillLocked()
}

// owned is how many holders the pool has: idle, in use, starting.
func (p *NetPool) owned() int { return len(p.idle) + len(p.busy) + p.starting }

// refillLocked starts holders until the pool owns its target.
func (p *NetPool) refillLocked() {
	for !p.closed && p.owned() < p.target {
		p.starting++
		p.wg.Add(1)
		go p.start()
	}
}

func (p *NetPool) start() {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := p.e.startNetHolder(ctx, p.image, p.id)
	p.mu.Lock()
	p.starting--
	if err != nil {
		p.mu.Unlock()
		p.e.log.Warn("start a network namespace holder", "err", err)
		return
	}
	if p.closed || p.owned() >= p.target {
		p.mu.Unlock()
		_ = p.e.Remove(ctx, id)
		return
	}
	p.idle = append(p.idle, id)
	p.mu.Unlock()
}

// Take returns a ready holder for one sandbox (Spec.NetNS), or "" when none
// is idle: the sandbox then gets a namespace of its own, as without a pool.
// It never waits. A taken holder is given back with Return (or Discard).
func (p *NetPool) Take() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) == 0 {
		p.misses++
		return ""
	}
	id := p.idle[len(p.idle)-1]
	p.idle = p.idle[:len(p.idle)-1]
	p.busy[id] = true
	p.hits++
	return id
}

// Return gives back a holder once the sandbox that joined it is removed.
func (p *NetPool) Return(id string) {
	if p == nil || id == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.busy, id)
	if p.closed || p.owned() >= p.target {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_ = p.e.Remove(context.Background(), id)
		}()
		return
	}
	p.idle = append(p.idle, id)
}

// Discard removes a holder that could not serve (it died), and starts
// another in its place.
func (p *NetPool) Discard(id string) {
	if p == nil || id == "" {
		return
	}
	p.mu.Lock()
	delete(p.busy, id)
	p.refillLocked()
	p.mu.Unlock()
	_ = p.e.Remove(context.Background(), id)
}

// Alive reports whether holder id is running: whether a sandbox that
// failed to start in its namespace failed for the holder's sake.
func (p *NetPool) Alive(ctx context.Context, id string) bool {
	if p == nil || id == "" {
		return false
	}
	info, err := p.e.api.ContainerInspect(ctx, id)
	return err == nil && info.State != nil && info.State.Running
}

// Stats are how often Take found a holder ready.
func (p *NetPool) Stats() (hits, misses int) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits, p.misses
}

// Idle is how many holders are ready for Take now.
func (p *NetPool) Idle() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// Holders lists the holders the pool owns now, idle and in use.
func (p *NetPool) Holders() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holdersLocked()
}

// holdersLocked lists the idle holders and those in use.
func (p *NetPool) holdersLocked() []string {
	out := append([]string(nil), p.idle...)
	for id := range p.busy {
		out = append(out, id)
	}
	return out
}

// Close removes every holder of the pool (those in use too: close it after
// the sandboxes) and stops it from starting more. It finishes even if ctx
// is cancelled.
func (p *NetPool) Close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	ids := p.holdersLocked()
	p.idle, p.busy = nil, map[string]bool{}
	p.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, p.e.Remove(ctx, id))
	}
	return errors.Join(errs...)
}

// startNetHolder creates and starts one holder of pool from image.
func (e *Engine) startNetHolder(ctx context.Context, image, pool string) (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("overnight-netns-%s-%s", e.state[:min(12, len(e.state))], hex.EncodeToString(b[:]))
	labels := map[string]string{sandbox.LabelManaged: "true", sandbox.LabelState: e.state, LabelRole: RoleNetNS, LabelPool: pool}
	pids := int64(8)
	resp, err := e.api.ContainerCreate(ctx, &container.Config{
		Image: image, Entrypoint: []string{sandbox.InitPath, "pause"}, Cmd: []string{}, User: sandbox.DefaultUser, Labels: labels,
	}, hardenedHost("none", "64k", 1, container.Resources{Memory: 32 << 20, MemorySwap: 32 << 20, PidsLimit: &pids, NanoCPUs: 100_000_000}), nil, nil, name)
	if err != nil {
		// A create that timed out may have made the container all the
		// same: nobody would know its id.
		_ = e.Remove(context.WithoutCancel(ctx), name)
		return "", wrap("create network namespace holder", name, err)
	}
	if err := e.api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		_ = e.Remove(context.WithoutCancel(ctx), resp.ID)
		return "", wrap("start network namespace holder", name, err)
	}
	return resp.ID, nil
}

// ReapNetHolders removes this Engine's state directory's holders except
// those of the pool whose ID is keepPool ("": all of them) — those a
// process that died left behind. It returns the removed ids.
func (e *Engine) ReapNetHolders(ctx context.Context, keepPool string) ([]string, error) {
	cs, err := e.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"), filters.Arg("label", sandbox.LabelState+"="+e.state),
		filters.Arg("label", LabelRole+"="+RoleNetNS))})
	if err != nil {
		return nil, wrap("reap network namespace holders: list", "containers", err)
	}
	var removed []string
	var errs []error
	for _, c := range cs {
		if keepPool != "" && c.Labels[LabelPool] == keepPool {
			continue
		}
		if err := e.Remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, c.ID)
	}
	return removed, errors.Join(errs...)
}

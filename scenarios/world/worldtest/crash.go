package worldtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/overnight-dev/overnight/scenarios/world"
	"github.com/overnight-dev/overnight/scenarios/world/remote"
)

// crashRule: a world SIGKILLed right after it answered comes back, on the
// same data, with every answered apply (lookup finds each key, its ledger
// and state as they were); killed with an apply in flight, it comes back
// with that apply whole or not at all.
func (k *kit) crashRule(ctx context.Context) (string, error) {
	var keys []string
	var outcomes []world.Outcome
	for i, ex := range k.desc.Examples {
		key := k.key(fmt.Sprint(i + 1))
		resp, err := k.applyDone(ctx, "", key, ex, k.now())
		if err != nil {
			return "", fmt.Errorf("example %d: %w", i+1, err)
		}
		keys, outcomes = append(keys, key), append(outcomes, resp.Outcome)
	}
	ledger1, err := k.rawLedger(ctx, "")
	if err != nil {
		return "", err
	}
	state1, err := k.state(ctx, "")
	if err != nil {
		return "", err
	}
	k.proc.kill()
	if err := k.restart(ctx); err != nil {
		return "", fmt.Errorf("SIGKILLed right after it answered %d applies: %w", len(keys), err)
	}
	for i, key := range keys {
		got, err := k.lookup(ctx, "", key)
		if err != nil {
			return "", fmt.Errorf("after a SIGKILL and a restart on %s: %w", k.data, err)
		}
		if !got.Found || got.Outcome == nil || !sameJSON(*got.Outcome, outcomes[i]) {
			return "", fmt.Errorf("SIGKILLed right after it answered example %d (%s key %s) with %s, and started again on %s: lookup answers %s; an apply is answered only once it is durable",
				i+1, k.desc.Examples[i].Kind, key, outcomeText(outcomes[i]), k.data, lookupText(got))
		}
	}
	ledger2, err := k.rawLedger(ctx, "")
	if err != nil {
		return "", err
	}
	if !sameJSON(ledger2, ledger1) {
		return "", fmt.Errorf("SIGKILLed and started again on %s: its ledger was %s, and is %s", k.data, jsonText(ledger1), jsonText(ledger2))
	}
	state2, err := k.state(ctx, "")
	if err != nil {
		return "", err
	}
	if !sameJSON(state2, state1) {
		return "", fmt.Errorf("SIGKILLed and started again on %s: its state was %s, and is %s", k.data, jsonText(state1), jsonText(state2))
	}

	// Again, with an apply in flight: written whole to the world, and the
	// world killed before it can answer.
	key := k.key("in-flight")
	ex := k.desc.Examples[0]
	when, err := k.killInFlight(ctx, key, ex)
	if err != nil {
		return "", err
	}
	if err := k.restart(ctx); err != nil {
		return "", fmt.Errorf("SIGKILLed with an apply in flight: %w", err)
	}
	got, err := k.lookup(ctx, "", key)
	if err != nil {
		return "", err
	}
	ledger3, err := k.rawLedger(ctx, "")
	if err != nil {
		return "", err
	}
	state3, err := k.state(ctx, "")
	if err != nil {
		return "", err
	}
	entries, err := decodeLedger(ledger3)
	if err != nil {
		return "", err
	}
	inLedger := slices.IndexFunc(entries, func(e world.LedgerEntry) bool { return e.Key == key })
	var fate string
	switch {
	case got.Found:
		if inLedger < 0 {
			return "", fmt.Errorf("SIGKILLed with an apply in flight (%s key %s): lookup finds it (%s), and the ledger has no entry of the key", ex.Kind, key, jsonText(got.Outcome))
		}
		if len(ledger3) < len(ledger1) || !sameJSON(ledger3[:len(ledger1)], ledger1) {
			return "", fmt.Errorf("SIGKILLed with an apply in flight: the ledger before it was %s, and is %s", jsonText(ledger1), jsonText(ledger3))
		}
		if got.Outcome == nil || !sameJSON(*got.Outcome, entries[inLedger].Outcome) {
			return "", fmt.Errorf("SIGKILLed with an apply in flight (key %s): lookup answers %s, and its ledger entry records %s", key, jsonText(got.Outcome), jsonText(entries[inLedger].Outcome))
		}
		fate = "it came back with the apply recorded whole (lookup and ledger agree)"
	default:
		if inLedger >= 0 {
			return "", fmt.Errorf("SIGKILLed with an apply in flight (%s key %s): the ledger has entry %d of the key, and lookup does not find it", ex.Kind, key, entries[inLedger].Seq)
		}
		if !sameJSON(ledger3, ledger1) || !sameJSON(state3, state1) {
			return "", fmt.Errorf("SIGKILLed with an apply in flight (%s key %s), which lookup does not find: yet the world changed, from %d ledger entries and state %s to %d and %s: half an apply survived",
				ex.Kind, key, len(ledger1), jsonText(state1), len(ledger3), jsonText(state3))
		}
		fate = "it came back without the apply, ledger and state as before"
	}
	return fmt.Sprintf("SIGKILLed right after answering %d applies and started again on the same data: lookup found every key with its outcome, ledger (%d entries) and state intact; SIGKILLed with an apply in flight, %s: %s",
		len(keys), len(ledger1), when, fate), nil
}

func decodeLedger(raw []json.RawMessage) ([]world.LedgerEntry, error) {
	out := make([]world.LedgerEntry, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return nil, fmt.Errorf("ledger entry %d: %s is not a ledger entry: %v", i, excerpt(r), err)
		}
	}
	return out, nil
}

// restart starts the world again on the same data dir (on a new port).
func (k *kit) restart(ctx context.Context) error {
	k.client.CloseIdleConnections()
	p, err := k.start(ctx)
	if err != nil {
		return fmt.Errorf("start it again on %s: %w", k.data, err)
	}
	k.proc, k.base = p, p.base
	return nil
}

// killInFlight writes an apply of c under key to the world, whole, on a
// connection of its own, waits until the world has read it off the socket
// (on Linux, where /proc/net/tcp shows the world's receive queue; at most
// a second), and SIGKILLs the world. It says what the world had done by
// then: read the request or not, answered or not.
func (k *kit) killInFlight(ctx context.Context, key string, c world.Call) (string, error) {
	body := mustJSON(remote.ApplyRequest{Key: key, Kind: c.Kind, Args: c.Args, Now: k.now()})
	addr := strings.TrimPrefix(k.base, "http://")
	d := net.Dialer{Timeout: k.opts.CallTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("dial %s for an apply in flight: %w", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(k.opts.CallTimeout))
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		remote.PathApply, addr, len(body), body)
	if _, err := conn.Write([]byte(req)); err != nil {
		return "", fmt.Errorf("write an apply in flight to %s: %w", addr, err)
	}
	read := waitRead(conn, time.Second)
	k.proc.kill()
	_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var b [16]byte
	n, _ := conn.Read(b[:])
	var when string
	switch {
	case n > 0:
		when = "after it had answered (it was quicker than the kill)"
	case read == readYes:
		when = "after it had read the request, before it answered"
	case read == readNo:
		when = "before it had read the request (it did not within a second)"
	default:
		when = "right after the request was written (where the world was, this system does not show)"
	}
	return when, nil
}

// Whether the world read a request off its socket.
const (
	readUnknown = iota
	readYes
	readNo
)

// waitRead waits until the world's end of conn has nothing left to read
// (its receive queue in /proc/net/tcp is empty), for at most limit.
func waitRead(conn net.Conn, limit time.Duration) int {
	local, ok1 := conn.LocalAddr().(*net.TCPAddr)
	remoteAddr, ok2 := conn.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 || remoteAddr.IP.To4() == nil {
		return readUnknown
	}
	// The world's socket: local address the world's, remote ours.
	want := fmt.Sprintf("%s %s", procAddr(remoteAddr), procAddr(local))
	deadline := time.Now().Add(limit)
	for range 10000 {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			return readUnknown
		}
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 || f[1]+" "+f[2] != want {
				continue
			}
			found = true
			if _, rx, ok := strings.Cut(f[4], ":"); ok && strings.Trim(rx, "0") == "" {
				return readYes
			}
		}
		if !found {
			return readUnknown
		}
		if time.Now().After(deadline) {
			return readNo
		}
		time.Sleep(time.Millisecond)
	}
	return readNo
}

// procAddr is an IPv4 address as /proc/net/tcp writes it: the address's
// 32 bits in host (little-endian) order, then the port, in hex.
func procAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
}

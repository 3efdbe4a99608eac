package remote

import (
	"errors"
	"fmt"
)

// ErrWorld is wrapped by every Client error that is the world's fault: it
// could not be reached, did not answer in time, answered something that is
// not JSON, failed with a 5xx, or answered with a body of the wrong shape.
// The harness treats an effect whose apply failed so as unknown, and
// reconciles it by lookup once the world answers again.
var ErrWorld = errors.New("the world failed")

// worldError is a failure that is the world's fault: the message names
// the world, the call and what was wrong; it wraps ErrWorld and the cause.
type worldError struct {
	label, call, problem string
	cause                error
}

func (e *worldError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.label, e.call, e.problem)
}

func (e *worldError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrWorld}
	}
	return []error{ErrWorld, e.cause}
}

// RefusedError is a call the world refused (a 4xx status, or 501
// unsupported) with an ErrorBody: the call itself was wrong or asked for
// something the world does not offer. It is not ErrWorld. Code
// unknown_version wraps world.ErrUnknownAPIVersion, replay_differs
// world.ErrNotReplayable, and unsupported on the goal call world.ErrNoGoal.
type RefusedError struct {
	// World is the world's label, e.g. `world "cloud" (http://127.0.0.1:8080)`.
	World string
	// Call is what was asked, e.g. "set_version v9".
	Call string
	// Status is the HTTP status of the answer; 0 when the client refused
	// the call itself, from what the world's description declares.
	Status int
	// Code and Message are the ErrorBody's.
	Code    string
	Message string

	sentinel error
}

func (e *RefusedError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s: %s: refused (%s, by the client from its description): %s", e.World, e.Call, e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s: refused (%d %s): %s", e.World, e.Call, e.Status, e.Code, e.Message)
}

// Unwrap returns the sentinel of the world package the code stands for,
// if any.
func (e *RefusedError) Unwrap() error { return e.sentinel }

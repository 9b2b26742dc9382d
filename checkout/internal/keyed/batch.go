package keyed

import (
	"context"
)

// Known is one request of a batch whose key the batch found existing (or swept, with its
// tombstone): by its own look-up, or by losing its claim to another request.
type Known struct {
	Request
	Fingerprint [32]byte
	Key         *Key
	Op          Operation
	// Runs says the request can run a key in progress: wait for it or take it over, as
	// Execute does. A request whose claim completes its key (a sale paid at the register)
	// cannot, and is refused in use.
	Runs bool
}

// Answer is what ExecuteMany says of one Known request: its Result, its refusal (Err), or
// Pending, a key in progress that the request Runs, for the caller to hand to Execute as
// it schedules its batch's work.
type Answer struct {
	Result
	Err     error
	Pending bool
}

// ExecuteMany answers the requests of a batch whose keys exist by the one decision table
// that answers Execute (an expired key, a reused one, a replay, needs attention, in use),
// with the same events in each key's history, so that a batch's request and the same
// request sent alone answer alike (TestKeyStatesAnswerAlikeAtEveryDoor). It claims
// nothing: the batch's own statement claims its new keys.
func (e *Engine) ExecuteMany(ctx context.Context, batch []Known) []Answer {
	out := make([]Answer, len(batch))
	for i := range batch {
		kn := &batch[i]
		d, res, err := e.decide(ctx, kn.Request, kn.Fingerprint, kn.Key, &intent{spec: kn.Op.Spec()}, kn.Op, e.cfg.Now())
		switch {
		case d == decided:
			out[i] = Answer{Result: res, Err: err}
		case kn.Runs:
			out[i] = Answer{Pending: true}
		default:
			out[i] = Answer{Err: e.refuseInUse(kn.Request, kn.Key)}
		}
	}
	return out
}

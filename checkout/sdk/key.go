package sdk

import (
	"crypto/rand"
	"fmt"
)

// NewKey returns a new Idempotency-Key: a random (version 4) UUID. Make one per intent, when
// the customer decides to pay (or the merchant to refund), store it with the pending intent
// before the first attempt, and send it on every attempt of that intent, across restarts.
// Make another only for another intent: the customer changed the purchase, or a problem said
// safe_new_key (Error.SafeNewKey).
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

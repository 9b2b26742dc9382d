package problem

import (
	"fmt"
	"net/http"
	"strings"
)

// Advice is what a client should do on receiving a problem of this code, said from the
// table's flags so that the page of a code (/problems/{code}) cannot contradict the
// retryable and safe_new_key members its problems carry.
func (s Spec) Advice() string {
	switch {
	case s.PerOccurrence:
		return "Read safe_new_key in the problem. When it is false, this is the same purchase as the one the key was first used for: do not pay again, look the order up by order_id. When it is true, this is another purchase that reused an old key: send it again under a new key."
	case s.Retryable && s.RetryAfter > 0:
		return fmt.Sprintf("Send the same request again, with the same Idempotency-Key, after the Retry-After delay (%d s here; it may grow). Never switch to a new key for this purchase: the first request may have charged the card, or may still charge it, and only the same key finds that charge.", s.RetryAfter)
	case s.Retryable:
		return "Send the same request again, with the same Idempotency-Key, after a growing delay. Never switch to a new key for this purchase: the first request may have charged the card, and only the same key finds that charge."
	case !s.SafeNewKey:
		return "Do not resend this request, and do not send its purchase under a new key: the key already stands for another request, which may have charged. Look the key up with GET /v1/idempotency-keys/{key} to see what it did."
	case s.Status >= 500:
		return "Retrying does not help: tekrar's operator has to change its configuration. Nothing was stored; send the request again once they have."
	default:
		return "Resending the request unchanged gets the same answer. Change what the problem names (see what happened), then send it again. Nothing was charged by it: the same Idempotency-Key may be reused for the fixed request, and a new one is safe too."
	}
}

// Example is a response carrying a problem of this code, as a client receives it to a POST
// /v1/orders with an Idempotency-Key: the status line, the headers the code brings and the
// body exactly as Write renders it (without the members a particular occurrence adds).
func (s Spec) Example() string {
	p := Of(s.Code).Advised()
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\nContent-Type: %s\n", s.Status, http.StatusText(s.Status), ContentType)
	if ra := retryAfter(s.Code); ra != "" {
		fmt.Fprintf(&b, "Retry-After: %s\n", ra)
	}
	b.WriteString("\n")
	b.Write(p.Body("/v1/orders"))
	b.WriteString("\n")
	return b.String()
}

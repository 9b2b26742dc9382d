package main

// What a retrying client was told, shared by the harnesses that check it afterwards:
// TestCrash (crash_test.go) here and TestFailover (cmd/tekrar/failover). The answer and its
// comparison are proctest's; which answers end a key's retries is this package's.

import "github.com/tekrar/tekrar/internal/proctest"

// answer is what one attempt of a key got; Err is set when there was no HTTP answer.
type answer = proctest.Answer

var (
	record       = proctest.Record
	problemCode  = proctest.ProblemCode
	disagreement = proctest.Disagreement
)

// final reports whether a is an outcome of its key, which every retry must see again.
func final(a answer) bool {
	return a.Status == 201 || a.Status == 402 || (a.Status == 409 && a.Code == "payment_abandoned")
}

// retryable reports whether a client should send the same key again after a.
func retryable(a answer) bool {
	return a.Err != "" || a.Status == 503 || (a.Status == 409 && a.Code != "payment_abandoned")
}

// expectedStatus: anything else is a bug (a 500, a 422 for a byte-identical retry...).
func expectedStatus(status int) bool {
	return status == 201 || status == 402 || status == 409 || status == 503
}

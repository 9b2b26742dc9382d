package main

// What a retrying client was told, shared by the harnesses that check it afterwards:
// TestCrash (crash_test.go) and TestFailover (failover_test.go, with its checker in
// failover_check_test.go).

import (
	"bytes"
	"encoding/json"
)

// answer is what one attempt of a key got; Err is set when there was no HTTP answer.
type answer struct {
	Status   int
	Code     string // the problem code, if the body is a problem
	Body     []byte
	Replayed string // the Idempotent-Replayed header: "true" when the key's stored answer was replayed
	Err      string
}

// record is the answer of one attempt, from send's result.
func record(res response, err error) answer {
	if err != nil {
		return answer{Err: err.Error()}
	}
	return answer{Status: res.Status, Code: problemCode(res.Body), Body: res.Body, Replayed: res.Header.Get("Idempotent-Replayed")}
}

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

func problemCode(body []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Code
}

// disagreement returns the first answer of answers that is an outcome (isOutcome) and the
// first later outcome whose status or body differs from it, or nil, nil when every outcome
// is the first one again byte for byte. A key's outcome is stored once: every retry,
// across crashes and failovers, must be answered with the same bytes.
func disagreement(answers []answer, isOutcome func(answer) bool) (first, other *answer) {
	for i := range answers {
		a := &answers[i]
		if a.Err != "" || !isOutcome(*a) {
			continue
		}
		if first == nil {
			first = a
			continue
		}
		if a.Status != first.Status || !bytes.Equal(a.Body, first.Body) {
			return first, a
		}
	}
	return first, nil
}

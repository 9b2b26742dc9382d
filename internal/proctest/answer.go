package proctest

import (
	"bytes"
	"encoding/json"
)

// Answer is what one attempt of a key got; Err is set when there was no HTTP answer. The
// harnesses keep every answer of every key and check them afterwards: TestCrash
// (cmd/tekrar) and TestFailover (cmd/tekrar/failover).
type Answer struct {
	Status   int
	Code     string // the problem code, if the body is a problem
	Body     []byte
	Replayed string // the Idempotent-Replayed header: "true" when the key's stored answer was replayed
	Err      string
}

// Record is the answer of one attempt, from Send's result.
func Record(res Response, err error) Answer {
	if err != nil {
		return Answer{Err: err.Error()}
	}
	return Answer{Status: res.Status, Code: ProblemCode(res.Body), Body: res.Body, Replayed: res.Header.Get("Idempotent-Replayed")}
}

// ProblemCode is the code of a problem+json body, or "".
func ProblemCode(body []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Code
}

// Disagreement returns the first answer of answers that is an outcome (isOutcome) and the
// first later outcome whose status or body differs from it, or nil, nil when every outcome
// is the first one again byte for byte. A key's outcome is stored once: every retry,
// across crashes and failovers, must be answered with the same bytes.
func Disagreement(answers []Answer, isOutcome func(Answer) bool) (first, other *Answer) {
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

package psp

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/internal/problem"
)

// TestProviderAnswerTables: docs/providers.md lists every row of every table.
func TestProviderAnswerTables(t *testing.T) {
	doc, err := os.ReadFile("../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	for op, rows := range providerAnswers {
		for _, a := range rows {
			answer := "result"
			if a.Err != nil && a.Err != errUnknownAnswer {
				answer = ErrorCode(a.Err)
			} else if a.Err == errUnknownAnswer {
				answer = "any other error"
			}
			line := fmt.Sprintf("| `%s` | %s | %s |", op, answer, a.Verdict)
			if !strings.Contains(string(doc), line) {
				t.Errorf("docs/providers.md lacks the row %q", line)
			}
		}
	}
}

// TestAnswerOf: an answer is the first row whose error it wraps, a result the nil row, and
// any error a table does not list its last row (unknown); every table ends in that row.
func TestAnswerOf(t *testing.T) {
	for _, tc := range []struct {
		op      string
		err     error
		verdict Verdict
		problem problem.Code
	}{
		{OpCharge, nil, VerdictDone, ""},
		{OpCharge, fmt.Errorf("%w: currency", ErrInvalidRequest), VerdictAttention, problem.CodeNeedsAttention},
		{OpCharge, errors.New("connection reset"), VerdictUnknown, problem.CodePaymentPending},
		{OpCharge, ErrNotFound, VerdictUnknown, problem.CodePaymentPending}, // not an answer a charge gives
		{OpRefund, ErrRefundExceedsCharge, VerdictLookUp, problem.CodeRefundedAtProvider},
		{OpLookupCharge, ErrNotFound, VerdictNone, ""},
		{OpCancelCharge, ErrCancelUnsupported, VerdictRefused, problem.CodePaymentAbandoned},
		{OpCardFingerprint, errors.New("timeout"), VerdictUnknown, problem.CodeCardIdentityUnavailable},
	} {
		t.Run(fmt.Sprint(tc.op, " ", tc.err), func(t *testing.T) {
			a := AnswerOf(tc.op, tc.err)
			if a.Verdict != tc.verdict || a.Problem != tc.problem {
				t.Errorf("%s %s, want %s %s", a.Verdict, a.Problem, tc.verdict, tc.problem)
			}
		})
	}
	for _, op := range AnswerOps() {
		rows := AnswerTable(op)
		if last := rows[len(rows)-1]; last.Err != errUnknownAnswer || last.Verdict != VerdictUnknown {
			t.Errorf("%s's table ends in %v %s, not any other error: unknown", op, last.Err, last.Verdict)
		}
	}
}

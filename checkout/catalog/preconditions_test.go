package catalog

import "testing"

// TestPreconditionHolds: If-Match and If-None-Match as RFC 9110 reads them, with strong
// comparison: a weak tag never matches, and no header asks nothing.
func TestPreconditionHolds(t *testing.T) {
	tests := []struct {
		name    string
		pre     Precondition
		exists  bool
		version int64
		want    bool
	}{
		{"no header, absent", Precondition{}, false, 0, true},
		{"no header, present", Precondition{}, true, 3, true},
		{"if-match star, absent", Precondition{IfMatch: []string{"*"}}, false, 0, false},
		{"if-match star, present", Precondition{IfMatch: []string{"*"}}, true, 3, true},
		{"if-match current", Precondition{IfMatch: []string{`"2"`, `"3"`}}, true, 3, true},
		{"if-match stale", Precondition{IfMatch: []string{`"2"`}}, true, 3, false},
		{"if-match weak", Precondition{IfMatch: []string{`W/"3"`}}, true, 3, false},
		{"if-none-match star, absent", Precondition{IfNoneMatch: []string{"*"}}, false, 0, true},
		{"if-none-match star, present", Precondition{IfNoneMatch: []string{"*"}}, true, 3, false},
		{"if-none-match current", Precondition{IfNoneMatch: []string{`"3"`}}, true, 3, false},
		{"if-none-match other", Precondition{IfNoneMatch: []string{`"2"`}}, true, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.pre.holds(tt.exists, tt.version); got != tt.want {
				t.Errorf("holds(%v, %d) = %v, want %v", tt.exists, tt.version, got, tt.want)
			}
		})
	}
}

func TestETag(t *testing.T) {
	if got := ETag(42); got != `"42"` {
		t.Errorf("ETag(42) = %s, want \"42\"", got)
	}
}

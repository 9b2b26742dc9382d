package checkout

import (
	"regexp"
	"slices"
	"testing"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// orderStatusSets are the named sets of order statuses, each checked in Go and in SQL.
var orderStatusSets = map[string]StatusSet{
	"OrderStatuses":   OrderStatuses,
	"PendingStatuses": PendingStatuses, "ChargedStatuses": ChargedStatuses,
	"RefundableStatuses": RefundableStatuses, "UnchargedStatuses": UnchargedStatuses,
	"PlanChargingStatuses": PlanChargingStatuses,
}

// domainOrderStatuses reads the statuses the order_status domain's CHECK allows, from the
// migrated schema.
func domainOrderStatuses(t *testing.T) []string {
	t.Helper()
	var def string
	if err := dbtest.New(t).Get(&def, `
		SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
		 WHERE c.contypid = 'order_status'::regtype AND c.contype = 'c'`); err != nil {
		t.Fatalf("order_status CHECK: %v", err)
	}
	var statuses []string
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(def, -1) {
		statuses = append(statuses, m[1])
	}
	if len(statuses) == 0 {
		t.Fatalf("no statuses in %q", def)
	}
	return statuses
}

// TestOrderStatusesClassified: a status the migrations add to orders must be classified
// too (pending, charged or uncharged, exactly one), and no set names a status the
// migrations do not allow.
func TestOrderStatusesClassified(t *testing.T) {
	statuses := domainOrderStatuses(t)
	if got, want := slices.Sorted(slices.Values(OrderStatuses.Members())), slices.Sorted(slices.Values(statuses)); !slices.Equal(got, want) {
		t.Errorf("OrderStatuses are %v, the order_status domain allows %v", got, want)
	}
	for _, s := range statuses {
		var in []string
		for name, set := range map[string]StatusSet{"PendingStatuses": PendingStatuses,
			"ChargedStatuses": ChargedStatuses, "UnchargedStatuses": UnchargedStatuses} {
			if set.Has(s) {
				in = append(in, name)
			}
		}
		if len(in) != 1 {
			t.Errorf("order status %q is in %v, want exactly one of PendingStatuses, ChargedStatuses, UnchargedStatuses", s, in)
		}
	}
	for name, set := range orderStatusSets {
		for _, m := range set.Members() {
			if !slices.Contains(statuses, m) {
				t.Errorf("%s names %q, which order_status does not allow (%v)", name, m, statuses)
			}
		}
	}
	for _, m := range RefundableStatuses.Members() {
		if !ChargedStatuses.Has(m) {
			t.Errorf("refundable status %q is not charged", m)
		}
	}
}

// TestStatusSetSQLAgreesWithHas: for each status the schema allows (and one it does not),
// Postgres's "status IN set.SQL()" says what set.Has says.
func TestStatusSetSQLAgreesWithHas(t *testing.T) {
	db := dbtest.New(t)
	statuses := append(domainOrderStatuses(t), "no_such_status")
	for name, set := range orderStatusSets {
		for _, s := range statuses {
			var in bool
			if err := db.Get(&in, `SELECT CAST($1 AS text) IN `+set.SQL(), s); err != nil {
				t.Fatalf("%s.SQL() %s: %v", name, set.SQL(), err)
			}
			if in != set.Has(s) {
				t.Errorf("%s: SQL %s says %v for %q, Has says %v", name, set.SQL(), in, s, set.Has(s))
			}
		}
	}
}

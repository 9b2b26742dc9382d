package report

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/internal/checkouttest"
)

// The reads the console's CSV exports page through: an endpoint's deliveries and the
// inbox's events, each paged newest first by its keyset cursor across rows that share a
// time, every row once; EachPage reads a list to its end, a page at a time, and stops at a
// refusal before handing on a row.
func TestExportReads(t *testing.T) {
	for name, db := range consoleDBs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			shop := checkouttest.ClientRow(t, db, "shop app")
			var we [2]string
			for i := range we {
				if err := db.Get(&we[i], `INSERT INTO webhook_endpoints (client_id, url, event_types, created_at)
					VALUES ($1, 'https://93.184.215.14/', '{order.paid}', $2) RETURNING public_id`, shop, at0); err != nil {
					t.Fatal(err)
				}
			}
			// 7 deliveries to the first endpoint, in threes of one instant; 2 to the other.
			for i := range 9 {
				to := we[0]
				if i >= 7 {
					to = we[1]
				}
				if _, err := db.Exec(`INSERT INTO webhook_deliveries (event_id, event_type, endpoint_id, payload, created_at)
					SELECT $2, 'order.paid', id, '{}', $3 FROM webhook_endpoints WHERE public_id = $1`,
					to, fmt.Sprint("evt_x", i), at0.Add(-time.Duration(i/3)*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			// 7 events of charge ch_p in threes of one instant, one of another charge; 3 of a type.
			for i := range 8 {
				charge, typ := "ch_p", "charge.refunded"
				if i == 7 {
					charge = "ch_q"
				}
				if i%3 == 0 {
					typ = "charge.succeeded"
				}
				if _, err := db.Exec(`INSERT INTO provider_events (provider, event_id, type, charge_id, sequence, body, outcome,
					received_at, deliveries, last_delivery_at) VALUES ('psp', $1, $2, $3, 1, '{}', 'applied', $4, 1, $4)`,
					fmt.Sprintf("evt_p%d", 9-i), typ, charge, at0.Add(-time.Duration(i/3)*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			ids := func(q string, args ...any) string {
				t.Helper()
				var out []string
				if err := db.Select(&out, q, args...); err != nil {
					t.Fatal(err)
				}
				return strings.Join(out, " ")
			}
			deliveries := func(endpoint string) string {
				var got []string
				for _, d := range collectPages(t, 2, func(p Page) ([]EndpointDelivery, Page, error) {
					return EndpointDeliveries(ctx, db, endpoint, p)
				}) {
					got = append(got, d.EventID)
				}
				return strings.Join(got, " ")
			}
			for _, endpoint := range we {
				want := ids(`SELECT d.event_id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
					WHERE w.public_id = $1 ORDER BY d.created_at DESC, d.id DESC`, endpoint)
				if got := deliveries(endpoint); got != want {
					t.Errorf("deliveries of %s: %s, want %s", endpoint, got, want)
				}
			}
			if _, _, err := EndpointDeliveries(ctx, db, "we_00000000000000000000000000000000", Page{}); err != ErrEndpointNotFound {
				t.Errorf("an endpoint that is none: %v", err)
			}

			for _, tt := range []struct {
				f    InboxFilter
				want string
			}{
				{InboxFilter{}, `SELECT event_id FROM provider_events ORDER BY received_at DESC, event_id`},
				{InboxFilter{Charge: "ch_p"}, `SELECT event_id FROM provider_events WHERE charge_id = 'ch_p' ORDER BY received_at DESC, event_id`},
				{InboxFilter{Charge: "ch_q", Query: "charge.succeeded"}, // the search replaces the charge, as on the page
					`SELECT event_id FROM provider_events WHERE type = 'charge.succeeded' ORDER BY received_at DESC, event_id`},
				{InboxFilter{Query: "evt_p5"}, `SELECT 'evt_p5'`},
				{InboxFilter{Query: "x\x00y"}, `SELECT '' WHERE false`},
			} {
				var got []string
				for _, e := range collectPages(t, 2, func(p Page) ([]InboxEvent, Page, error) { return InboxEvents(ctx, db, tt.f, p) }) {
					got = append(got, e.ID)
				}
				if want := ids(tt.want); strings.Join(got, " ") != want {
					t.Errorf("inbox events of %+v: %v, want %s", tt.f, got, want)
				}
			}

			// EachPage: every row, a page at a time; a refusal before any row.
			var pages, rows int
			err := EachPage(ctx, func(ctx context.Context, p Page) ([]InboxEvent, Page, error) {
				return InboxEvents(ctx, db, InboxFilter{}, p)
			}, func(r []InboxEvent) error { pages, rows = pages+1, rows+len(r); return nil })
			if err != nil || pages != 1 || rows != 8 {
				t.Errorf("EachPage of the inbox: %d pages, %d rows, %v", pages, rows, err)
			}
			err = EachPage(ctx, func(ctx context.Context, p Page) ([]KeyRow, Page, error) {
				return ListKeys(ctx, db, KeyFilter{State: "sideways"}, p)
			}, func([]KeyRow) error { t.Error("a refused filter handed on rows"); return nil })
			if !isInvalidQuery(err) {
				t.Errorf("EachPage of a refused filter: %v", err)
			}
		})
	}
}

func isInvalidQuery(err error) bool { return errors.Is(err, ErrInvalidQuery) }

package checkout

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/jmoiron/sqlx"
)

// notKept is what a conflict differed in when nothing tekrar kept of the first request
// differs: the card token is never stored, and two ways of writing one value (1.0 and 1)
// give two fingerprints.
const notKept = "something tekrar does not keep (the card token, or how a value was written)"

// conflictDifferences says, for an operator reading the key's history, in what a request
// that reused a key differs from the key's first request, as far as tekrar kept that
// request: its route, and the order's or refund's fields. It runs on the refusal path
// only; an error leaves the list empty, since the refusal stands either way.
func (s *Service) conflictDifferences(ctx context.Context, k *Key, req Request, op operation) []string {
	if k.Method != req.Method || k.Path != req.Path {
		return []string{fmt.Sprintf("route: %s %s → %s %s", k.Method, k.Path, req.Method, req.Path)}
	}
	d, err := op.differences(ctx, k)
	if err != nil {
		s.logger.Warn("describe a key conflict", "err", err, "key_id", k.ID)
		return nil
	}
	if len(d) == 0 {
		return []string{notKept}
	}
	return d
}

// storedOrder is what an order keeps of the request that made it.
type storedOrder struct {
	Currency      string         `db:"currency"`
	Amount        int64          `db:"amount"`
	Items         []byte         `db:"items"`
	CustomerID    sql.NullString `db:"customer_id"`
	CustomerEmail sql.NullString `db:"customer_email"`
	Metadata      []byte         `db:"metadata"`
}

func (o *orderOp) differences(ctx context.Context, k *Key) ([]string, error) {
	if !k.OrderID.Valid {
		return nil, nil
	}
	var st storedOrder
	if err := sqlx.GetContext(ctx, o.s.db, &st, `
		SELECT currency, amount, items, customer_id, customer_email, metadata
		  FROM orders WHERE id = $1 AND client_id = $2`, k.OrderID.Int64, k.ClientID); err != nil {
		return nil, fmt.Errorf("load order %d: %w", k.OrderID.Int64, err)
	}
	var items []Item
	if err := json.Unmarshal(st.Items, &items); err != nil {
		return nil, fmt.Errorf("order %d items: %w", k.OrderID.Int64, err)
	}
	var metadata map[string]string
	if len(st.Metadata) > 0 {
		if err := json.Unmarshal(st.Metadata, &metadata); err != nil {
			return nil, fmt.Errorf("order %d metadata: %w", k.OrderID.Int64, err)
		}
	}
	in := o.in
	var cust Customer
	if in.Customer != nil {
		cust = *in.Customer
	}
	var d []string
	if st.Currency != in.Currency {
		d = append(d, fmt.Sprintf("currency: %s → %s", st.Currency, in.Currency))
	}
	if st.Amount != in.Amount || st.Currency != in.Currency {
		d = append(d, fmt.Sprintf("amount: %s → %s", FormatAmount(st.Amount, st.Currency), FormatAmount(in.Amount, in.Currency)))
	}
	if !slices.Equal(items, in.Items) {
		d = append(d, "items")
	}
	if st.CustomerID.String != cust.ID {
		d = append(d, fmt.Sprintf("customer id: %q → %q", st.CustomerID.String, cust.ID))
	}
	if st.CustomerEmail.String != cust.Email {
		d = append(d, "customer email")
	}
	if !maps.Equal(metadata, in.Metadata) {
		d = append(d, "metadata")
	}
	return d, nil
}

func (r *refundOp) differences(ctx context.Context, k *Key) ([]string, error) {
	if !k.RefundID.Valid {
		return nil, nil
	}
	var st struct {
		Amount   int64  `db:"amount"`
		Currency string `db:"currency"`
		Reason   string `db:"reason"`
	}
	if err := sqlx.GetContext(ctx, r.s.db, &st, `
		SELECT amount, currency, coalesce(reason, '') AS reason FROM refunds WHERE id = $1 AND client_id = $2`,
		k.RefundID.Int64, k.ClientID); err != nil {
		return nil, fmt.Errorf("load refund %d: %w", k.RefundID.Int64, err)
	}
	var d []string
	if st.Amount != r.in.Amount {
		d = append(d, fmt.Sprintf("amount: %s → %s", FormatAmount(st.Amount, st.Currency), FormatAmount(r.in.Amount, st.Currency)))
	}
	if st.Reason != r.in.Reason {
		d = append(d, "reason")
	}
	return d, nil
}

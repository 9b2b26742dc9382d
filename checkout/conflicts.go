package checkout

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/tekrar/tekrar/checkout/money"
)

func (o *orderOp) Differences(ctx context.Context, k *Key) ([]string, error) {
	if !k.OrderID.Valid {
		return nil, nil
	}
	st, err := getOrder(ctx, o.s.db, `o.id = $1 AND o.client_id = $2`, k.OrderID.Int64, k.ClientID)
	if err != nil {
		return nil, fmt.Errorf("load order %d: %w", k.OrderID.Int64, err)
	}
	items, metadata, err := st.itemsAndMetadata()
	if err != nil {
		return nil, err
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
		d = append(d, fmt.Sprintf("amount: %s → %s", money.Format(st.Amount, st.Currency), money.Format(in.Amount, in.Currency)))
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

func (r *refundOp) Differences(ctx context.Context, k *Key) ([]string, error) {
	if !k.RefundID.Valid {
		return nil, nil
	}
	st, err := loadRefund(ctx, r.s.db, k.RefundID.Int64)
	if err != nil {
		return nil, err
	}
	if st.ClientID != k.ClientID {
		return nil, fmt.Errorf("refund %d is not of client %d", k.RefundID.Int64, k.ClientID)
	}
	var d []string
	if st.Amount != r.in.Amount {
		d = append(d, fmt.Sprintf("amount: %s → %s", money.Format(st.Amount, st.Currency), money.Format(r.in.Amount, st.Currency)))
	}
	if st.Reason.String != r.in.Reason {
		d = append(d, "reason")
	}
	return d, nil
}

package psp

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// PaymentMethod is a card a customer saved at the provider, as real processors keep them:
// later charges name it (with its customer) instead of a single-use token. The token it was
// saved from is never stored; the sandbox keeps what the card does when charged.
type PaymentMethod struct {
	ID        string    `json:"id"` // "pm_" and random characters
	Customer  string    `json:"customer"`
	CardBrand string    `json:"card_brand"`
	CardLast4 string    `json:"card_last4"`
	Created   time.Time `json:"created"`
}

// SavePaymentMethod saves the card of token for customer (any id of 1 to 255 characters,
// "cus_..." by convention). The token's behaviour is kept: a method saved from tok_declined
// declines every charge. Tokens that fail, stall or time out cannot be saved.
func (s *Sandbox) SavePaymentMethod(ctx context.Context, customer, token string) (PaymentMethod, error) {
	if customer == "" || len(customer) > maxKeyLen {
		return PaymentMethod{}, fmt.Errorf("%w: customer must be 1 to %d characters", ErrInvalidRequest, maxKeyLen)
	}
	c := cardOf(token)
	if special(token) || c.declineCode == DeclineInvalidCard {
		return PaymentMethod{}, fmt.Errorf("%w: the sandbox cannot save token %q", ErrInvalidRequest, token)
	}
	if err := checkText("customer", customer); err != nil {
		return PaymentMethod{}, err
	}
	pm := PaymentMethod{ID: newID("pm_"), Customer: customer, CardBrand: c.brand, CardLast4: c.last4, Created: s.now().UTC()}
	_, err := s.db.ExecContext(ctx, `
		INSERT INTO psp_payment_methods (id, customer, card_brand, card_last4, decline_code, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6)`, pm.ID, customer, c.brand, c.last4, c.declineCode, pm.Created)
	if err != nil {
		return PaymentMethod{}, fmt.Errorf("psp sandbox: save payment method: %w", err)
	}
	return pm, nil
}

// ReplacePaymentMethodCard puts the card of token behind the saved method id, as a
// customer who updates an expired card does: its later charges meet the new card.
func (s *Sandbox) ReplacePaymentMethodCard(ctx context.Context, id, token string) error {
	c := cardOf(token)
	if special(token) || c.declineCode == DeclineInvalidCard {
		return fmt.Errorf("%w: the sandbox cannot save token %q", ErrInvalidRequest, token)
	}
	res, err := s.db.ExecContext(ctx, `
		UPDATE psp_payment_methods SET card_brand = $2, card_last4 = $3, decline_code = $4, updated_at = $5
		 WHERE id = $1`, id, c.brand, c.last4, c.declineCode, s.now())
	if err != nil {
		return fmt.Errorf("psp sandbox: replace card: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: no payment method has id %q", ErrNotFound, id)
	}
	return nil
}

// chargeSaved charges a saved payment method. The method is read when the charge is made:
// a repeated key is answered from the ledger by the insert, whatever the card does now. A
// method that does not exist or is another customer's declines as an invalid card.
func (s *Sandbox) chargeSaved(ctx context.Context, req ChargeRequest) (Charge, error) {
	var row struct {
		Brand       string `db:"card_brand"`
		Last4       string `db:"card_last4"`
		DeclineCode string `db:"decline_code"`
	}
	c := card{declineCode: DeclineInvalidCard}
	err := sqlx.GetContext(ctx, s.db, &row, `
		SELECT card_brand, card_last4, decline_code FROM psp_payment_methods WHERE id = $1 AND customer = $2`,
		req.PaymentMethod, req.Customer)
	switch {
	case err == nil:
		c = card{brand: row.Brand, last4: row.Last4, approve: row.DeclineCode == "", declineCode: row.DeclineCode}
	case !errors.Is(err, sql.ErrNoRows):
		return Charge{}, fmt.Errorf("psp sandbox: read payment method: %w", err)
	}
	return s.insertCharge(ctx, ctx, req, methodFingerprint(req.Customer, req.PaymentMethod), c)
}

// methodFingerprint stands for a saved card where a token's fingerprint stands for a token:
// a repeated key is refused (ErrKeyReused) if it names another method.
func methodFingerprint(customer, method string) []byte {
	h := sha256.Sum256([]byte("pm\x00" + customer + "\x00" + method))
	return h[:]
}

// Package admin is the operator console: login, the pages that answer "was I charged
// twice?", and the few actions an operator may take. It owns the operators table.
package admin

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/bcrypt"
)

// Roles an operator can have: a viewer investigates, an admin may also act (refund,
// release, expire).
const (
	RoleViewer = "viewer"
	RoleAdmin  = "admin"
)

// MinPasswordLength is the shortest console password accepted.
const MinPasswordLength = 10

// PasswordCost is the bcrypt cost of stored passwords.
const PasswordCost = 12

// SetOperator creates the operator with this email, or sets a new password and role for an
// existing one. cost is the bcrypt cost (PasswordCost outside tests).
func SetOperator(ctx context.Context, db sqlx.ExtContext, email, password, role string, cost int) error {
	email, err := normaliseEmail(email)
	if err != nil {
		return err
	}
	if len(password) < MinPasswordLength {
		return fmt.Errorf("password must be at least %d characters", MinPasswordLength)
	}
	if len(password) > 72 {
		return errors.New("password must be at most 72 bytes (a bcrypt limit)")
	}
	if role != RoleViewer && role != RoleAdmin {
		return fmt.Errorf("role must be %s or %s", RoleViewer, RoleAdmin)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	_, err = db.ExecContext(ctx, `
		INSERT INTO operators (email, password_hash, role) VALUES ($1, $2, $3)
		ON CONFLICT (email) DO UPDATE SET password_hash = excluded.password_hash, role = excluded.role`,
		email, string(hash), role)
	if err != nil {
		return fmt.Errorf("set operator: %w", err)
	}
	return nil
}

func normaliseEmail(email string) (string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email {
		return "", fmt.Errorf("%q is not an email address", email)
	}
	return email, nil
}

// Package admin is the operator console: login, the pages that answer "was I charged
// twice?", and the few actions an operator may take. It owns the operators table.
package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

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
// existing one, ending all their sessions: a password is reset because it may be known to
// someone else, who may be signed in with it. cost is the bcrypt cost (PasswordCost outside
// tests).
func SetOperator(ctx context.Context, db sqlx.ExtContext, email, password, role string, cost int) error {
	if err := CheckOperator(email, password, role); err != nil {
		return err
	}
	email, _ = normaliseEmail(email)
	hash, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	// One statement, so that no session outlives the password it was opened with.
	_, err = db.ExecContext(ctx, `
		WITH op AS (
		    INSERT INTO operators (email, password_hash, role) VALUES ($1, $2, $3)
		    ON CONFLICT (email) DO UPDATE SET password_hash = excluded.password_hash, role = excluded.role
		    RETURNING id)
		DELETE FROM operator_sessions WHERE operator_id IN (SELECT id FROM op)`,
		email, string(hash), role)
	if err != nil {
		return fmt.Errorf("set operator: %w", err)
	}
	return nil
}

// CheckOperator refuses what SetOperator would refuse before it touches the database: an
// address that is not one, a password too short or too long for bcrypt, an unknown role.
// `tekrar operators create` calls it before it connects, so that the mistake exits 2.
func CheckOperator(email, password, role string) error {
	if _, err := normaliseEmail(email); err != nil {
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

// EndSessions signs an operator out everywhere: every session of theirs ends, and the
// cookies that named them no longer work. It returns how many sessions were open.
func EndSessions(ctx context.Context, db sqlx.ExecerContext, operatorID int64) (int64, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM operator_sessions WHERE operator_id = $1`, operatorID)
	if err != nil {
		return 0, fmt.Errorf("end sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("end sessions: %w", err)
	}
	return n, nil
}

// OperatorRow is an operator as the operators page lists them.
type OperatorRow struct {
	Operator
	Sessions   int        `db:"sessions"`     // open now
	LastSignIn *time.Time `db:"last_sign_in"` // of the open sessions; nil without one
}

// ListOperators returns every operator, by email, with their open sessions. Operators are
// a handful of people: no paging.
func ListOperators(ctx context.Context, db sqlx.QueryerContext, now time.Time) ([]OperatorRow, error) {
	var rows []OperatorRow
	err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT o.id, o.email, o.role, count(s.token_hash) AS sessions, max(s.created_at) AS last_sign_in
		  FROM operators o LEFT JOIN operator_sessions s ON s.operator_id = o.id AND s.expires_at > $1
		 GROUP BY o.id
		 ORDER BY o.email`, now)
	if err != nil {
		return nil, fmt.Errorf("list operators: %w", err)
	}
	return rows, nil
}

// GetOperator returns one operator, or ErrNoOperator.
func GetOperator(ctx context.Context, db sqlx.QueryerContext, id int64, now time.Time) (OperatorRow, error) {
	var row OperatorRow
	err := sqlx.GetContext(ctx, db, &row, `
		SELECT o.id, o.email, o.role, count(s.token_hash) AS sessions, max(s.created_at) AS last_sign_in
		  FROM operators o LEFT JOIN operator_sessions s ON s.operator_id = o.id AND s.expires_at > $2
		 WHERE o.id = $1
		 GROUP BY o.id`, id, now)
	if errors.Is(err, sql.ErrNoRows) {
		return OperatorRow{}, ErrNoOperator
	}
	if err != nil {
		return OperatorRow{}, fmt.Errorf("get operator: %w", err)
	}
	return row, nil
}

// ErrNoOperator is an operator id that names no operator.
var ErrNoOperator = errors.New("no such operator")

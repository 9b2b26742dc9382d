package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/bcrypt"

	"github.com/tekrar/tekrar/internal/pgtext"
)

// Operator is a signed-in console user.
type Operator struct {
	ID    int64  `db:"id"`
	Email string `db:"email"`
	Role  string `db:"role"`
}

// CanAct reports whether the operator may take actions (refund, release, expire).
func (o Operator) CanAct() bool { return o.Role == RoleAdmin }

// Session is a signed-in operator and the CSRF token their forms must carry.
type Session struct {
	Operator Operator
	CSRF     string
}

// Sessions last this long, then the operator signs in again.
const sessionTTL = 12 * time.Hour

// Login throttling: after maxFailures failed sign-ins for one email within failureWindow,
// further attempts are refused until the window has passed, right password or not.
const (
	maxFailures   = 5
	failureWindow = 15 * time.Minute
)

var (
	// ErrBadLogin is a wrong email or password; which one is not said.
	ErrBadLogin = errors.New("wrong email or password")
	// ErrThrottled is too many failed sign-ins for an email.
	ErrThrottled = errors.New("too many failed sign-ins; try again later")
	// ErrNoSession is a missing, unknown or expired session.
	ErrNoSession = errors.New("not signed in")
)

// randomToken returns 256 random bits, URL-safe.
func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// dummyHash is compared against when the email is unknown, so that a sign-in takes as long
// whether or not the email exists.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("no such operator, no such password"), bcrypt.MinCost)

// Login checks an email and password and opens a session; it returns the session cookie's
// value. Failures are recorded for throttling.
func Login(ctx context.Context, db *sqlx.DB, email, password, userAgent, remoteAddr string, now time.Time) (string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	var failures int
	if err := db.GetContext(ctx, &failures,
		`SELECT count(*) FROM login_failures WHERE email = $1 AND at > $2`, email, now.Add(-failureWindow)); err != nil {
		return "", fmt.Errorf("login: %w", err)
	}
	if failures >= maxFailures {
		return "", ErrThrottled
	}
	var op struct {
		ID   int64  `db:"id"`
		Hash string `db:"password_hash"`
	}
	err := db.GetContext(ctx, &op, `SELECT id, password_hash FROM operators WHERE email = $1`, email)
	hash := []byte(op.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		hash = dummyHash
	} else if err != nil {
		return "", fmt.Errorf("login: %w", err)
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || op.ID == 0 {
		if _, err := db.ExecContext(ctx, `INSERT INTO login_failures (email, remote_addr, at) VALUES ($1, $2, $3)`,
			pgtext.Clean(email, 254), remoteAddr, now); err != nil {
			return "", fmt.Errorf("login: %w", err)
		}
		return "", ErrBadLogin
	}
	token := randomToken()
	_, err = db.ExecContext(ctx, `
		INSERT INTO operator_sessions (token_hash, operator_id, csrf_token, created_at, expires_at, user_agent, remote_addr)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		tokenHash(token), op.ID, randomToken(), now, now.Add(sessionTTL), pgtext.Clean(userAgent, 300), remoteAddr)
	if err != nil {
		return "", fmt.Errorf("login: %w", err)
	}
	_, _ = db.ExecContext(ctx, `DELETE FROM operator_sessions WHERE expires_at < $1`, now)
	return token, nil
}

// LookupSession returns the session of a cookie value.
func LookupSession(ctx context.Context, db sqlx.QueryerContext, token string, now time.Time) (Session, error) {
	if token == "" {
		return Session{}, ErrNoSession
	}
	var row struct {
		Operator
		CSRF string `db:"csrf_token"`
	}
	err := sqlx.GetContext(ctx, db, &row, `
		SELECT o.id, o.email, o.role, s.csrf_token
		  FROM operator_sessions s JOIN operators o ON o.id = s.operator_id
		 WHERE s.token_hash = $1 AND s.expires_at > $2`, tokenHash(token), now)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("session: %w", err)
	}
	return Session{Operator: row.Operator, CSRF: row.CSRF}, nil
}

// Logout ends a session.
func Logout(ctx context.Context, db sqlx.ExecerContext, token string) error {
	if _, err := db.ExecContext(ctx, `DELETE FROM operator_sessions WHERE token_hash = $1`, tokenHash(token)); err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	return nil
}

// sameToken compares tokens in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

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
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/bcrypt"

	tdb "github.com/tekrar/tekrar/internal/db"
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

// Sign-in throttling (docs/console.md, "Security"). Each sign-in takes a slot in three
// counters before its password is checked: its email from its address ("pair"), its
// address whatever the email, and its email whatever the address. An attempt that would
// take a counter over its limit is refused (ErrThrottled), right password or not, and takes
// no slot. A failed attempt keeps its slots until the counter's window ends, failureWindow
// after its first attempt; a successful one gives them back.
//
// The pair limit is what slows a guesser at one operator's password. The address limit
// slows one password tried across many emails. The email limit bounds guessing at one
// operator from many addresses; it is higher than the address limit so that one address
// cannot lock an operator out on its own: an operator signing in from another address is
// only refused once several addresses together have failed maxEmailFailures times.
const (
	maxPairFailures    = 5
	maxAddressFailures = 20
	maxEmailFailures   = 50
	failureWindow      = 15 * time.Minute
)

var (
	// ErrBadLogin is a wrong email or password; which one is not said.
	ErrBadLogin = errors.New("wrong email or password")
	// ErrThrottled is too many failed sign-ins for an email, an address or both.
	ErrThrottled = errors.New("too many failed sign-ins; try again later")
	// ErrBusy is a sign-in that waited too long for a password check to be free.
	ErrBusy = errors.New("sign-in is busy; try again in a moment")
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

// dummyHash is what the password of an unknown email is checked against. It has the cost
// of stored passwords, so that a sign-in costs the same whether or not the email exists
// (with a cheaper hash, the time of a sign-in told which emails are operators'). It is
// made once, on first use; Register starts making it so that no sign-in waits for it.
var dummyHash = sync.OnceValue(func() []byte {
	h, err := bcrypt.GenerateFromPassword([]byte("no such operator, no such password"), PasswordCost)
	if err != nil {
		panic(fmt.Sprintf("bcrypt: %v", err))
	}
	return h
})

// passwordChecks bounds the bcrypt comparisons running at once in this process. Each one
// takes a core for a quarter of a second or more (cost 12); unbounded, a burst of sign-ins
// took every core and the API's median latency went from 11 ms to 920 ms. Half the cores
// (at least one) may check passwords; a sign-in that cannot start its check within
// passwordWait is answered ErrBusy.
var passwordChecks = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

var passwordWait = func() *atomic.Int64 {
	var d atomic.Int64
	d.Store(int64(3 * time.Second))
	return &d
}()

// checkedPasswords counts the password checks run, for tests.
var checkedPasswords atomic.Int64

// checkPassword compares password with hash once a check slot is free.
func checkPassword(ctx context.Context, hash []byte, password string) (bool, error) {
	wait := time.NewTimer(time.Duration(passwordWait.Load()))
	defer wait.Stop()
	select {
	case passwordChecks <- struct{}{}:
	case <-wait.C:
		return false, ErrBusy
	case <-ctx.Done():
		return false, fmt.Errorf("wait for a password check: %w", ctx.Err())
	}
	defer func() { <-passwordChecks }()
	checkedPasswords.Add(1)
	return bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil, nil
}

// throttleSlot is one counter a sign-in takes a slot in.
type throttleSlot struct {
	scope, subject string
	limit          int
}

// throttleSlots are the counters of a sign-in, in the order they are taken: every sign-in
// locks its rows in this order, so that two sign-ins never wait for each other's rows.
func throttleSlots(email, addr string) []throttleSlot {
	email, addr = pgtext.Clean(email, 254), pgtext.Clean(throttleAddress(addr), 100)
	return []throttleSlot{
		// An address holds no space: the pair's subject is unambiguous.
		{"pair", addr + " " + email, maxPairFailures},
		{"address", addr, maxAddressFailures},
		{"email", email, maxEmailFailures},
	}
}

// throttleAddress is the address an attempt is counted under: an IPv4 address, or the /64
// of an IPv6 one, which is what one subscriber is usually given (counted one by one, a
// single host could try 2^64 addresses).
func throttleAddress(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.WithZone("").Prefix(64)
	if err != nil {
		return addr
	}
	return p.String()
}

// takeSlots counts an attempt in each of its counters, or in none if one is full (false).
// Each count is an upsert that returns the new count, under the row's lock, so that
// concurrent attempts are counted one after the other before any password is checked.
func takeSlots(ctx context.Context, db *sqlx.DB, slots []throttleSlot, now time.Time) (bool, error) {
	tx, err := db.BeginTxx(tdb.Detach(ctx), nil)
	if err != nil {
		return false, fmt.Errorf("throttle: %w", err)
	}
	defer tx.Rollback()
	for _, s := range slots {
		var n int
		err := tx.GetContext(ctx, &n, `
			INSERT INTO login_throttle AS t (scope, subject, window_start, attempts) VALUES ($1, $2, $3, 1)
			ON CONFLICT (scope, subject) DO UPDATE SET
			    window_start = CASE WHEN t.window_start > $4 THEN t.window_start ELSE excluded.window_start END,
			    attempts     = CASE WHEN t.window_start > $4 THEN t.attempts + 1 ELSE 1 END
			RETURNING attempts`, s.scope, s.subject, now, now.Add(-failureWindow))
		if err != nil {
			return false, fmt.Errorf("throttle: %w", err)
		}
		if n > s.limit {
			return false, nil // the rollback takes no slot
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("throttle: %w", err)
	}
	return true, nil
}

// giveSlots gives back the slots of an attempt that did not fail: it signed in, or its
// password was never checked. One statement per counter, each committed alone, so that it
// never holds one counter's lock while waiting for another's.
func giveSlots(ctx context.Context, db *sqlx.DB, slots []throttleSlot) error {
	for _, s := range slots {
		if _, err := db.ExecContext(ctx, `
			UPDATE login_throttle SET attempts = attempts - 1
			 WHERE scope = $1 AND subject = $2 AND attempts > 0`, s.scope, s.subject); err != nil {
			return fmt.Errorf("throttle: %w", err)
		}
	}
	return nil
}

// Login checks an email and password and opens a session; it returns the session cookie's
// value. remoteAddr is the client address the console records (the proxy's
// X-Forwarded-For only from TEKRAR_TRUSTED_PROXIES). Attempts are throttled per email, per
// address and per both; failures are recorded in login_failures.
func Login(ctx context.Context, db *sqlx.DB, email, password, userAgent, remoteAddr string, now time.Time) (string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	slots := throttleSlots(email, remoteAddr)
	ok, err := takeSlots(ctx, db, slots, now)
	if err != nil {
		return "", fmt.Errorf("login: %w", err)
	}
	if !ok {
		return "", ErrThrottled
	}
	// giveBack returns err after giving the slots back: the password was not found wrong.
	giveBack := func(err error) (string, error) {
		if gerr := giveSlots(context.WithoutCancel(ctx), db, slots); gerr != nil {
			err = errors.Join(err, gerr)
		}
		return "", err
	}
	var op struct {
		ID   int64  `db:"id"`
		Hash string `db:"password_hash"`
	}
	err = db.GetContext(ctx, &op, `SELECT id, password_hash FROM operators WHERE email = $1`, email)
	hash := []byte(op.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		hash = dummyHash()
	} else if err != nil {
		return giveBack(fmt.Errorf("login: %w", err))
	}
	// An unknown email takes the path of a wrong password, at the same cost.
	match, err := checkPassword(ctx, hash, password)
	if err != nil {
		return giveBack(err)
	}
	if !match || op.ID == 0 {
		if _, err := db.ExecContext(ctx, `INSERT INTO login_failures (email, remote_addr, at) VALUES ($1, $2, $3)`,
			pgtext.Clean(email, 254), remoteAddr, now); err != nil {
			return "", fmt.Errorf("login: %w", err)
		}
		pruneThrottle(ctx, db, now)
		return "", ErrBadLogin
	}
	token := randomToken()
	_, err = db.ExecContext(ctx, `
		INSERT INTO operator_sessions (token_hash, operator_id, csrf_token, created_at, expires_at, user_agent, remote_addr)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		tokenHash(token), op.ID, randomToken(), now, now.Add(sessionTTL), pgtext.Clean(userAgent, 300), remoteAddr)
	if err != nil {
		return giveBack(fmt.Errorf("login: %w", err))
	}
	// Signed in: the slots go back. Were that to fail, they would go with their window.
	_ = giveSlots(ctx, db, slots)
	_, _ = db.ExecContext(ctx, `DELETE FROM operator_sessions WHERE expires_at < $1`, now)
	pruneThrottle(ctx, db, now)
	return token, nil
}

// pruneThrottle deletes the counters whose window has ended, which an attempt would reset
// anyway, so that failed attempts from ever new addresses do not pile up. Best effort.
func pruneThrottle(ctx context.Context, db *sqlx.DB, now time.Time) {
	_, _ = db.ExecContext(ctx, `DELETE FROM login_throttle WHERE window_start <= $1`, now.Add(-failureWindow))
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

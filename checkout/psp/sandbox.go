package psp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/db"
)

// SandboxOptions tune the sandbox.
type SandboxOptions struct {
	// SlowDelay is how long tok_slow waits before approving; 0 means 2s.
	SlowDelay time.Duration
	// Now stamps charges and refunds; nil means time.Now.
	Now func() time.Time
	// Logger, if set, hears of late charges (tok_late) as they arrive and of charges refused
	// because their key was canceled: what a processor's own logs would show.
	Logger *slog.Logger
	// Webhooks, if set, makes the sandbox record an event for every change to a charge and
	// send it to Webhooks.URL (see RunWebhooks).
	Webhooks *WebhookOptions
	// NoCancel makes the sandbox a processor that cannot fence a charge key: CancelCharge
	// answers ErrCancelUnsupported. Tests use it to prove the refund tekrar then owes.
	NoCancel bool
	// KeyLess makes the sandbox a processor that deduplicates nothing, as iyzico documents
	// its services ("non-idempotent"): every Charge is a new charge, the key it carries kept
	// as a reference only; a charge is found by the merchant's reference (its description,
	// as iyzico's conversationId) through ChargesByReference, never by key (LookupCharge
	// answers ErrLookupUnsupported); no key can be canceled (ErrCancelUnsupported); and its
	// webhooks are sent late and at most three times (the KeyLessWebhook constants fill the
	// schedule fields Webhooks leaves zero). Its row of the capability table is
	// ProviderSandboxKeyLess.
	KeyLess bool
	// KeyWindow is how long the sandbox remembers a charge key, as a real provider's window
	// (Stripe's 24 h, PayPal's 6 h): a charge repeated under a key first used longer ago is a
	// new charge, and the key's earlier row stays in the ledger as a reference only. 0 keeps
	// keys for ever, as the sandbox always did. Its row of the capability table is the
	// sandbox's own with this KeyWindow; a key-less sandbox has no keys to forget.
	KeyWindow time.Duration
}

// Sandbox is a card processor with its own ledger in Postgres (tables psp_charges and
// psp_refunds). It keeps its own idempotency on keys, like a real processor: the UNIQUE
// constraints on the keys are what make a repeated key safe under any concurrency, and a
// CHECK on the charge's refunded total is what makes over-refunding impossible.
//
// The card token decides the outcome; see the Token constants.
type Sandbox struct {
	db       *sqlx.DB
	q        *db.Prepared // the per-charge statements, prepared
	slow     time.Duration
	now      func() time.Time
	noCancel bool
	keyLess  bool
	window   time.Duration // SandboxOptions.KeyWindow; 0: for ever
	logger   *slog.Logger
	hooks    *webhookSender // nil: no events are recorded
}

var _ Provider = (*Sandbox)(nil)

// NewSandbox returns a sandbox over db, whose migrations must have been applied.
func NewSandbox(d *sqlx.DB, opts SandboxOptions) *Sandbox {
	s := &Sandbox{db: d, q: db.NewPrepared(d), slow: opts.SlowDelay, now: opts.Now, noCancel: opts.NoCancel, keyLess: opts.KeyLess,
		window: opts.KeyWindow, logger: opts.Logger}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if opts.Webhooks != nil {
		o := *opts.Webhooks
		if opts.KeyLess {
			o = keyLessWebhooks(o)
		}
		s.hooks = newWebhookSender(o)
	}
	if s.slow <= 0 {
		s.slow = 2 * time.Second
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// The webhook schedule of a key-less sandbox, as iyzico documents its notifications: the
// first some seconds after the payment, then every 15 minutes, stopping after three.
const (
	KeyLessWebhookFirstAfter  = 10 * time.Second
	KeyLessWebhookRetryEvery  = 15 * time.Minute
	KeyLessWebhookMaxAttempts = 3
)

// keyLessWebhooks fills the schedule fields o leaves zero with the key-less schedule; a test
// shortens them by setting its own.
func keyLessWebhooks(o WebhookOptions) WebhookOptions {
	if o.FirstAfter == 0 {
		o.FirstAfter = KeyLessWebhookFirstAfter
	}
	if o.RetryEvery == 0 {
		o.RetryEvery = KeyLessWebhookRetryEvery
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = KeyLessWebhookMaxAttempts
	}
	return o
}

// recordTimeout bounds the work of a tok_timeout charge, which goes on after the caller's
// context has ended.
const recordTimeout = 30 * time.Second

// errSimulatedFailure is what tok_fail returns. It is deliberately not exported: to a
// caller it is an unknown outcome like any provider failure.
var errSimulatedFailure = errors.New("psp sandbox: simulated provider failure; nothing was recorded")

type card struct {
	brand, last4 string
	approve      bool
	declineCode  string
}

// magicTokens are the sandbox's test cards (see the Token constants).
var magicTokens = []string{TokenVisa, TokenMastercard, TokenDeclined, TokenFail, TokenTimeout, TokenSlow, TokenLate}

// baseToken is the magic token whose card token stands for: token itself, or the magic
// token it extends with "_" and a suffix (another token of the same card). A token of no
// magic card comes back as it is.
func baseToken(token string) string {
	for _, m := range magicTokens {
		if token == m || (len(token) > len(m)+1 && token[:len(m)+1] == m+"_") {
			return m
		}
	}
	return token
}

func cardOf(token string) card {
	switch baseToken(token) {
	case TokenVisa, TokenSlow, TokenTimeout, TokenLate:
		return card{brand: "visa", last4: "4242", approve: true}
	case TokenMastercard:
		return card{brand: "mastercard", last4: "4444", approve: true}
	case TokenDeclined:
		return card{brand: "visa", last4: "0002", declineCode: DeclineCardDeclined}
	default:
		return card{declineCode: DeclineInvalidCard}
	}
}

func fingerprint(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func newID(prefix string) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the kernel's RNG does not fail
	}
	return prefix + hex.EncodeToString(b[:])
}

// chargeRow is a row of psp_charges. A canceled key's row has no amount, currency or card:
// the select list reads them as 0 and "".
type chargeRow struct {
	ID          string    `db:"id"`
	Key         string    `db:"key"`
	Amount      int64     `db:"amount"`
	Currency    string    `db:"currency"`
	Fingerprint []byte    `db:"card_token_fingerprint"`
	Status      string    `db:"status"`
	DeclineCode string    `db:"decline_code"`
	CardBrand   string    `db:"card_brand"`
	CardLast4   string    `db:"card_last4"`
	Description string    `db:"description"`
	Refunded    int64     `db:"refunded_amount"`
	Created     time.Time `db:"created_at"`
	Dispute     []byte    `db:"dispute"` // the latest dispute as JSON; NULL when none
}

// chargeColumns reads a charge with its latest dispute (in Dispute's JSON shape); it names
// psp_charges, so it also serves a RETURNING of the table.
const chargeColumns = `id, key, coalesce(amount, 0) AS amount, coalesce(currency, '') AS currency,
	card_token_fingerprint, status, decline_code, card_brand, card_last4, description, refunded_amount, created_at,
	(SELECT CAST(json_build_object('id', d.id, 'charge_id', d.charge_id, 'amount', d.amount, 'reason', d.reason,
	        'status', d.status, 'created', d.created_at, 'closed', d.closed_at) AS text)
	   FROM psp_disputes d WHERE d.charge_id = psp_charges.id
	  ORDER BY d.created_at DESC, d.id DESC LIMIT 1) AS dispute`

func (r chargeRow) charge() Charge {
	c := Charge{
		ID: r.ID, Key: r.Key, Amount: r.Amount, Currency: r.Currency,
		Status: r.Status, DeclineCode: r.DeclineCode,
		CardBrand: r.CardBrand, CardLast4: r.CardLast4, Description: r.Description,
		Refunded: r.Refunded, Created: r.Created.UTC(),
	}
	if len(r.Dispute) > 0 {
		var d Dispute
		if json.Unmarshal(r.Dispute, &d) == nil { // the statement built it: it decodes
			c.Dispute = &d
		}
	}
	return c
}

// replay answers a repeated charge key: the first charge if the parameters match, and
// ErrKeyCanceled if the key was canceled before any charge.
func (r chargeRow) replay(req ChargeRequest, fp []byte) (Charge, error) {
	if r.Status == StatusCanceled {
		return Charge{}, fmt.Errorf("%w: charge key %q was canceled at %s; nothing was charged",
			ErrKeyCanceled, req.Key, r.Created.UTC().Format(time.RFC3339))
	}
	if r.Amount != req.Amount || r.Currency != req.Currency || !bytes.Equal(r.Fingerprint, fp) {
		return Charge{}, fmt.Errorf("%w: charge key %q was first used for %d %s with another card or amount (charge %s)",
			ErrKeyReused, req.Key, r.Amount, r.Currency, r.ID)
	}
	c := r.charge()
	c.CardFingerprint, _ = cardIdentity(req.CardToken) // the same token: the same card
	return c, nil
}

// Charge implements Provider. A key that already has a charge is answered at once from the
// ledger, whatever the token; only a new key meets the token's behaviour. A key-less sandbox
// (SandboxOptions.KeyLess) answers nothing from the ledger: every call meets the token's
// behaviour and makes a new charge.
func (s *Sandbox) Charge(ctx context.Context, req ChargeRequest) (Charge, error) {
	if err := req.validate(); err != nil {
		return Charge{}, err
	}
	if err := ctx.Err(); err != nil {
		return Charge{}, fmt.Errorf("psp sandbox: charge not sent: %w", err)
	}
	// pctx is the processor's own work. For tok_timeout it goes on whatever the caller does
	// meanwhile, as a real processor's would once it has the request: the charge is made even
	// if the caller gives up at once.
	pctx := ctx
	behaviour := baseToken(req.CardToken)
	if behaviour == TokenTimeout || behaviour == TokenLate {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
	}
	if err := s.forgetExpiredKey(pctx, req.Key); err != nil {
		return Charge{}, err
	}
	fp := fingerprint(req.CardToken)
	if req.PaymentMethod != "" {
		return s.chargeSaved(ctx, req)
	}
	// A repeated key is answered from the ledger before a token's special behaviour could
	// apply. Ordinary cards skip this look-up: their insert below answers a repeat anyway.
	if special(req.CardToken) && !s.keyLess {
		existing, err := s.chargeByKey(pctx, req.Key)
		switch {
		case err == nil:
			return existing.replay(req, fp)
		case !errors.Is(err, ErrNotFound):
			return Charge{}, err
		}
	}

	switch behaviour {
	case TokenFail:
		return Charge{}, errSimulatedFailure
	case TokenSlow:
		t := time.NewTimer(s.slow)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Charge{}, fmt.Errorf("psp sandbox: slow charge abandoned before it was made: %w", ctx.Err())
		}
	case TokenLate:
		s.logger.Info("psp sandbox: late charge received; it is made after the slow delay unless its key is canceled",
			"key", req.Key, "delay", s.slow)
		t := time.NewTimer(s.slow)
		select {
		case <-t.C:
		case <-pctx.Done():
			t.Stop()
			return Charge{}, fmt.Errorf("psp sandbox: late charge: %w", pctx.Err())
		}
	}

	return s.insertCharge(ctx, pctx, req, fp, cardOf(req.CardToken))
}

// forgetExpiredKey makes a charge key first used longer than the key window ago a
// reference only (keyed false), as a provider forgets a key past its window: the charge
// that follows under it is a new one, and it is the charge a look-up by the key finds from
// then on. Without a window, or key-less, it does nothing and asks nothing.
func (s *Sandbox) forgetExpiredKey(ctx context.Context, key string) error {
	if s.window <= 0 || s.keyLess {
		return nil
	}
	if _, err := s.q.ExecContext(ctx, `
		UPDATE psp_charges SET keyed = false WHERE key = $1 AND keyed AND created_at < $2`,
		key, s.now().Add(-s.window)); err != nil {
		return fmt.Errorf("psp sandbox: forget an expired key: %w", err)
	}
	return nil
}

// insertCharge records a new charge of card c under req.Key, or answers the charge a
// concurrent call with the same key recorded first. A key-less sandbox records a new charge
// whatever the key holds already.
func (s *Sandbox) insertCharge(ctx, pctx context.Context, req ChargeRequest, fp []byte, c card) (Charge, error) {
	status := StatusSucceeded
	if !c.approve {
		status = StatusDeclined
	}
	var row chargeRow
	id, now := newID("ch_"), s.now()
	args := []any{id, req.Key, req.Amount, req.Currency, fp, status,
		c.declineCode, c.brand, c.last4, req.Description, now}
	insert := chargeInsert
	if s.keyLess {
		insert = chargeInsertKeyLess
	}
	if s.hooks != nil {
		// The charge's first event commits with it, or neither does.
		typ := EventChargeSucceeded
		if status != StatusSucceeded {
			typ = EventChargeFailed
		}
		e, body, err := newEvent(typ, now, EventData{ChargeID: id, ChargeKey: req.Key, Description: req.Description, Sequence: 1, Amount: req.Amount,
			Currency: req.Currency, Status: status, DeclineCode: c.declineCode, CardBrand: c.brand, CardLast4: c.last4})
		if err != nil {
			return Charge{}, err
		}
		insert = withFirstEvent(insert)
		args = append(args, e.ID, e.Type, string(body))
	}
	err := sqlx.GetContext(pctx, s.q, &row, insert, args...)
	if errors.Is(err, sql.ErrNoRows) {
		// A concurrent call with the same key won the insert; its row is committed now.
		existing, err := s.chargeByKey(pctx, req.Key)
		if err != nil {
			return Charge{}, err
		}
		if existing.Status == StatusCanceled {
			s.logger.Info("psp sandbox: charge refused: its key was canceled", "key", req.Key)
		}
		return existing.replay(req, fp)
	}
	if err != nil {
		return Charge{}, fmt.Errorf("psp sandbox: record charge: %w", err)
	}
	if baseToken(req.CardToken) == TokenTimeout {
		<-ctx.Done()
		return Charge{}, fmt.Errorf("psp sandbox: charge %s was made but its answer never came (simulated timeout): %w",
			row.ID, ctx.Err())
	}
	ch := row.charge()
	ch.CardFingerprint, _ = cardIdentity(req.CardToken)
	return ch, nil
}

// chargeInsert records a new charge under its key, or nothing if the key holds a charge or
// a cancel already (the partial unique index psp_charges_key_keyed_uq). $5::bytea: the
// column is a domain (sha256_digest), and without binary parameters lib/pq sends a []byte as
// raw text to any parameter not typed bytea.
const chargeInsert = `
	INSERT INTO psp_charges (id, key, amount, currency, card_token_fingerprint, status,
	                         decline_code, card_brand, card_last4, description, created_at)
	VALUES ($1, $2, $3, $4, $5::bytea, $6, $7, $8, $9, $10, $11)
	ON CONFLICT (key) WHERE keyed DO NOTHING
	RETURNING ` + chargeColumns

// chargeInsertKeyLess records a new charge of a key-less sandbox: its key is a reference
// only (keyed false), which any number of charges may hold.
const chargeInsertKeyLess = `
	INSERT INTO psp_charges (id, key, amount, currency, card_token_fingerprint, status,
	                         decline_code, card_brand, card_last4, description, created_at, keyed)
	VALUES ($1, $2, $3, $4, $5::bytea, $6, $7, $8, $9, $10, $11, false)
	RETURNING ` + chargeColumns

// withFirstEvent is a charge insert with the charge's first event ($12 id, $13 type, $14
// body), written only if the charge is.
func withFirstEvent(insert string) string {
	return `
	WITH c AS (` + insert + `
	), e AS (
	    INSERT INTO psp_events (id, type, charge_id, seq, body, created_at, next_attempt_at)
	    SELECT $12, $13, c.id, 1, $14, $11, $11 FROM c
	)
	SELECT * FROM c`
}

// special reports whether a token behaves other than approving or declining at once.
func special(token string) bool {
	token = baseToken(token)
	return token == TokenFail || token == TokenSlow || token == TokenTimeout || token == TokenLate
}

// CardFingerprint implements Provider. The sandbox's cards are its magic tokens: every
// token of one (the magic token itself, or it with a suffix) has that card's fingerprint,
// "fp_" and 24 hex digits; any other token is unknown.
func (s *Sandbox) CardFingerprint(ctx context.Context, token string) (string, error) {
	if err := checkCardToken(token); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("psp sandbox: card fingerprint: %w", err)
	}
	fp, ok := cardIdentity(token)
	if !ok {
		return "", fmt.Errorf("%w: no card has this token", ErrNotFound)
	}
	return fp, nil
}

// cardIdentity is the fingerprint of token's card, and false for a token of no card: what
// CardFingerprint answers, and what a charge's answer carries.
func cardIdentity(token string) (string, bool) {
	base := baseToken(token)
	if base == token && !slices.Contains(magicTokens, token) {
		return "", false
	}
	h := sha256.Sum256([]byte("tekrar sandbox card\x00" + base))
	return "fp_" + hex.EncodeToString(h[:12]), true
}

// CancelCharge implements Provider. The canceled key is a row of psp_charges with status
// canceled, so the UNIQUE constraint on key decides between a cancel and a charge racing
// for the same key: whichever inserts first wins, and the other meets its row.
func (s *Sandbox) CancelCharge(ctx context.Context, key string) (Charge, error) {
	if err := checkKey(key); err != nil {
		return Charge{}, err
	}
	if s.noCancel {
		return Charge{}, fmt.Errorf("%w (this sandbox runs without cancel)", ErrCancelUnsupported)
	}
	if s.keyLess {
		return Charge{}, fmt.Errorf("%w (this sandbox keeps no keys)", ErrCancelUnsupported)
	}
	var row chargeRow
	err := sqlx.GetContext(ctx, s.db, &row, `
		INSERT INTO psp_charges (id, key, status, created_at)
		VALUES ($1, $2, 'canceled', $3)
		ON CONFLICT (key) WHERE keyed DO NOTHING
		RETURNING `+chargeColumns,
		newID("ch_"), key, s.now())
	if errors.Is(err, sql.ErrNoRows) {
		// A charge (or an earlier cancel) holds the key: it is the answer.
		existing, err := s.chargeByKey(ctx, key)
		if err != nil {
			return Charge{}, err
		}
		return existing.charge(), nil
	}
	if err != nil {
		return Charge{}, fmt.Errorf("psp sandbox: cancel charge key: %w", err)
	}
	return row.charge(), nil
}

func (s *Sandbox) chargeByKey(ctx context.Context, key string) (chargeRow, error) {
	var row chargeRow
	err := sqlx.GetContext(ctx, s.q, &row, `SELECT `+chargeColumns+` FROM psp_charges WHERE key = $1 AND keyed`, key)
	if errors.Is(err, sql.ErrNoRows) {
		return chargeRow{}, fmt.Errorf("%w: no charge has key %q", ErrNotFound, key)
	}
	if err != nil {
		return chargeRow{}, fmt.Errorf("psp sandbox: look up charge: %w", err)
	}
	return row, nil
}

// LookupCharge implements Provider. A key-less sandbox finds no charge by key
// (ErrLookupUnsupported): see ChargesByReference.
func (s *Sandbox) LookupCharge(ctx context.Context, key string) (Charge, error) {
	if err := checkKey(key); err != nil {
		return Charge{}, err
	}
	if s.keyLess {
		return Charge{}, fmt.Errorf("%w: this sandbox keeps no keys; look the charge up by reference", ErrLookupUnsupported)
	}
	row, err := s.chargeByKey(ctx, key)
	if err != nil {
		return Charge{}, err
	}
	return row.charge(), nil
}

type refundRow struct {
	ID       string    `db:"id"`
	Key      string    `db:"key"`
	ChargeID string    `db:"charge_id"`
	Amount   int64     `db:"amount"`
	Currency string    `db:"currency"`
	Status   string    `db:"status"`
	Created  time.Time `db:"created_at"`
}

func (r refundRow) refund() Refund {
	return Refund{
		ID: r.ID, Key: r.Key, ChargeID: r.ChargeID, Amount: r.Amount,
		Currency: r.Currency, Status: r.Status, Created: r.Created.UTC(),
	}
}

func (r refundRow) replay(req RefundRequest) (Refund, error) {
	if r.ChargeID != req.ChargeID || r.Amount != req.Amount {
		return Refund{}, fmt.Errorf("%w: refund key %q was first used for %d of charge %s (refund %s)",
			ErrKeyReused, req.Key, r.Amount, r.ChargeID, r.ID)
	}
	return r.refund(), nil
}

const refundSelect = `
	SELECT r.id, r.key, r.charge_id, r.amount, c.currency, r.status, r.created_at
	FROM psp_refunds r JOIN psp_charges c ON c.id = r.charge_id`

func (s *Sandbox) refundByKey(ctx context.Context, q sqlx.QueryerContext, key string) (refundRow, error) {
	var row refundRow
	err := sqlx.GetContext(ctx, q, &row, refundSelect+` WHERE r.key = $1`, key)
	if errors.Is(err, sql.ErrNoRows) {
		return refundRow{}, fmt.Errorf("%w: no refund has key %q", ErrNotFound, key)
	}
	if err != nil {
		return refundRow{}, fmt.Errorf("psp sandbox: look up refund: %w", err)
	}
	return row, nil
}

// Refund implements Provider. The refund insert and the charge's refunded total move in one
// transaction; the CHECK on that total refuses an over-refund even between concurrent
// refunds.
func (s *Sandbox) Refund(ctx context.Context, req RefundRequest) (Refund, error) {
	if err := req.validate(); err != nil {
		return Refund{}, err
	}
	existing, err := s.refundByKey(ctx, s.db, req.Key)
	switch {
	case err == nil:
		return existing.replay(req)
	case !errors.Is(err, ErrNotFound):
		return Refund{}, err
	}

	tx, err := s.db.BeginTxx(db.Detach(ctx), nil)
	if err != nil {
		return Refund{}, fmt.Errorf("psp sandbox: refund: %w", err)
	}
	defer tx.Rollback()

	var charge struct {
		Status   string `db:"status"`
		Currency string `db:"currency"`
	}
	err = tx.GetContext(ctx, &charge, `SELECT status, currency FROM psp_charges WHERE id = $1 FOR UPDATE`, req.ChargeID)
	if errors.Is(err, sql.ErrNoRows) {
		return Refund{}, fmt.Errorf("%w: no charge has id %q", ErrNotFound, req.ChargeID)
	}
	if err != nil {
		return Refund{}, fmt.Errorf("psp sandbox: refund: lock charge: %w", err)
	}
	if charge.Status != StatusSucceeded {
		return Refund{}, fmt.Errorf("%w: charge %s is %s", ErrNotRefundable, req.ChargeID, charge.Status)
	}

	row := refundRow{Currency: charge.Currency}
	err = tx.QueryRowxContext(ctx, `
		INSERT INTO psp_refunds (id, key, charge_id, amount, reason, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (key) DO NOTHING
		RETURNING id, key, charge_id, amount, status, created_at`,
		newID("re_"), req.Key, req.ChargeID, req.Amount, req.Reason, s.now(),
	).Scan(&row.ID, &row.Key, &row.ChargeID, &row.Amount, &row.Status, &row.Created)
	if errors.Is(err, sql.ErrNoRows) {
		// A concurrent refund with the same key committed first.
		_ = tx.Rollback()
		existing, err := s.refundByKey(ctx, s.db, req.Key)
		if err != nil {
			return Refund{}, err
		}
		return existing.replay(req)
	}
	if err != nil {
		return Refund{}, fmt.Errorf("psp sandbox: record refund: %w", err)
	}
	_, err = tx.ExecContext(ctx,
		`UPDATE psp_charges SET refunded_amount = refunded_amount + $2 WHERE id = $1`, req.ChargeID, req.Amount)
	if db.IsCheckViolation(err, "psp_charges_refunded_within_amount") {
		return Refund{}, fmt.Errorf("%w: refunding %d more of charge %s", ErrRefundExceedsCharge, req.Amount, req.ChargeID)
	}
	if err != nil {
		return Refund{}, fmt.Errorf("psp sandbox: refund: update charge: %w", err)
	}
	if s.hooks != nil {
		if err := s.emitRefund(ctx, tx, row.refund()); err != nil {
			return Refund{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return Refund{}, fmt.Errorf("psp sandbox: refund: commit: %w", err)
	}
	return row.refund(), nil
}

// LookupRefund implements Provider.
func (s *Sandbox) LookupRefund(ctx context.Context, key string) (Refund, error) {
	if err := checkKey(key); err != nil {
		return Refund{}, err
	}
	row, err := s.refundByKey(ctx, s.db, key)
	if err != nil {
		return Refund{}, err
	}
	return row.refund(), nil
}

// Charges returns the whole ledger of charges, oldest first: for tests that check what was
// really charged. Canceled keys are not charges and are left out.
func (s *Sandbox) Charges(ctx context.Context) ([]Charge, error) {
	var rows []chargeRow
	if err := sqlx.SelectContext(ctx, s.db, &rows,
		`SELECT `+chargeColumns+` FROM psp_charges WHERE status <> 'canceled' ORDER BY created_at, seq`); err != nil {
		return nil, fmt.Errorf("psp sandbox: list charges: %w", err)
	}
	out := make([]Charge, len(rows))
	for i, r := range rows {
		out[i] = r.charge()
	}
	return out, nil
}

// Refunds returns the whole ledger of refunds, oldest first.
func (s *Sandbox) Refunds(ctx context.Context) ([]Refund, error) {
	var rows []refundRow
	if err := sqlx.SelectContext(ctx, s.db, &rows, refundSelect+` ORDER BY r.created_at, r.seq`); err != nil {
		return nil, fmt.Errorf("psp sandbox: list refunds: %w", err)
	}
	out := make([]Refund, len(rows))
	for i, r := range rows {
		out[i] = r.refund()
	}
	return out, nil
}

// ListCharges implements Provider: a keyset page over (created_at, seq), the ledger's
// psp_charges_created_idx. The cursor is a charge id, as a real processor's
// "starting_after" is; an id the sandbox does not know is ErrNotFound.
func (s *Sandbox) ListCharges(ctx context.Context, q ChargeListQuery) (ChargePage, error) {
	if err := q.validate(); err != nil {
		return ChargePage{}, err
	}
	var rows []chargeRow
	var err error
	if q.After == "" {
		err = sqlx.SelectContext(ctx, s.db, &rows, `
			SELECT `+chargeColumns+` FROM psp_charges
			 WHERE created_at >= $1 AND created_at < $2
			 ORDER BY created_at, seq LIMIT $3`, q.Since, q.Until, q.Limit+1)
	} else {
		var ok bool
		if err := sqlx.GetContext(ctx, s.db, &ok, `SELECT EXISTS (SELECT 1 FROM psp_charges WHERE id = $1)`, q.After); err != nil {
			return ChargePage{}, fmt.Errorf("psp sandbox: list charges: %w", err)
		}
		if !ok {
			return ChargePage{}, fmt.Errorf("%w: no charge has id %q", ErrNotFound, q.After)
		}
		err = sqlx.SelectContext(ctx, s.db, &rows, `
			SELECT `+chargeColumns+` FROM psp_charges
			 WHERE created_at >= $1 AND created_at < $2
			   AND (created_at, seq) > (SELECT created_at, seq FROM psp_charges WHERE id = $4)
			 ORDER BY created_at, seq LIMIT $3`, q.Since, q.Until, q.Limit+1, q.After)
	}
	if err != nil {
		return ChargePage{}, fmt.Errorf("psp sandbox: list charges: %w", err)
	}
	var page ChargePage
	if len(rows) > q.Limit {
		rows = rows[:q.Limit]
		page.Next = rows[len(rows)-1].ID
	}
	page.Charges = make([]Charge, len(rows))
	for i, r := range rows {
		page.Charges[i] = r.charge()
	}
	return page, nil
}

// ReferenceFinder is a provider that finds charges by the merchant's reference: the way a
// charge whose answer was lost is found at a provider without keys (iyzico retrieves a
// payment by its conversationId). tekrar's reference is the charge's description, which
// names the order.
type ReferenceFinder interface {
	// ChargesByReference returns every charge whose description is reference, oldest
	// first: none, one, or several if the charge was sent more than once. A provider that
	// finds no charge this way answers ErrLookupUnsupported.
	ChargesByReference(ctx context.Context, reference string) ([]Charge, error)
}

var _ ReferenceFinder = (*Sandbox)(nil)

// ChargesByReference implements ReferenceFinder for a key-less sandbox; a sandbox with keys
// finds charges by key (LookupCharge), as its capability row says, and answers
// ErrLookupUnsupported.
func (s *Sandbox) ChargesByReference(ctx context.Context, reference string) ([]Charge, error) {
	if reference == "" || len(reference) > maxTextLen {
		return nil, fmt.Errorf("%w: reference must be 1 to %d characters", ErrInvalidRequest, maxTextLen)
	}
	if err := checkText("reference", reference); err != nil {
		return nil, err
	}
	if !s.keyLess {
		return nil, fmt.Errorf("%w: this sandbox finds a charge by its key", ErrLookupUnsupported)
	}
	var rows []chargeRow
	if err := sqlx.SelectContext(ctx, s.q, &rows, `
		SELECT `+chargeColumns+` FROM psp_charges
		 WHERE description = $1 AND NOT keyed
		 ORDER BY created_at, seq`, reference); err != nil {
		return nil, fmt.Errorf("psp sandbox: look up charges by reference: %w", err)
	}
	out := make([]Charge, len(rows))
	for i, r := range rows {
		out[i] = r.charge()
	}
	return out, nil
}

var _ Promiser = (*Sandbox)(nil)

// Capability implements Promiser: the sandbox's row as its options made it (KeyLess,
// NoCancel, or keys with a fence), with its KeyWindow when it has one.
func (s *Sandbox) Capability() Capability {
	name := ProviderSandbox
	switch {
	case s.keyLess:
		name = ProviderSandboxKeyLess
	case s.noCancel:
		name = ProviderSandboxNoCancel
	}
	c, _ := CapabilityOf(name) // the table names every sandbox row
	if s.window > 0 && !s.keyLess {
		c.KeyWindow = s.window
	}
	return c
}

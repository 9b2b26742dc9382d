package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/report"
)

// The audit log: one row per operator action that changed something, with who, when, what
// and on which target. The console owns the table (migrations 00006 and 00007).

// Actions recorded in the audit log.
const (
	ActionRefund     = "refund"
	ActionReleaseKey = "release_key"
	ActionExpireKey  = "expire_key"
)

// AuditRecord is one action to record.
type AuditRecord struct {
	At         time.Time
	OperatorID int64
	Action     string
	Target     string // orderTarget or keyTarget
	// Nonce is the nonce of the action's form: an action on a target is recorded once per
	// form, however often the form was posted.
	Nonce  string
	Detail map[string]any
}

// orderTarget and keyTarget name what an action acted on.
// An order is named by its public id (records made before migration 00013 name the
// internal one, and show without a link).
func orderTarget(publicID string) string { return "order:" + publicID }

func keyTarget(clientID int64, key string) string {
	return "key:" + strconv.FormatInt(clientID, 10) + "/" + key
}

// parseTarget is the inverse of orderTarget and keyTarget; ok is false for anything else.
func parseTarget(target string) (orderID string, clientID int64, key string, ok bool) {
	if v, found := strings.CutPrefix(target, "order:"); found {
		return v, 0, "", checkout.ValidOrderID(v)
	}
	if v, found := strings.CutPrefix(target, "key:"); found {
		c, k, cut := strings.Cut(v, "/")
		id, err := strconv.ParseInt(c, 10, 64)
		return "", id, k, cut && err == nil && k != ""
	}
	return "", 0, "", false
}

const insertAuditSQL = `
	INSERT INTO audit_log (at, operator_id, action, target, nonce, detail)
	VALUES ($1, $2, $3, $4, $5, $6)`

// RecordAudit writes r in db, which is the transaction of the action's effect: the two
// commit together. A second record of the same form (nonce, action, target) is a unique
// violation, which rolls the effect back with it: no effect goes unrecorded.
func RecordAudit(ctx context.Context, db sqlx.ExecerContext, r AuditRecord) error {
	detail, err := json.Marshal(r.Detail)
	if err != nil {
		return fmt.Errorf("record audit: %w", err)
	}
	// JSON goes as text: with binary parameters, []byte would be sent as binary jsonb.
	if _, err := db.ExecContext(ctx, insertAuditSQL, r.At, r.OperatorID, r.Action, r.Target, r.Nonce, string(detail)); err != nil {
		return fmt.Errorf("record audit: %w", err)
	}
	return nil
}

// RecordAuditOnce writes r unless the same form (nonce, action, target) is recorded
// already, and reports whether it wrote. It is for an action that cannot share a
// transaction with its record, and is idempotent per nonce by itself: a refund runs through
// the checkout service's own transactions, and its idempotency key is derived from the
// nonce, so a form posted again replays the same refund and must not be recorded twice.
// The refund is recorded after it is made; if recording fails, posting the form again
// replays the refund and records it.
func RecordAuditOnce(ctx context.Context, db sqlx.ExecerContext, r AuditRecord) (bool, error) {
	detail, err := json.Marshal(r.Detail)
	if err != nil {
		return false, fmt.Errorf("record audit: %w", err)
	}
	res, err := db.ExecContext(ctx, insertAuditSQL+`
		ON CONFLICT (nonce, action, target) DO NOTHING`,
		r.At, r.OperatorID, r.Action, r.Target, r.Nonce, string(detail))
	if err != nil {
		return false, fmt.Errorf("record audit: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record audit: %w", err)
	}
	return n == 1, nil
}

// AuditEntry is a row of the audit log, with the operator's email. An entry of tekrar's own
// (reconciliation's refunds) has no operator: OperatorID is 0 and OperatorEmail names the
// process that acted.
type AuditEntry struct {
	ID            int64     `db:"id"`
	At            time.Time `db:"at"`
	OperatorID    int64     `db:"operator_id"`
	OperatorEmail string    `db:"operator_email"`
	Action        string    `db:"action"`
	Target        string    `db:"target"`
	Nonce         string    `db:"nonce"`
	Detail        string    `db:"detail"` // JSON
}

// AuditFilter selects audit entries; the zero filter selects all.
type AuditFilter struct {
	Targets []string // any of these targets
}

// ListAudit returns a page of audit entries matching f, newest first, keyset-paginated on
// (at, id) with the console's page cursor (audit_log_at_id_idx, or audit_log_target_idx
// with targets).
func ListAudit(ctx context.Context, db sqlx.QueryerContext, f AuditFilter, page report.Page) ([]AuditEntry, report.Page, error) {
	at, id, after, err := page.Cursor()
	if err != nil {
		return nil, report.Page{}, err
	}
	n := page.Size()
	var preds []string
	args := []any{n + 1}
	if len(f.Targets) > 0 {
		args = append(args, pq.Array(f.Targets))
		preds = append(preds, "a.target = ANY ($"+strconv.Itoa(len(args))+"::text[])")
	}
	if after {
		args = append(args, at, id)
		preds = append(preds, fmt.Sprintf("(a.at, a.id) < ($%d::timestamptz, $%d::bigint)", len(args)-1, len(args)))
	}
	where := ""
	if len(preds) > 0 {
		where = " WHERE " + strings.Join(preds, " AND ")
	}
	var rows []AuditEntry
	err = sqlx.SelectContext(ctx, db, &rows, `
		SELECT a.id, a.at, coalesce(a.operator_id, 0) AS operator_id, coalesce(o.email, a.actor) AS operator_email,
		       a.action, a.target, coalesce(a.nonce, '') AS nonce, coalesce(a.detail::text, '') AS detail
		  FROM audit_log a LEFT JOIN operators o ON o.id = a.operator_id`+where+`
		 ORDER BY a.at DESC, a.id DESC
		 LIMIT $1`, args...)
	if err != nil {
		return nil, report.Page{}, fmt.Errorf("list audit: %w", err)
	}
	got := len(rows)
	var last AuditEntry
	if got > n {
		last, rows = rows[n-1], rows[:n]
	}
	next := report.NextPageAfter(n, got, last.At, last.ID)
	for i := range rows {
		rows[i].At = rows[i].At.UTC()
	}
	return rows, next, nil
}

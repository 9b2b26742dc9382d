package keyed

// The select list of a key and the two steps on idempotency_keys and key_tombstones that
// several statements share, written once. Each step is a whole statement a reader can run
// by hand with its named parameters; the statements that need one as a step splice it in
// as a CTE (WITH k AS (…), WITH t AS (…)), as orderPayloadSQL and paidStatusesSQL are
// spliced.
const (
	// Columns is the select list that fills a Key.
	Columns = `id, client_id, key, fingerprint, method, path, state, recovery_point, lease_token,
	lease_expires_at, order_id, refund_id, response_status, response_headers, response_body,
	attention_reason, created_at, expires_at, intent, false AS tombstone`

	// SetStateSQL is the one fenced write of a key (SetState's parameters, made by Complete,
	// Release, Extend or NeedsAttention, as River's JobSetStateIfRunning): only the worker
	// that holds the key's lease (its lease token) writes it, and only while it is in progress,
	// so that a key taken over meanwhile, or already completed, matches no row and the steps
	// that read the CTE's RETURNING do nothing (TestFence*, TestOldOwnerWritesNothingAfterATakeover).
	// A completion stores the answer and ends the lease; handing the key to an operator keeps
	// the reason; a release or an extension only moves the lease. Any of them may store the
	// card identity a charge's answer carried (WithCard); a NULL keeps the key's. A statement that splices it
	// adds its own RETURNING (order_id, refund_id). The CASEs compare the state as text, so
	// that one parameter has one type however the statement around it uses it; the primary
	// key finds the row whatever the parameters (TestKeyWritesUseThePrimaryKey).
	SetStateSQL = `
	UPDATE idempotency_keys
	   SET state = CAST(:state AS text),
	       lease_expires_at = CAST(:lease_expires_at AS timestamptz),
	       recovery_point = CASE WHEN CAST(:state AS text) = 'completed' THEN 'finished' ELSE recovery_point END,
	       response_status = CASE WHEN CAST(:state AS text) = 'completed' THEN CAST(:response_status AS int) ELSE response_status END,
	       response_headers = CASE WHEN CAST(:state AS text) = 'completed'
	                               THEN CAST(NULLIF(CAST(:response_headers AS text), '') AS jsonb) ELSE response_headers END,
	       response_body = CASE WHEN CAST(:state AS text) = 'completed' THEN CAST(:response_body AS bytea) ELSE response_body END,
	       completed_at = CASE WHEN CAST(:state AS text) = 'completed' THEN CAST(:now AS timestamptz) ELSE completed_at END,
	       attention_reason = CASE WHEN CAST(:state AS text) = 'needs_attention'
	                               THEN CAST(:attention_reason AS text) ELSE attention_reason END,
	       card_fingerprint = coalesce(CAST(:card_fingerprint AS text), card_fingerprint)
	 WHERE id = :key_id AND lease_token = :lease_token AND state = 'in_progress'`

	// TombstoneSQL selects a live tombstone of the key (:client_id, :key, alive at
	// :created_at, the claim's now) as a Key: in Columns' shape, ID 0, completed, no
	// response, with the public ids of its order and refund for the late retry's answer. A key
	// that has a tombstone cannot be claimed again (claimOrderSQL, refundTombstoneSQL).
	TombstoneSQL = `
	SELECT CAST(0 AS bigint) AS id, t.client_id, t.key, t.fingerprint, t.method, t.path, 'completed' AS state,
	       'finished' AS recovery_point, CAST(0 AS bigint) AS lease_token, CAST(NULL AS timestamptz) AS lease_expires_at,
	       t.order_id, t.refund_id, CAST(NULL AS int) AS response_status, CAST(NULL AS jsonb) AS response_headers,
	       CAST(NULL AS bytea) AS response_body, CAST(NULL AS text) AS attention_reason, t.first_seen AS created_at,
	       t.expired_at AS expires_at, CAST(NULL AS bytea) AS intent, true AS tombstone,
	       coalesce(CAST(o.public_id AS text), '') AS order_public_id, coalesce(CAST(r.public_id AS text), '') AS refund_public_id
	  FROM key_tombstones t
	  LEFT JOIN orders o ON o.id = t.order_id
	  LEFT JOIN refunds r ON r.id = t.refund_id
	 WHERE t.client_id = :client_id AND t.key = :key AND t.forget_at > :created_at`
)

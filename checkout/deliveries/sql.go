package deliveries

// The package's SQL, next to the tables of migration 00020 it owns.

const (
	// lockClientSQL takes the client's row before its endpoints are counted, so that
	// concurrent creations for one client count one after the other and the quota holds
	// (counted without it, 40 concurrent creations made 35 endpoints). FOR NO KEY UPDATE
	// queues the client's creations behind each other but not the inserts of its orders,
	// whose foreign key takes only FOR KEY SHARE; other clients are not touched. Under READ
	// COMMITTED the count that follows sees every endpoint the lock waited for.
	lockClientSQL = `SELECT id FROM clients WHERE id = $1 FOR NO KEY UPDATE`

	countEndpointsSQL = `SELECT count(*) FROM webhook_endpoints WHERE client_id = $1 AND deleted_at IS NULL`

	insertEndpointSQL = `
	INSERT INTO webhook_endpoints (client_id, url, event_types, created_at)
	VALUES ($1, $2, $3, $4)
	RETURNING id, public_id, client_id, url, event_types, created_at, disabled_at, disabled_reason`

	insertSecretSQL = `
	INSERT INTO webhook_endpoint_secrets (endpoint_id, sealed, created_at) VALUES ($1, $2, $3)`

	endpointColumns = `e.id, e.public_id, e.client_id, e.url, e.event_types, e.created_at, e.disabled_at, e.disabled_reason`

	listEndpointsSQL = `
	SELECT ` + endpointColumns + `,
	       (SELECT max(s.expires_at) FROM webhook_endpoint_secrets s
	         WHERE s.endpoint_id = e.id AND s.expires_at > $2) AS rotating_until
	  FROM webhook_endpoints e
	 WHERE e.client_id = $1 AND e.deleted_at IS NULL
	 ORDER BY e.created_at DESC, e.id DESC`

	getEndpointSQL = `
	SELECT ` + endpointColumns + `,
	       (SELECT max(s.expires_at) FROM webhook_endpoint_secrets s
	         WHERE s.endpoint_id = e.id AND s.expires_at > $3) AS rotating_until
	  FROM webhook_endpoints e
	 WHERE e.client_id = $1 AND e.public_id = $2 AND e.deleted_at IS NULL`

	lockEndpointSQL = `
	SELECT id FROM webhook_endpoints
	 WHERE client_id = $1 AND public_id = $2 AND deleted_at IS NULL
	   FOR UPDATE`

	deleteEndpointSQL = `
	UPDATE webhook_endpoints SET deleted_at = $3
	 WHERE client_id = $1 AND public_id = $2 AND deleted_at IS NULL`

	// A rotation ends the overlap of every secret still signing: the newest secret signs
	// alone once the overlap has passed, however many rotations happened within it.
	expireSecretsSQL = `
	UPDATE webhook_endpoint_secrets SET expires_at = $2
	 WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > $2)`

	signingSecretsSQL = `
	SELECT sealed FROM webhook_endpoint_secrets
	 WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > $2)
	 ORDER BY created_at DESC, id DESC`

	// The fan-out of one event: one delivery per enabled endpoint of the client subscribed
	// to its type. ON CONFLICT makes a repeated fan-out (the outbox retrying after a crash)
	// create nothing more; RETURNING names only the deliveries created now.
	fanOutSQL = `-- name: FanOut :many
	INSERT INTO webhook_deliveries (event_id, event_type, endpoint_id, payload, created_at, next_attempt_at)
	SELECT $1, $2, e.id, $4, $5, $5
	  FROM webhook_endpoints e
	 WHERE e.client_id = $3 AND e.deleted_at IS NULL AND e.disabled_at IS NULL
	   AND $2 = ANY (e.event_types)
	ON CONFLICT (event_id, endpoint_id) DO NOTHING
	RETURNING id`

	loadDeliverySQL = `
	SELECT d.id, d.event_id, d.endpoint_id, d.payload, d.state, d.attempts,
	       coalesce(d.resent_at, d.created_at) AS created_at, -- where the horizon starts
	       e.url, e.disabled_at IS NOT NULL AS disabled, e.deleted_at IS NOT NULL AS deleted
	  FROM webhook_deliveries d
	  JOIN webhook_endpoints e ON e.id = d.endpoint_id
	 WHERE d.id = $1`

	insertAttemptSQL = `
	INSERT INTO webhook_attempts (delivery_id, attempted_at, manual, status_code, latency_ms, error, response_excerpt)
	VALUES ($1, $2, $3, $4, $5, $6, $7)`

	// recordAttemptSQL: $4 state, $5 next attempt (NULL: finished, or a failed redelivery
	// of a pending delivery, which keeps its schedule), $6 finished_at.
	recordAttemptSQL = `
	UPDATE webhook_deliveries
	   SET attempts = attempts + 1, last_attempt_at = $2, last_status = $3, last_error = $7,
	       state = $4, finished_at = $6,
	       next_attempt_at = CASE WHEN $4 = 'pending' THEN coalesce($5, next_attempt_at) END
	 WHERE id = $1`

	// An endpoint fails for the whole horizon when no attempt of any of its deliveries
	// succeeded since the dead delivery was created (a horizon ago).
	disableEndpointSQL = `
	UPDATE webhook_endpoints e SET disabled_at = $3, disabled_reason = $4
	 WHERE e.id = $1 AND e.disabled_at IS NULL
	   AND NOT EXISTS (
	       SELECT 1 FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
	        WHERE d.endpoint_id = e.id AND a.attempted_at >= $2 AND a.status_code BETWEEN 200 AND 299)`

	killDeliverySQL = `
	UPDATE webhook_deliveries SET state = 'dead', next_attempt_at = NULL, finished_at = $2, last_error = $3
	 WHERE id = $1 AND state = 'pending'`
)

package main

// The statements of seed-copy (copyseed.go), each a whole statement a reader can run by hand.
const (
	// seedClientSQL finds the client of a secret (clients.Hash) and its key TTL in seconds.
	seedClientSQL = `SELECT id, extract(epoch FROM key_ttl) FROM clients WHERE secret_hash = $1`

	// seedReserveIDsSQL takes $1 order ids and $1 key ids from their sequences in one block
	// and returns the first of each; a claim meanwhile would take one of them, so it runs
	// while nothing else writes.
	seedReserveIDsSQL = `
	SELECT setval(pg_get_serial_sequence('orders', 'id'), nextval(pg_get_serial_sequence('orders', 'id')) + $1 - 1) - $1 + 1,
	       setval(pg_get_serial_sequence('idempotency_keys', 'id'), nextval(pg_get_serial_sequence('idempotency_keys', 'id')) + $1 - 1) - $1 + 1`

	// seedSuperuserSQL: whether the session may skip foreign-key checks.
	seedSuperuserSQL = `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`

	// seedSessionSQL: a chunk's commit need not wait for its flush (a crash costs a seed,
	// which is started again). seedNoForeignKeysSQL skips the foreign-key triggers of the
	// transaction only; the count triggers of key_events are ENABLE ALWAYS and still fire.
	seedSessionSQL       = `SET LOCAL synchronous_commit = off`
	seedNoForeignKeysSQL = `SET LOCAL session_replication_role = replica`

	// seedVacuumSQL takes the statistics and the visibility map of what was seeded.
	seedVacuumSQL = `VACUUM ANALYZE orders, payments, idempotency_keys, key_events, key_event_counts, outbox_events`
)

// seedTables are the COPYs of one chunk, in the order the foreign keys need.
var seedTables = []struct {
	table string
	cols  []string
}{
	{"orders", []string{"id", "client_id", "status", "amount", "currency", "items", "customer_id", "captured_amount",
		"created_at", "updated_at", "public_id", "event_seq"}},
	{"payments", []string{"order_id", "provider_charge_id", "provider_key", "amount", "currency", "status",
		"card_brand", "card_last4", "created_at"}},
	{"idempotency_keys", []string{"id", "client_id", "key", "fingerprint", "scope_fingerprint", "method", "path", "state",
		"recovery_point", "order_id", "response_status", "response_headers", "response_body", "created_at", "completed_at",
		"expires_at"}},
	{"key_events", []string{"at", "client_id", "key", "key_id", "kind", "status", "request_id", "remote_addr",
		"user_agent", "detail"}},
	{"outbox_events", []string{"id", "client_id", "type", "order_id", "payload", "created_at"}},
}

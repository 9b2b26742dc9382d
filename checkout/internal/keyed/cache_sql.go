package keyed

// The statements that keep every process's replay cache (Cache) honest: each is a
// notification on CacheChannel, which Postgres delivers to every listening session when the
// transaction that sent it commits, and never if it rolls back.

// notifySQL sends $2 on channel $1 (a beat, sent alone).
const notifySQL = `SELECT pg_notify($1, $2)`

// setExpirySQL ends the retention of the key with id $1 at $2 and tells every process's
// cache to forget it, in one statement: the operator's expire action (SetExpiry).
const setExpirySQL = `
	WITH k AS (
	    UPDATE idempotency_keys SET expires_at = $2 WHERE id = $1
	    RETURNING client_id, key
	)
	SELECT pg_notify('` + CacheChannel + `', 'key:' || k.client_id || ':' || k.key) FROM k`

// NotifyGoneSQL is the step that tells every process's cache to forget the keys of the
// relation gone (client_id, key): a statement that deletes or changes completed keys
// outside the request path splices it as a CTE (WITH … notified AS (NotifyGoneSQL)) and
// reads it (SELECT count(*) FROM notified), since Postgres runs a SELECT in WITH only when
// it is read. The sweeper's delete splices it.
const NotifyGoneSQL = `SELECT pg_notify('` + CacheChannel + `', 'key:' || g.client_id || ':' || g.key) FROM gone g`

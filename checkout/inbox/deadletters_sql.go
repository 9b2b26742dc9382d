package inbox

// The SQL of the inbox's dead letters (provider_dead_letters, migration 39).

// recordDeadLetterSQL keeps the raw body $4 of provider $1 under webhook-id $2, once per
// body: a redelivery, byte for byte the same, counts on the row it made. Its reason and
// detail stay those of the first delivery.
const recordDeadLetterSQL = `
	INSERT INTO provider_dead_letters AS d (provider, webhook_id, body, body_sha256, reason, detail,
	                                        received_at, last_delivery_at)
	VALUES ($1, $2, $3, sha256($3), $4, $5, $6, $6)
	ON CONFLICT (provider, body_sha256) DO UPDATE
	   SET deliveries = d.deliveries + 1, last_delivery_at = greatest(d.last_delivery_at, excluded.last_delivery_at)`

// lockDeadLetterSQL reads dead letter $1 for its replay, locked: two replays of it at once
// are decided one after the other.
const lockDeadLetterSQL = `
	SELECT provider, webhook_id, body, state FROM provider_dead_letters WHERE id = $1 FOR UPDATE`

// replayedDeadLetterSQL marks dead letter $1 replayed at $2 with the outcome $3.
const replayedDeadLetterSQL = `
	UPDATE provider_dead_letters SET state = 'replayed', replayed_at = $2, replay_outcome = $3 WHERE id = $1`

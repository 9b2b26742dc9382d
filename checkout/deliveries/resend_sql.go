package deliveries

// The statements of a resend of a window (resend.go), on the tables of migrations 00020 and
// 00044. $1 is the endpoint's internal id; a window is [$2, $3) of the events' created_at.

const (
	// A resend re-enables the endpoint it resends to.
	enableEndpointSQL = `
	UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL
	 WHERE id = $1 AND disabled_at IS NOT NULL`

	// The events of the window the endpoint is subscribed to: those it has a delivery of,
	// and those it has none of (it was disabled when they were fanned out, or they are not
	// dispatched yet), which have missing true. Events older than the endpoint were never
	// meant for it.
	windowEventsSQL = `
	SELECT ev.id, ev.client_id, ev.type, ev.order_id, ev.payload, ev.created_at,
	       NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = ev.id AND d.endpoint_id = e.id) AS missing
	  FROM webhook_endpoints e
	  JOIN outbox_events ev ON ev.client_id = e.client_id AND ev.type = ANY (e.event_types)
	 WHERE e.id = $1 AND ev.created_at >= $2 AND ev.created_at < $3 AND ev.created_at >= e.created_at
	 ORDER BY ev.created_at, ev.id`

	// The delivery of an event the endpoint never got, as the fan-out would have made it
	// (the same payload, and the event's time as created_at), due now. ON CONFLICT: the
	// outbox's fan-out of a late event made it meanwhile, and its own job sends it.
	insertResentSQL = `
	INSERT INTO webhook_deliveries (event_id, event_type, endpoint_id, payload, created_at, next_attempt_at, resent_at)
	VALUES ($1, $2, $3, $4, $5, $6, $6)
	ON CONFLICT (event_id, endpoint_id) DO NOTHING
	RETURNING id`

	// A dead delivery of the window is pending again, due now, with a new horizon. A
	// pending delivery is still on its schedule and a succeeded one was received: neither
	// is touched, which is what makes a repeated resend queue nothing more.
	reviveDeadSQL = `
	UPDATE webhook_deliveries
	   SET state = 'pending', finished_at = NULL, next_attempt_at = $4, resent_at = $4
	 WHERE endpoint_id = $1 AND state = 'dead' AND created_at >= $2 AND created_at < $3
	RETURNING id`
)

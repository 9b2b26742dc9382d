package deliveries

// The statements of the attempt leases and their waiters (lease.go), on
// webhook_attempt_leases and webhook_attempt_waiters (migration 00045), which this package
// owns.

// leaseLockClass is the first key of the advisory lock under which a client's leases and
// waiters are counted and changed ("wl" in ASCII); the second is the client id, folded into
// an int4: two clients sharing a lock only wait for each other.
const leaseLockClass = 0x776c

const (
	// leaseTargetSQL: whom an attempt of the delivery would be sent to, and whether a
	// scheduled attempt would send anything at all; it takes the client's lock ($2, the
	// lock class) when there is an attempt to make.
	leaseTargetSQL = `
	SELECT d.endpoint_id, e.client_id, d.state,
	       CASE WHEN d.state = 'pending' OR $3 THEN pg_advisory_xact_lock($2, CAST(e.client_id % 2147483647 AS integer)) END IS NOT NULL AS locked
	  FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
	 WHERE d.id = $1`

	leaseLockSQL = `SELECT pg_advisory_xact_lock($1, CAST($2 % 2147483647 AS integer))`

	// claimSQL, under the client's lock, in one statement so that the lock is held for as
	// short as can be: frees the slots of attempts whose process died before it deleted
	// their lease, takes the job ($3) off the waiters, counts the slots taken (attempts in
	// flight, and waiters woken after $6, whose slot is kept for them), and takes a lease
	// if the endpoint ($2) and the client ($1) have a free slot, or puts the job back among
	// the waiters, as old as it was. $4 is the delivery, $5 now, $7 the lease's expiry, $8
	// and $9 the caps. It returns the lease's id, or NULL for a waiter.
	claimSQL = `
	WITH expired AS (
	    DELETE FROM webhook_attempt_leases WHERE client_id = $1 AND expires_at <= $5
	), unwaited AS (
	    DELETE FROM webhook_attempt_waiters WHERE job_id = $3 RETURNING since
	), taken AS (
	    SELECT count(*) FILTER (WHERE endpoint_id = $2) AS endpoint, count(*) AS client
	      FROM (SELECT endpoint_id FROM webhook_attempt_leases WHERE client_id = $1 AND expires_at > $5
	            UNION ALL
	            SELECT endpoint_id FROM webhook_attempt_waiters
	             WHERE client_id = $1 AND woken_at > $6 AND job_id <> $3) t
	), leased AS (
	    INSERT INTO webhook_attempt_leases (client_id, endpoint_id, delivery_id, started_at, expires_at)
	    SELECT $1, $2, $4, $5, $7 FROM taken WHERE endpoint < $8 AND client < $9
	    RETURNING id
	), waiting AS (
	    INSERT INTO webhook_attempt_waiters (job_id, client_id, endpoint_id, since)
	    SELECT $3, $1, $2, coalesce((SELECT since FROM unwaited), $5) FROM taken WHERE NOT (endpoint < $8 AND client < $9)
	)
	SELECT (SELECT id FROM leased)`

	// slotsTakenSQL counts, per endpoint of the client, the attempts in flight and the
	// waiters woken after $2 (a slot kept for each until it comes).
	slotsTakenSQL = `
	SELECT endpoint_id, count(*) AS taken
	  FROM (SELECT endpoint_id FROM webhook_attempt_leases WHERE client_id = $1
	        UNION ALL
	        SELECT endpoint_id FROM webhook_attempt_waiters WHERE client_id = $1 AND woken_at > $2) t
	 GROUP BY endpoint_id`

	// backlogSQL counts the client's deliveries never attempted and still pending, of
	// events since $2: queued, or in their first attempt (the partial index of migration
	// 00045).
	//
	// The client's endpoints are an array of ids (= ANY (ARRAY(…))) rather than a join: as
	// a join, planned generic (the statement is kept prepared) or for its arguments, Postgres
	// read the partial index whole, every client's deliveries never attempted, and looked up
	// the endpoint of each; with statistics from before one client's burst of 12,000
	// deliveries, every other client's fan-out took 10 ms instead of 0.05. The array is
	// looked up in the partial index endpoint by endpoint, whatever the statistics
	// (TestTheFanOutsGenericPlansUseTheirIndexes).
	backlogSQL = `-- name: FanOutBacklog :one
	SELECT count(*)
	  FROM webhook_deliveries d
	 WHERE d.endpoint_id = ANY (ARRAY(SELECT e.id FROM webhook_endpoints e WHERE e.client_id = $1))
	   AND d.state = 'pending' AND d.attempts = 0 AND d.created_at > $2`

	// queueWaitingSQL puts a job queued by a fan-out ($1, of client $2, for delivery $3)
	// among the waiters since $4.
	queueWaitingSQL = `
	INSERT INTO webhook_attempt_waiters (job_id, client_id, endpoint_id, since)
	SELECT $1, $2, endpoint_id, $4 FROM webhook_deliveries WHERE id = $3`

	releaseLeaseSQL = `DELETE FROM webhook_attempt_leases WHERE id = $1`

	// waitersSQL lists the client's waiters not woken after $2, oldest first.
	waitersSQL = `
	SELECT job_id, endpoint_id
	  FROM webhook_attempt_waiters
	 WHERE client_id = $1 AND (woken_at IS NULL OR woken_at <= $2)
	 ORDER BY since, job_id
	 LIMIT 100`

	wokenSQL = `UPDATE webhook_attempt_waiters SET woken_at = $2 WHERE job_id = $1`

	forgetWaiterSQL = `DELETE FROM webhook_attempt_waiters WHERE job_id = $1`
)

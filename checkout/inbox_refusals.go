package checkout

import (
	"context"
	"fmt"
	"time"

	"github.com/tekrar/tekrar/internal/pgtext"
)

// Refusal reasons of the provider inbox: the only words a refused delivery leaves in the
// database (provider_inbox_refusals), besides a count and the sender's truncated address.
const (
	RefusalBadSignature     = "bad_signature"     // no signature matches a configured key
	RefusalStale            = "stale"             // the timestamp is older than the tolerance
	RefusalFuture           = "future"            // the timestamp is further ahead than the tolerance
	RefusalMalformedHeaders = "malformed_headers" // a webhook-* header is missing or unreadable
	RefusalIDMismatch       = "id_mismatch"       // signed under another id than the event's
	RefusalApplyFailed      = "apply_failed"      // verified, but applying it failed: rolled back, to be redelivered
)

// refusalsKept is how long the minute counters of refusals are kept: the upsert that counts
// deletes older ones, so the table stays bounded whatever the rate of refusals.
const refusalsKept = 7 * 24 * time.Hour

// maxRefusalRemote bounds the address kept with a bucket.
const maxRefusalRemote = 64

// CountInboxRefusal counts one refused (or failed) delivery under reason, in the current
// minute's bucket, and remembers remote as the bucket's newest sender. Nothing of the
// delivery itself is stored. Concurrent refusals of one bucket are counted exactly: the
// increment is done by the upsert on the row, not read and written back.
func (s *Service) CountInboxRefusal(ctx context.Context, reason, remote string) error {
	if len(remote) > maxRefusalRemote {
		remote = remote[:maxRefusalRemote]
	}
	if !pgtext.Valid(remote) {
		remote = "?"
	}
	now := s.cfg.Now().UTC()
	_, err := s.db.ExecContext(ctx, `
		WITH old AS (
		    DELETE FROM provider_inbox_refusals WHERE bucket < $4
		)
		INSERT INTO provider_inbox_refusals AS r (bucket, reason, count, last_at, last_remote)
		VALUES ($1, $2, 1, $3, $5)
		ON CONFLICT (bucket, reason) DO UPDATE
		   SET count = r.count + 1,
		       last_at = greatest(r.last_at, excluded.last_at),
		       last_remote = CASE WHEN excluded.last_at >= r.last_at THEN excluded.last_remote ELSE r.last_remote END`,
		now.Truncate(time.Minute), reason, now, now.Add(-refusalsKept), remote)
	if err != nil {
		return fmt.Errorf("count inbox refusal %s: %w", reason, err)
	}
	return nil
}

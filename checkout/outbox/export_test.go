package outbox

// The dispatcher's statements, for the plan test.
var (
	ClaimSQL    = claimSQL
	ClaimOneSQL = claimOneSQL
	GetSQL      = getSQL
)

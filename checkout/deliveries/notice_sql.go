package deliveries

// The statement of the notice of a disabled endpoint (notice.go): the endpoint, its
// client's name and contact address (migration 00044).
const noticeEndpointSQL = `
	SELECT e.public_id, e.url, e.disabled_at, coalesce(e.disabled_reason, '') AS disabled_reason,
	       c.name AS client_name, coalesce(c.contact_email, '') AS contact_email
	  FROM webhook_endpoints e
	  JOIN clients c ON c.id = e.client_id
	 WHERE e.id = $1`

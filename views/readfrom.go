package views

import "context"

type readFromKey struct{}

// WithReadFrom puts into ctx the line a page shows under its header when it read a standby:
// where it read and how far behind the primary that was ("read from a standby, 3 s behind").
func WithReadFrom(ctx context.Context, line string) context.Context {
	return context.WithValue(ctx, readFromKey{}, line)
}

// ReadFrom is the line ctx carries; "" when the page read the primary.
func ReadFrom(ctx context.Context) string {
	line, _ := ctx.Value(readFromKey{}).(string)
	return line
}

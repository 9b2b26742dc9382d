// Package process names the running process in what it records: the runs of reconciliation
// and settlement say which process ran them.
package process

import (
	"os"
	"strconv"
)

// Name is "host:pid" of this process ("unknown" for a host without a name).
func Name() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

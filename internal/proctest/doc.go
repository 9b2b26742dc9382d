// Package proctest runs the tekrar binary as a user would, for the tests of the packages that
// need real processes (cmd/tekrar, cmd/tekrar/failover): Main builds the binary once per
// test binary, Start runs it with an environment, flags and stdin, and every process a test
// starts is killed when the test ends, whatever happened. It also holds what a retrying
// client was told (Answer), which the harnesses check afterwards, and a set of supervised
// serve replicas (Replicas).
//
// It is one package so that the test binaries that run processes share one copy of each
// helper, and so that go test can run those binaries side by side.
package proctest

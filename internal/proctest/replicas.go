package proctest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Replica is one `tekrar serve` of a Replicas: its base URL and settings, and the process
// running there now.
type Replica struct {
	Base string
	Env  []string

	mu  sync.Mutex
	p   *Proc
	all []*Proc // every incarnation, for CheckOutput
}

// Proc is the replica's current process.
func (s *Replica) Proc() *Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// Replicas are serve processes that Supervise restarts with the same settings whenever
// they die, as an orchestrator would. An exit the test did not cause is kept and reported by
// CheckOutput, with the output of every incarnation.
type Replicas struct {
	t    testing.TB
	List []*Replica
	// Expected reports whether an exit was a fault the test injected. Nil: none is.
	Expected func(*Proc) bool

	stopping atomic.Bool // set before the test ends the processes itself
	restarts atomic.Int64

	mu       sync.Mutex
	oddExits []string
}

// NewReplicas returns an empty set; the processes end with the test.
func NewReplicas(t testing.TB) *Replicas { return &Replicas{t: t} }

// Add starts a replica at base with env and waits at most timeout for it to be ready.
func (rs *Replicas) Add(base string, env []string, timeout time.Duration) *Replica {
	rs.t.Helper()
	s := &Replica{Base: base, Env: env}
	s.p = Start(rs.t, env, nil, "serve")
	rs.t.Cleanup(rs.Stop) // before the process is killed (cleanups run last first)
	s.all = append(s.all, s.p)
	rs.List = append(rs.List, s)
	WaitReady(rs.t, s.p, base, timeout)
	return s
}

// Supervise restarts every replica that dies until ctx ends or Stop is called, and returns
// then.
func (rs *Replicas) Supervise(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range rs.List {
		wg.Go(func() { rs.supervise(ctx, s) })
	}
	wg.Wait()
}

func (rs *Replicas) supervise(ctx context.Context, s *Replica) {
	for {
		p := s.Proc()
		select {
		case <-ctx.Done():
			return
		case <-p.Done():
		}
		if rs.stopping.Load() || ctx.Err() != nil {
			return
		}
		if rs.Expected == nil || !rs.Expected(p) {
			rs.mu.Lock()
			rs.oddExits = append(rs.oddExits, fmt.Sprintf("%s exited (%v)\nstderr:\n%s", s.Base, p.Err, p.Stderr))
			rs.mu.Unlock()
		}
		s.mu.Lock()
		s.p = Start(rs.t, s.Env, nil, "serve")
		s.all = append(s.all, s.p)
		s.mu.Unlock()
		rs.restarts.Add(1)
	}
}

// Restarts is how many times a replica was restarted.
func (rs *Replicas) Restarts() int64 { return rs.restarts.Load() }

// Stop ends supervision: exits after it are the test's own.
func (rs *Replicas) Stop() { rs.stopping.Store(true) }

// CheckOutput fails the test on any exit that was not Expected, and on any panic, stack
// trace or data race in the output of any incarnation.
func (rs *Replicas) CheckOutput() {
	t := rs.t
	t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, e := range rs.oddExits {
		t.Errorf("unexpected exit: %s", e)
	}
	for _, s := range rs.List {
		s.mu.Lock()
		for _, p := range s.all {
			out := p.Stderr.String() + p.Stdout.String()
			for _, bad := range []string{"panic:", "goroutine ", "fatal error:", "DATA RACE"} {
				if strings.Contains(out, bad) {
					t.Errorf("%s: output contains %q:\n%s", s.Base, bad, out)
					break
				}
			}
		}
		s.mu.Unlock()
	}
}

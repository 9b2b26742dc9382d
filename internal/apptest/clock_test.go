package apptest

import (
	"testing"
	"time"
)

// A stopped clock moves only by Advance, so two reads around slow work are exactly the
// advance apart; resumed, it runs on from where it stood, not from the wall clock.
func TestClockStopAdvanceResume(t *testing.T) {
	var c Clock
	c.Advance(time.Hour)
	at := c.Stop()
	if d := at.Sub(time.Now()); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("stopped %v from the wall clock, want the hour Advance added", d)
	}
	time.Sleep(20 * time.Millisecond) // slow work between two writes
	c.Advance(30 * time.Second)
	if got := c.Now().Sub(at); got != 30*time.Second {
		t.Fatalf("stopped clock moved %v, want exactly 30s", got)
	}
	c.Resume()
	resumed := c.Now()
	if d := resumed.Sub(at); d < 30*time.Second || d > 31*time.Second {
		t.Fatalf("resumed %v after the stop, want 30s and the moment since", d)
	}
	time.Sleep(20 * time.Millisecond)
	if d := c.Now().Sub(resumed); d < 20*time.Millisecond {
		t.Fatalf("resumed clock moved %v in 20ms, want it running", d)
	}
	c.Resume() // resuming a running clock changes nothing
	if d := c.Now().Sub(resumed); d < 20*time.Millisecond || d > time.Minute {
		t.Fatalf("a second Resume moved the clock to %v after the first", d)
	}
}

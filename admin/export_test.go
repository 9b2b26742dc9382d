package admin

import (
	"time"

	"golang.org/x/crypto/bcrypt"
)

// DummyHashCost is the bcrypt cost of the hash an unknown email's password is checked
// against.
func DummyHashCost() int {
	c, err := bcrypt.Cost(dummyHash())
	if err != nil {
		panic(err)
	}
	return c
}

// CheckedPasswords is how many password checks this process has run.
func CheckedPasswords() int64 { return checkedPasswords.Load() }

// PasswordCheckSlots is how many password checks may run at once.
func PasswordCheckSlots() int { return cap(passwordChecks) }

// HoldPasswordChecks takes every password check slot, as a burst of sign-ins would, and
// makes a sign-in wait for one at most wait; release gives them back.
func HoldPasswordChecks(wait time.Duration) (release func()) {
	old := passwordWait.Swap(int64(wait))
	for range cap(passwordChecks) {
		passwordChecks <- struct{}{}
	}
	return func() {
		for range cap(passwordChecks) {
			<-passwordChecks
		}
		passwordWait.Store(old)
	}
}

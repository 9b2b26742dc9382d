package config

import (
	"io"
	"testing"
)

// The read URL is optional (unset: the console reads DATABASE_URL), and set by its variable or
// its flag, the flag winning, like every other setting.
func TestReadDatabaseURL(t *testing.T) {
	const set = "postgres://tekrar@/tekrar?host=db1,db2&port=5432,5432&target_session_attrs=prefer-standby"
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"unset", nil, nil, ""},
		{"environment", nil, []string{"TEKRAR_READ_DATABASE_URL", set}, set},
		{"flag over environment", []string{"--read-database-url=host=db2 dbname=tekrar"}, []string{"TEKRAR_READ_DATABASE_URL", set}, "host=db2 dbname=tekrar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadServer("serve", tt.args, env(tt.env...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.ReadDatabaseURL != tt.want {
				t.Errorf("ReadDatabaseURL = %q, want %q", c.ReadDatabaseURL, tt.want)
			}
		})
	}
}

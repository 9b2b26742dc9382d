package config

// ReadDatabaseURL binds the optional connection string that the console's and the reports'
// read-only pages read through (TEKRAR_READ_DATABASE_URL); empty: they read the primary,
// through DATABASE_URL, as everything else does. The documented way to name a standby is the
// whole set of nodes with target_session_attrs=prefer-standby, so that the reads go to a
// standby while one answers and to the primary when none does, and a standby that is down
// neither stops a start nor the console.
func (s *Set) ReadDatabaseURL(p *string) {
	s.parse("read-database-url", "TEKRAR_READ_DATABASE_URL", "",
		"Postgres connection string the console's and reports' read-only pages read through, usually every node with target_session_attrs=prefer-standby; writes, the engine and the operator's actions always use DATABASE_URL; unset: the pages read DATABASE_URL too",
		"url", func(v string) error {
			if err := CheckDatabaseURL(v); err != nil {
				return err
			}
			*p = v
			return nil
		})
}

package db

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/jmoiron/sqlx/reflectx"
)

// Statement is a SQL statement written with named parameters (:name, a db tag of the
// parameter struct P) instead of numbered ones, so that nobody keeps a "$1 key id, $2
// lease token, …" contract in their head. It is bound to Postgres's numbered form once,
// when the package that declares it loads (sqlx's named-query syntax; "::" there is a
// literal ":", so a cast is written CAST(x AS t)), and each call only reads P's fields in
// that order: the text sent is the same for every call, so Prepared prepares it once per
// connection, and a call costs what a positional one did.
type Statement[P any] struct {
	// Text is the statement with numbered parameters; constant.
	Text  string
	index [][]int // for each parameter in order, the field of P that fills it
	// plain marks the fields of type int64, int or string, passed as the compiler boxes
	// them (small integers and "" without an allocation) rather than by reflection (one
	// allocation each): the claim and the completion run at every first arrival.
	plain []reflect.Kind
}

var paramMapper = reflectx.NewMapperFunc("db", sqlx.NameMapper)

var numberedParam = regexp.MustCompile(`\$[0-9]+`)

// Named binds query to P's fields. It panics on a name P lacks, a "::" cast or a "$":
// statements are package variables, so a mistake stops every test at once.
func Named[P any](query string) Statement[P] {
	if strings.Contains(query, "::") {
		panic("named statement with a :: cast, which sqlx reads as a literal \":\": write CAST(x AS t)\n" + query)
	}
	fields := paramMapper.TypeMap(reflect.TypeFor[P]())
	names := make(map[string]any, len(fields.Names))
	for name := range fields.Names {
		names[name] = name
	}
	if strings.Contains(query, "$") {
		panic("named statement with a numbered parameter\n" + query)
	}
	text, args, err := sqlx.BindNamed(sqlx.DOLLAR, query, names)
	if err != nil {
		panic(fmt.Sprintf("bind named statement: %v\n%s", err, query))
	}
	// sqlx numbers every occurrence of a name; a name used twice becomes one parameter, as
	// a hand-numbered statement would have it (each parameter costs its encoding and its
	// bytes on the wire).
	number := make(map[string]int, len(args))
	renumber := make([]string, len(args))
	var s Statement[P]
	for i, a := range args {
		name := a.(string)
		n, ok := number[name]
		if !ok {
			f := fields.GetByPath(name)
			var kind reflect.Kind
			switch t := f.Field.Type; t {
			case reflect.TypeFor[int64](), reflect.TypeFor[int](), reflect.TypeFor[string]():
				kind = t.Kind()
			}
			s.index, s.plain = append(s.index, f.Index), append(s.plain, kind)
			n = len(s.index)
			number[name] = n
		}
		renumber[i] = "$" + strconv.Itoa(n)
	}
	s.Text = numberedParam.ReplaceAllStringFunc(text, func(m string) string {
		k, _ := strconv.Atoi(m[1:])
		return renumber[k-1]
	})
	return s
}

// Args are the parameters of one call, in the statement's order.
func (s Statement[P]) Args(p *P) []any {
	v := reflect.ValueOf(p).Elem()
	out := make([]any, len(s.index))
	for i, ix := range s.index {
		f := reflectx.FieldByIndexesReadOnly(v, ix)
		switch s.plain[i] {
		case reflect.Int64:
			out[i] = f.Int()
		case reflect.Int:
			out[i] = int(f.Int())
		case reflect.String:
			out[i] = f.String()
		default:
			out[i] = f.Interface()
		}
	}
	return out
}

// Get runs the statement for one row into dest.
func (s Statement[P]) Get(ctx context.Context, db sqlx.QueryerContext, dest any, p P) error {
	return sqlx.GetContext(ctx, db, dest, s.Text, s.Args(&p)...)
}

// Exec runs the statement.
func (s Statement[P]) Exec(ctx context.Context, db sqlx.ExecerContext, p P) (sql.Result, error) {
	return db.ExecContext(ctx, s.Text, s.Args(&p)...)
}

// NullString is s for a nullable text column, where "" is stored as NULL.
func NullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

package checkout

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

	tdb "github.com/tekrar/tekrar/internal/db"
)

// inTx is the one transaction helper (internal/db.InTx), named short for the package's use.
var inTx = tdb.InTx

// statement is a SQL statement written with named parameters (:name, a db tag of the
// parameter struct P) instead of numbered ones, so that nobody keeps a "$1 key id, $2
// lease token, …" contract in their head. It is bound to Postgres's numbered form once,
// when the package loads (sqlx's named-query syntax; "::" there is a literal ":", so a
// cast is written CAST(x AS t)), and each call only reads P's fields in that order: the
// text sent is the same for every call, so internal/db.Prepared prepares it once per
// connection, and a call costs what a positional one did.
type statement[P any] struct {
	text  string  // numbered parameters; constant
	index [][]int // for each parameter in order, the field of P that fills it
	// plain marks the fields of type int64, int or string, passed as the compiler boxes
	// them (small integers and "" without an allocation) rather than by reflection (one
	// allocation each): the claim and the completion run at every first arrival.
	plain []reflect.Kind
}

var paramMapper = reflectx.NewMapperFunc("db", sqlx.NameMapper)

var numberedParam = regexp.MustCompile(`\$[0-9]+`)

// named binds query to P's fields. It panics on a name P lacks, a "::" cast or a "$":
// statements are package variables, so a mistake stops every test at once.
func named[P any](query string) statement[P] {
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
	var s statement[P]
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
	s.text = numberedParam.ReplaceAllStringFunc(text, func(m string) string {
		k, _ := strconv.Atoi(m[1:])
		return renumber[k-1]
	})
	return s
}

// args are the parameters of one call, in the statement's order.
func (s statement[P]) args(p *P) []any {
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

// get runs the statement for one row into dest.
func (s statement[P]) get(ctx context.Context, db sqlx.QueryerContext, dest any, p P) error {
	return sqlx.GetContext(ctx, db, dest, s.text, s.args(&p)...)
}

// exec runs the statement.
func (s statement[P]) exec(ctx context.Context, db sqlx.ExecerContext, p P) (sql.Result, error) {
	return db.ExecContext(ctx, s.text, s.args(&p)...)
}

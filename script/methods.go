package script

import (
	"strings"
	"unicode"

	"go.starlark.net/starlark"
)

// Methods of strings, bytes, lists, dicts and sets, wrapped (ops.go's attr) so that a call is
// bounded and charged: those that can build much more than their receiver (join, replace,
// format, split, extend, update, union, …) are checked before they run; every method that builds
// a new value is charged for it after; those that return tuples have them counted.

// methodCheck bounds and charges a call of a method before it runs.
type methodCheck func(r *run, recv starlark.Value, args starlark.Tuple, kwargs []starlark.Tuple) error

// methodRule is how a method's calls are checked.
type methodRule struct {
	pre   methodCheck
	fresh bool // returns a value it built (charged after the call); else an existing one or a scalar
}

var methodRules = map[string]methodRule{
	// string and bytes
	"string.join":       {pre: preJoin, fresh: true},
	"string.replace":    {pre: preReplace, fresh: true},
	"string.format":     {pre: preStrFormat, fresh: true},
	"string.split":      {pre: preSplit, fresh: true},
	"string.rsplit":     {pre: preSplit, fresh: true},
	"string.splitlines": {pre: preSplitlines, fresh: true},
	"string.partition":  {fresh: true},
	"string.rpartition": {fresh: true},
	"string.capitalize": {fresh: true},
	"string.lower":      {fresh: true},
	"string.upper":      {fresh: true},
	"string.title":      {fresh: true},
	"string.strip":      {fresh: true},
	"string.lstrip":     {fresh: true},
	"string.rstrip":     {fresh: true},
	// list
	"list.append": {pre: chargeWords(1)},
	"list.insert": {pre: chargeWords(1)},
	"list.extend": {pre: preExtend},
	"list.index":  {pre: preSearch},
	"list.remove": {pre: preSearch},
	// dict
	"dict.items":      {pre: preView(entryBytes), fresh: true},
	"dict.keys":       {pre: preView(wordBytes), fresh: true},
	"dict.values":     {pre: preView(wordBytes), fresh: true},
	"dict.update":     {pre: preMerge},
	"dict.setdefault": {pre: chargeEntries(1)},
	"dict.popitem":    {fresh: true},
	// set
	"set.add":                  {pre: chargeEntries(1)},
	"set.union":                {pre: preSetOp, fresh: true},
	"set.update":               {pre: preMerge},
	"set.intersection":         {pre: preSetOp, fresh: true},
	"set.difference":           {pre: preSetOp, fresh: true},
	"set.symmetric_difference": {pre: preSetOp, fresh: true},
}

// method wraps a bound method.
func (r *run) method(m *starlark.Builtin) *starlark.Builtin {
	recv := m.Receiver()
	typ := recv.Type()
	if typ == "bytes" {
		typ = "string"
	}
	rule := methodRules[typ+"."+m.Name()]
	return starlark.NewBuiltin(m.Name(), func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if rule.pre != nil {
			if err := rule.pre(r, recv, args, kwargs); err != nil {
				return nil, err
			}
		}
		v, err := starlark.Call(thread, m, args, kwargs)
		if err != nil {
			return nil, err
		}
		if rule.fresh {
			if err := r.charge(sizeOf(v)); err != nil {
				return nil, err
			}
			if err := r.checkTuples(v); err != nil {
				return nil, err
			}
		}
		return v, nil
	})
}

func chargeWords(n int64) methodCheck {
	return func(r *run, _ starlark.Value, _ starlark.Tuple, _ []starlark.Tuple) error {
		return r.charge(n * wordBytes)
	}
}

func chargeEntries(n int64) methodCheck {
	return func(r *run, _ starlark.Value, _ starlark.Tuple, _ []starlark.Tuple) error {
		return r.charge(n * entryBytes)
	}
}

// preJoin: sep.join(xs) builds the elements' lengths and the separators.
func preJoin(r *run, recv starlark.Value, args starlark.Tuple, _ []starlark.Tuple) error {
	if len(args) != 1 {
		return nil // the method reports it
	}
	sep := int64(length(recv))
	n := length(args[0])
	if n < 0 {
		return nil
	}
	total := int64(max(n-1, 0)) * sep
	it := starlark.Iterate(args[0])
	if it == nil {
		return nil
	}
	defer it.Done()
	var e starlark.Value
	for it.Next(&e) {
		total += int64(max(length(e), 0))
		if total > r.room() {
			break
		}
	}
	return r.charge(total + headerBytes)
}

// preReplace: s.replace(old, new[, count]) builds len(s) + count·(len(new)−len(old)).
func preReplace(r *run, recv starlark.Value, args starlark.Tuple, _ []starlark.Tuple) error {
	s, ok := starlark.AsString(recv)
	if !ok || len(args) < 2 {
		return nil
	}
	old, ok1 := starlark.AsString(args[0])
	repl, ok2 := starlark.AsString(args[1])
	if !ok1 || !ok2 {
		return nil
	}
	count := int64(strings.Count(s, old)) // len(s)+1 for an empty old
	if len(args) > 2 {
		if c, err := starlark.AsInt32(args[2]); err == nil && c >= 0 && int64(c) < count {
			count = int64(c)
		}
	}
	grow := count * int64(max(len(repl)-len(old), 0))
	return r.charge(int64(len(s)) + grow + headerBytes)
}

// preStrFormat: s.format(...) inserts at most one argument per replacement field.
func preStrFormat(r *run, recv starlark.Value, args starlark.Tuple, kwargs []starlark.Tuple) error {
	s, _ := starlark.AsString(recv)
	vals := append([]starlark.Value(nil), args...)
	for _, kv := range kwargs {
		vals = append(vals, kv[1])
	}
	return r.preFormat(s, strings.Count(s, "{"), vals)
}

// preSplit: s.split(sep) makes one string per separator, plus one.
func preSplit(r *run, recv starlark.Value, args starlark.Tuple, kwargs []starlark.Tuple) error {
	s, _ := starlark.AsString(recv)
	var pieces int
	if len(args) > 0 && args[0] != starlark.None {
		sep, ok := starlark.AsString(args[0])
		if !ok || sep == "" {
			return nil // the method reports it
		}
		pieces = strings.Count(s, sep) + 1
	} else {
		pieces = countFields(s) + 1
	}
	return r.charge(int64(pieces)*(wordBytes+headerBytes) + headerBytes)
}

// countFields counts the runs of non-space characters of s, as strings.Fields splits it.
func countFields(s string) int {
	n, in := 0, false
	for _, c := range s {
		space := unicode.IsSpace(c)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// preSplitlines: s.splitlines() makes one string per line.
func preSplitlines(r *run, recv starlark.Value, _ starlark.Tuple, _ []starlark.Tuple) error {
	s, _ := starlark.AsString(recv)
	return r.charge(int64(strings.Count(s, "\n")+strings.Count(s, "\r")+1)*(wordBytes+headerBytes) + headerBytes)
}

// preExtend: xs.extend(ys) appends len(ys) elements.
func preExtend(r *run, _ starlark.Value, args starlark.Tuple, _ []starlark.Tuple) error {
	if len(args) != 1 {
		return nil
	}
	if n := length(args[0]); n > 0 {
		return r.charge(int64(n) * wordBytes)
	}
	return nil
}

// preSearch: xs.index(x) and xs.remove(x) compare x with the elements.
func preSearch(r *run, recv starlark.Value, args starlark.Tuple, _ []starlark.Tuple) error {
	if len(args) == 0 {
		return nil
	}
	return r.checkCompare("index", args[0], recv)
}

// preView: d.items(), d.keys(), d.values() build a list of len(d) elements.
func preView(each int64) methodCheck {
	return func(r *run, recv starlark.Value, _ starlark.Tuple, _ []starlark.Tuple) error {
		return r.charge(int64(max(length(recv), 0))*(each+wordBytes) + headerBytes)
	}
}

// preMerge: d.update(...) and s.update(...) add every element of their arguments.
func preMerge(r *run, _ starlark.Value, args starlark.Tuple, kwargs []starlark.Tuple) error {
	n := int64(len(kwargs))
	for _, a := range args {
		n += int64(max(length(a), 0))
	}
	return r.charge(n * entryBytes)
}

// preSetOp: s.union(...) and its kin build a new set of at most every element of both.
func preSetOp(r *run, recv starlark.Value, args starlark.Tuple, kwargs []starlark.Tuple) error {
	if err := r.charge(int64(max(length(recv), 0))*entryBytes + headerBytes); err != nil {
		return err
	}
	return preMerge(r, recv, args, kwargs)
}

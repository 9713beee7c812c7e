package script

import (
	"fmt"
	"sort"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The builtins a script sees: every name of Starlark's universe, each either the interpreter's
// own (those whose work is bounded by their arguments' sizes, which are bounded), a checked
// wrapper of it, or ours (print, fail, str, repr, sorted, min, max). The universe itself is
// shared by every Starlark program in the process and is not changed: these shadow it.

// passThrough are the universe builtins used as they are.
var passThrough = []string{"None", "True", "False", "abs", "all", "any", "bool", "chr", "dir",
	"float", "hasattr", "hash", "len", "ord", "type"}

// maxIntDigits bounds the strings int() parses (parsing is quadratic in the digits).
const maxIntDigits = 4300

// builtins returns the script's builtins.
func (r *run) builtins() starlark.StringDict {
	u := starlark.Universe
	d := starlark.StringDict{}
	for _, name := range passThrough {
		d[name] = u[name]
	}
	charged := func(name string, pre func(args starlark.Tuple, kwargs []starlark.Tuple) error) *starlark.Builtin {
		orig := u[name]
		return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if pre != nil {
				if err := pre(args, kwargs); err != nil {
					return nil, err
				}
			}
			v, err := starlark.Call(thread, orig, args, kwargs)
			if err != nil {
				return nil, err
			}
			if err := r.charge(sizeOf(v)); err != nil {
				return nil, err
			}
			return v, r.checkTuples(v)
		})
	}
	// Copies of an iterable: one element each (entries for dicts and sets; a tuple each for
	// enumerate and zip).
	copies := func(each int64) func(args starlark.Tuple, kwargs []starlark.Tuple) error {
		return func(args starlark.Tuple, kwargs []starlark.Tuple) error {
			n := int64(len(kwargs))
			if len(args) > 0 {
				n += int64(max(length(args[0]), 0))
			}
			return r.charge(n * each)
		}
	}
	d["bytes"] = charged("bytes", nil)
	d["list"] = charged("list", copies(wordBytes))
	d["tuple"] = charged("tuple", copies(wordBytes))
	d["reversed"] = charged("reversed", copies(wordBytes))
	d["dict"] = charged("dict", copies(entryBytes))
	d["set"] = charged("set", copies(entryBytes))
	d["enumerate"] = charged("enumerate", copies(wordBytes+headerBytes+2*wordBytes))
	d["zip"] = charged("zip", func(args starlark.Tuple, _ []starlark.Tuple) error {
		n := -1
		for _, a := range args {
			if l := length(a); l >= 0 && (n < 0 || l < n) {
				n = l
			}
		}
		return r.charge(int64(max(n, 0)) * (wordBytes + headerBytes + int64(len(args))*wordBytes))
	})
	d["range"] = charged("range", func(args starlark.Tuple, kwargs []starlark.Tuple) error {
		v, err := starlark.Call(&starlark.Thread{}, u["range"], args, kwargs)
		if err != nil {
			return nil // the real call reports it
		}
		if n := starlark.Len(v); n > maxRange {
			return fmt.Errorf("range: %d elements, over the limit of %d", n, maxRange)
		}
		return nil
	})
	d["int"] = charged("int", func(args starlark.Tuple, _ []starlark.Tuple) error {
		if len(args) > 0 {
			if s, ok := starlark.AsString(args[0]); ok && len(s) > maxIntDigits {
				return fmt.Errorf("int: a string of %d characters is too long to parse (at most %d)", len(s), maxIntDigits)
			}
		}
		return nil
	})
	d["getattr"] = starlark.NewBuiltin("getattr", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return r.attr(thread, b, args, kwargs)
	})
	d["str"] = starlark.NewBuiltin("str", r.stringify(false))
	d["repr"] = starlark.NewBuiltin("repr", r.stringify(true))
	d["print"] = starlark.NewBuiltin("print", r.printFn)
	d["fail"] = starlark.NewBuiltin("fail", r.fail)
	d["sorted"] = starlark.NewBuiltin("sorted", r.sorted)
	d["min"] = starlark.NewBuiltin("min", r.minmax(syntax.LT))
	d["max"] = starlark.NewBuiltin("max", r.minmax(syntax.GT))
	return d
}

// stringify is str (or repr): bounded before it is built.
func (r *run) stringify(quoted bool) builtinFn {
	return func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var x starlark.Value
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
			return nil, err
		}
		if s, ok := x.(starlark.String); ok && !quoted {
			return s, nil
		}
		if _, err := r.chargeStr(x, quoted); err != nil {
			return nil, err
		}
		if quoted {
			return starlark.String(x.String()), nil
		}
		return starlark.String(toStr(x)), nil
	}
}

// toStr is str(x): a string as it is, anything else as repr.
func toStr(x starlark.Value) string {
	if s, ok := starlark.AsString(x); ok {
		return s
	}
	return x.String()
}

// strs is the str of each value, joined by sep, charged first.
func (r *run) strs(vals []starlark.Value, sep string) (string, error) {
	if err := r.charge(int64(len(vals)) * int64(len(sep))); err != nil {
		return "", err
	}
	for _, v := range vals {
		if _, err := r.chargeStr(v, false); err != nil {
			return "", err
		}
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = toStr(v)
	}
	return strings.Join(parts, sep), nil
}

// printFn is print(*args, sep=" "): a line the result carries (within the output limit).
func (r *run) printFn(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	sep := " "
	for _, kv := range kwargs {
		k, _ := starlark.AsString(kv[0])
		s, ok := starlark.AsString(kv[1])
		if k != "sep" || !ok {
			return nil, fmt.Errorf("print: unexpected keyword argument %s", kv[0])
		}
		sep = s
	}
	line, err := r.strs(args, sep)
	if err != nil {
		return nil, err
	}
	r.printedBytes += int64(len(line)) + 3
	if r.printedBytes > r.lim.Output {
		return nil, fmt.Errorf("print: the printed lines are larger than %s: print less", bytesText(r.lim.Output))
	}
	r.printed = append(r.printed, line)
	return starlark.None, nil
}

// fail is fail(*args, sep=" "): stops the script with the message.
func (r *run) fail(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	sep := " "
	for _, kv := range kwargs {
		if k, _ := starlark.AsString(kv[0]); k == "sep" {
			sep, _ = starlark.AsString(kv[1])
		}
	}
	msg, err := r.strs(args, sep)
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("fail: %s", clip(msg, maxMessage))
}

// keyed is an element and the key it sorts by.
type keyed struct{ k, v starlark.Value }

// keys returns iterable's elements with their keys (key applied, or the element), after
// checking they can be compared in bounded time.
func (r *run) keys(thread *starlark.Thread, name string, iterable, key starlark.Value) ([]keyed, error) {
	n := starlark.Len(iterable)
	it := starlark.Iterate(iterable)
	if it == nil {
		return nil, fmt.Errorf("%s: got %s, want an iterable", name, iterable.Type())
	}
	defer it.Done()
	if n < 0 {
		return nil, fmt.Errorf("%s: got %s, want a sized iterable", name, iterable.Type())
	}
	if err := r.charge(int64(n) * 2 * wordBytes); err != nil {
		return nil, err
	}
	out := make([]keyed, 0, n)
	var e starlark.Value
	cost := 0
	for it.Next(&e) {
		k := e
		if key != nil && key != starlark.None {
			var err error
			if k, err = starlark.Call(thread, key, starlark.Tuple{e}, nil); err != nil {
				return nil, err
			}
		}
		cost += r.compareCost(k, maxCompareNodes-cost)
		if cost > maxCompareNodes {
			return nil, fmt.Errorf("%s: the elements are too large to compare (more than %d, nested ones included)", name, maxCompareNodes)
		}
		out = append(out, keyed{k, e})
	}
	return out, nil
}

// sorted is sorted(iterable, key=None, reverse=False).
func (r *run) sorted(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var iterable starlark.Iterable
	var key starlark.Callable
	var reverse bool
	if err := starlark.UnpackArgs("sorted", args, kwargs, "iterable", &iterable, "key?", &key, "reverse?", &reverse); err != nil {
		return nil, err
	}
	var keyV starlark.Value
	if key != nil {
		keyV = key
	}
	ks, err := r.keys(thread, "sorted", iterable, keyV)
	if err != nil {
		return nil, err
	}
	var cmpErr error
	sort.SliceStable(ks, func(i, j int) bool {
		if cmpErr != nil {
			return false
		}
		a, c := ks[i].k, ks[j].k
		if reverse {
			a, c = c, a
		}
		lt, err := starlark.Compare(syntax.LT, a, c)
		if err != nil {
			cmpErr = err
		}
		return lt
	})
	if cmpErr != nil {
		return nil, fmt.Errorf("sorted: %v", cmpErr)
	}
	elems := make([]starlark.Value, len(ks))
	for i, p := range ks {
		elems[i] = p.v
	}
	return starlark.NewList(elems), nil
}

// minmax is min or max: min(iterable, key=None) or min(a, b, …, key=None).
func (r *run) minmax(better syntax.Token) builtinFn {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var key starlark.Value
		for _, kv := range kwargs {
			if k, _ := starlark.AsString(kv[0]); k != "key" {
				return nil, fmt.Errorf("%s: unexpected keyword argument %s", b.Name(), kv[0])
			}
			key = kv[1]
		}
		var iterable starlark.Value = args
		switch len(args) {
		case 0:
			return nil, fmt.Errorf("%s requires at least one positional argument", b.Name())
		case 1:
			iterable = args[0]
		}
		ks, err := r.keys(thread, b.Name(), iterable, key)
		if err != nil {
			return nil, err
		}
		if len(ks) == 0 {
			return nil, fmt.Errorf("%s: argument is an empty sequence", b.Name())
		}
		best := ks[0]
		for _, p := range ks[1:] {
			ok, err := starlark.Compare(better, p.k, best.k)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", b.Name(), err)
			}
			if ok {
				best = p
			}
		}
		return best.v, nil
	}
}

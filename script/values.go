package script

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"go.starlark.net/starlark"
)

// What a script's values cost, and the conversions between them and the host's Go values.
//
// Every operation that builds a string, list, tuple, dict, set or big integer is charged, in
// approximate bytes, to the run's memory meter before or as it builds it (charge); the meter
// refuses once the total passes Limits.Memory. The total counts what the script allocated, not
// what it still holds: a bound, not a measure. Allocations of a few bytes a step (appending to a
// list in a comprehension, a small integer) are not charged; the step limit bounds them.
//
// Two walks bound what the interpreter's own recursive algorithms do in one step: hashing a
// tuple and comparing two values. Every tuple is counted (its nodes: itself and, recursively, the
// tuples it holds) when it is built, and refused above maxTupleNodes, so hashing one is bounded;
// the counts of large tuples are remembered by identity, so counting a tuple of tuples is linear.
// Comparisons walk both operands first, within maxCompareNodes (compareCost).

const (
	maxTupleNodes   = 1 << 16 // nodes of one tuple (tuples nested in it included)
	maxCompareNodes = 1 << 20 // elements walked to compare two values or find one in a list
	maxIntBits      = 8192    // bits of an integer made by * or <<
	maxRange        = 10_000_000
	maxDepth        = 64 // nesting of a value converted to JSON
	memoNodes       = 32 // tuples with more nodes than this have their count remembered
	memoEntryBytes  = 64 // what a remembered count costs the meter
	wordBytes       = 16 // an element of a list or tuple (an interface value)
	entryBytes      = 64 // an entry of a dict or set
	headerBytes     = 32 // a string, list, tuple, dict or set header
)

// sizeOf is what building v anew costs the meter (its own storage, not its elements').
func sizeOf(v starlark.Value) int64 {
	switch v := v.(type) {
	case starlark.String:
		return int64(len(v)) + headerBytes
	case starlark.Bytes:
		return int64(len(v)) + headerBytes
	case *starlark.List:
		return int64(v.Len())*wordBytes + headerBytes
	case starlark.Tuple:
		return int64(len(v))*wordBytes + headerBytes
	case *starlark.Dict:
		return int64(v.Len())*entryBytes + headerBytes
	case *starlark.Set:
		return int64(v.Len())*entryBytes + headerBytes
	case starlark.Int:
		return int64(bitLen(v)/8) + headerBytes
	}
	return headerBytes
}

// charge adds n bytes to the meter.
func (r *run) charge(n int64) error {
	if n < 0 {
		n = math.MaxInt64 / 2
	}
	r.alloc += n
	if r.alloc > r.lim.Memory {
		return fmt.Errorf("memory limit: the script allocated more than %s; keep less (filter before collecting, slice, summarise)", bytesText(r.lim.Memory))
	}
	return nil
}

// room is what the meter has left.
func (r *run) room() int64 { return max(r.lim.Memory-r.alloc, 0) }

// tupleKey identifies a tuple: tuples that share storage (t and t[:2]) differ in length.
type tupleKey struct {
	first *starlark.Value
	n     int
}

// tupleNodes counts t's nodes: 1, plus the nodes of every tuple it holds (recursively), plus 1
// for every other element. It stops counting past maxTupleNodes.
func (r *run) tupleNodes(t starlark.Tuple) int {
	if len(t) == 0 {
		return 1
	}
	key := tupleKey{&t[0], len(t)}
	if n, ok := r.nodes[key]; ok {
		return n
	}
	n := 1
	for _, e := range t {
		if et, ok := e.(starlark.Tuple); ok {
			n += r.tupleNodes(et)
		} else {
			n++
		}
		if n > maxTupleNodes {
			break
		}
	}
	if n > memoNodes && r.charge(memoEntryBytes) == nil {
		r.nodes[key] = n
	}
	return n
}

// checkTuple refuses a tuple too large to hash in one step.
func (r *run) checkTuple(t starlark.Tuple) error {
	if r.tupleNodes(t) > maxTupleNodes {
		return fmt.Errorf("tuple too large: more than %d elements, counting those of the tuples inside it", maxTupleNodes)
	}
	return nil
}

// checkTuples checks a tuple, or the tuples a list holds (what zip, enumerate and dict.items
// return).
func (r *run) checkTuples(v starlark.Value) error {
	switch v := v.(type) {
	case starlark.Tuple:
		return r.checkTuple(v)
	case *starlark.List:
		for i := 0; i < v.Len(); i++ {
			if t, ok := v.Index(i).(starlark.Tuple); ok {
				if err := r.checkTuple(t); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// compareCost walks v's elements (recursively) until budget of them, and returns how many it
// walked: comparing v to anything costs at most that. It returns more than budget when v is
// larger (or holds itself).
func (r *run) compareCost(v starlark.Value, budget int) int {
	switch v := v.(type) {
	case starlark.Tuple:
		return r.tupleNodes(v) // its lists, dicts and sets are not counted: add them below
	case *starlark.List:
		n := 1
		for i := 0; i < v.Len() && n <= budget; i++ {
			n += r.compareCost(v.Index(i), budget-n)
		}
		return n
	case *starlark.Dict:
		n := 1
		for _, kv := range v.Items() {
			if n > budget {
				break
			}
			n += 1 + r.compareCost(kv[1], budget-n)
		}
		return n
	case *starlark.Set:
		return 1 + v.Len()
	}
	return 1
}

// checkCompare refuses to compare (or search) values too large or too deeply nested to compare
// in one step.
func (r *run) checkCompare(op string, x, y starlark.Value) error {
	if !isContainer(x) && !isContainer(y) {
		return nil
	}
	if r.compareCost(x, maxCompareNodes)+r.compareCost(y, maxCompareNodes) > maxCompareNodes {
		return fmt.Errorf("%s: the operands are too large to compare (more than %d elements, nested ones included)", op, maxCompareNodes)
	}
	return nil
}

func isContainer(v starlark.Value) bool {
	switch v.(type) {
	case starlark.Tuple, *starlark.List, *starlark.Dict, *starlark.Set:
		return true
	}
	return false
}

// maxPrintDepth bounds the nesting of a value str, repr, % and format write (the interpreter
// writes a value nested d deep in time d²).
const maxPrintDepth = 256

// strSize is an upper bound of the length of str(v) (repr(v) when quoted), computed without
// building it; it stops counting past limit. It returns -1 for a value nested deeper than
// maxPrintDepth.
func strSize(v starlark.Value, quoted bool, limit int64) int64 {
	var n int64
	deep := false
	var walk func(v starlark.Value, quoted bool, depth int)
	walk = func(v starlark.Value, quoted bool, depth int) {
		if n > limit || deep {
			return
		}
		if depth > maxPrintDepth {
			deep = true
			return
		}
		switch v := v.(type) {
		case starlark.String:
			if quoted {
				n += int64(len(v))*4 + 2 // an escape is at most 4 bytes (\x01)
			} else {
				n += int64(len(v))
			}
		case starlark.Bytes:
			n += int64(len(v))*4 + 3
		case starlark.Tuple:
			n += 2
			for _, e := range v {
				walk(e, true, depth+1)
				n += 2
			}
		case *starlark.List:
			n += 2
			for i := 0; i < v.Len() && n <= limit; i++ {
				walk(v.Index(i), true, depth+1)
				n += 2
			}
		case *starlark.Dict:
			n += 2
			for _, kv := range v.Items() {
				if n > limit {
					return
				}
				walk(kv[0], true, depth+1)
				walk(kv[1], true, depth+1)
				n += 4
			}
		case *starlark.Set:
			n += 5
			for e := range v.Elements() {
				if n > limit {
					return
				}
				walk(e, true, depth+1)
				n += 2
			}
		case starlark.Int:
			n += int64(bitLen(v)/3 + 2)
		default:
			n += 64 // None, bools, floats, functions: short
		}
	}
	walk(v, quoted, 0)
	if deep {
		return -1
	}
	return n
}

// errTooDeep is the refusal to write a value nested deeper than maxPrintDepth.
var errTooDeep = fmt.Errorf("the value is nested more than %d levels deep: too deep to write", maxPrintDepth)

// chargeStr charges writing v (str, or repr when quoted) and returns the bound.
func (r *run) chargeStr(v starlark.Value, quoted bool) (int64, error) {
	n := strSize(v, quoted, r.room())
	if n < 0 {
		return 0, errTooDeep
	}
	return n, r.charge(n + headerBytes)
}

// toValue converts a host result (nil, bool, ints, float64, string, []any, []string,
// map[string]any, Object) to a Starlark value, charging what it builds.
func (r *run) toValue(v any) (starlark.Value, error) {
	var out starlark.Value
	switch v := v.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(v), nil
	case int:
		return starlark.MakeInt(v), nil
	case int64:
		return starlark.MakeInt64(v), nil
	case float64:
		return starlark.Float(v), nil
	case string:
		out = starlark.String(v)
	case []string:
		elems := make([]starlark.Value, len(v))
		for i, s := range v {
			elems[i] = starlark.String(s)
			if err := r.charge(sizeOf(elems[i])); err != nil {
				return nil, err
			}
		}
		out = starlark.NewList(elems)
	case []any:
		elems := make([]starlark.Value, len(v))
		for i, x := range v {
			e, err := r.toValue(x)
			if err != nil {
				return nil, err
			}
			elems[i] = e
		}
		out = starlark.NewList(elems)
	case Object:
		d := starlark.NewDict(len(v))
		for _, m := range v {
			e, err := r.toValue(m.Value)
			if err != nil {
				return nil, err
			}
			if err := d.SetKey(starlark.String(m.Key), e); err != nil {
				return nil, err
			}
		}
		out = d
	case map[string]any:
		d := starlark.NewDict(len(v))
		for _, k := range sortedKeys(v) {
			e, err := r.toValue(v[k])
			if err != nil {
				return nil, err
			}
			if err := d.SetKey(starlark.String(k), e); err != nil {
				return nil, err
			}
		}
		out = d
	default:
		return nil, fmt.Errorf("host value of type %T", v) // a programming error of the host
	}
	if err := r.charge(sizeOf(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// Object is a JSON object whose members keep their order (a Starlark dict's order, or the order
// a host function chose).
type Object []Member

// Member is one member of an Object.
type Member struct {
	Key   string
	Value any
}

// MarshalJSON writes the members in order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.Key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// fromValue converts a script's value to JSON-like Go values: None → nil, bools, ints (int64, or
// a json.Number when larger), floats (non-finite ones as strings), strings, lists, tuples and
// sets → []any, dicts → Object (keys that are not strings are written with str). It counts the
// bytes the JSON will take into *size and fails past limit, or when v nests deeper than
// maxDepth (a list that holds itself does).
func fromValue(v starlark.Value, size *int64, limit int64) (any, error) {
	var conv func(v starlark.Value, depth int) (any, error)
	over := func() error {
		return fmt.Errorf("the result is larger than %s: return less (filter, slice, or summarise)", bytesText(limit))
	}
	add := func(n int64) error {
		*size += n
		if *size > limit {
			return over()
		}
		return nil
	}
	conv = func(v starlark.Value, depth int) (any, error) {
		if depth > maxDepth {
			return nil, fmt.Errorf("the result nests deeper than %d levels (does a list hold itself?)", maxDepth)
		}
		switch v := v.(type) {
		case starlark.NoneType:
			return nil, add(4)
		case starlark.Bool:
			return bool(v), add(5)
		case starlark.Int:
			if i, ok := v.Int64(); ok {
				return i, add(8)
			}
			if bitLen(v) > maxIntBits {
				return nil, fmt.Errorf("an integer in the result is too large")
			}
			s := v.String()
			return json.Number(s), add(int64(len(s)))
		case starlark.Float:
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return v.String(), add(8)
			}
			return f, add(8)
		case starlark.String:
			return string(v), add(int64(len(v)) + 2)
		case starlark.Bytes:
			return string(v), add(int64(len(v)) + 2)
		case starlark.Tuple:
			return convList(conv, add, depth, len(v), func(i int) starlark.Value { return v[i] })
		case *starlark.List:
			return convList(conv, add, depth, v.Len(), v.Index)
		case *starlark.Set:
			items := slices.Collect(v.Elements())
			return convList(conv, add, depth, len(items), func(i int) starlark.Value { return items[i] })
		case *starlark.Dict:
			out := make(Object, 0, v.Len())
			if err := add(2); err != nil {
				return nil, err
			}
			for _, kv := range v.Items() {
				k, ok := starlark.AsString(kv[0])
				if !ok {
					if n := strSize(kv[0], false, limit); n < 0 || n > limit {
						return nil, over()
					}
					k = kv[0].String()
				}
				if err := add(int64(len(k)) + 4); err != nil {
					return nil, err
				}
				e, err := conv(kv[1], depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, Member{k, e})
			}
			return out, nil
		}
		return nil, fmt.Errorf("cannot return a %s: return strings, numbers, lists and dicts", v.Type())
	}
	return conv(v, 0)
}

func convList(conv func(starlark.Value, int) (any, error), add func(int64) error, depth, n int, at func(int) starlark.Value) (any, error) {
	if err := add(2 + int64(n)); err != nil {
		return nil, err
	}
	out := make([]any, n)
	for i := range out {
		e, err := conv(at(i), depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// bitLen is the bit length of an integer's magnitude.
func bitLen(v starlark.Int) int {
	if i, ok := v.Int64(); ok {
		if i < 0 {
			i = -i
		}
		return bits.Len64(uint64(i))
	}
	return v.BigInt().BitLen()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// bytesText writes a byte count for a message: "64 MiB", "20 kB".
func bytesText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1000:
		return fmt.Sprintf("%d kB", n/1000)
	}
	return fmt.Sprintf("%d bytes", n)
}

package ydoc

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	y "github.com/skyterra/y-crdt"
)

// Values crossing the y-crdt boundary. The library's own setters refuse floats and JSON null
// (and drop the error), and its getters return float32, NullType and internal maps that alias
// the CRDT. Everything written goes through toAny + setMapAny; everything read goes through
// fromAny, which deep-copies.

// toAny converts a JSON-like Go value into a y-crdt "any" value.
func toAny(v any) (any, error) {
	switch t := v.(type) {
	case nil:
		return y.NullType{}, nil
	case y.NullType:
		return t, nil
	case bool, string:
		return t, nil
	case []byte:
		return t, nil
	case int:
		return normInt(int64(t)), nil
	case int8:
		return normInt(int64(t)), nil
	case int16:
		return normInt(int64(t)), nil
	case int32:
		return normInt(int64(t)), nil
	case int64:
		return normInt(t), nil
	case uint:
		return normUint(uint64(t)), nil
	case uint8:
		return normUint(uint64(t)), nil
	case uint16:
		return normUint(uint64(t)), nil
	case uint32:
		return normUint(uint64(t)), nil
	case uint64:
		return normUint(t), nil
	case float32:
		return normFloat(float64(t)), nil
	case float64:
		return normFloat(t), nil
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return normInt(i), nil
		}
		f, err := t.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %q: %w", t.String(), err)
		}
		return normFloat(f), nil
	case map[string]any:
		o := make(y.Object, len(t))
		for k, x := range t {
			c, err := toAny(x)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			o[k] = c
		}
		return o, nil
	case map[string]string:
		o := make(y.Object, len(t))
		for k, x := range t {
			o[k] = x
		}
		return o, nil
	case []any:
		a := make(y.ArrayAny, len(t))
		for i, x := range t {
			c, err := toAny(x)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			a[i] = c
		}
		return a, nil
	case []string:
		a := make(y.ArrayAny, len(t))
		for i, x := range t {
			a[i] = x
		}
		return a, nil
	}
	return nil, fmt.Errorf("unsupported value type %T", v)
}

// Integers as yjs writes them: small ones as varints, the rest as float64 (JS numbers).
func normInt(i int64) any {
	if i >= math.MinInt32 && i <= math.MaxInt32 {
		return int(i)
	}
	return float64(i)
}

func normUint(u uint64) any {
	if u <= math.MaxInt32 {
		return int(u)
	}
	return float64(u)
}

func normFloat(f float64) any {
	if f == math.Trunc(f) && f >= math.MinInt32 && f <= math.MaxInt32 && !(f == 0 && math.Signbit(f)) {
		return int(f)
	}
	return f
}

// setMapAny sets key on a map type to a plain value, building the item itself as
// y-crdt's TypeMapSet does, but accepting every value yjs accepts.
func setMapAny(tr *y.Transaction, parent y.IAbstractType, key string, value any) error {
	v, err := toAny(value)
	if err != nil {
		return fmt.Errorf("set %q: %w", key, err)
	}
	left := parent.GetMap()[key]
	doc := tr.Doc
	item := y.NewItem(y.GenID(doc.ClientID, y.GetState(doc.Store, doc.ClientID)), left, y.GetItemLastID(left),
		nil, nil, parent, key, y.NewContentAny(y.ArrayAny{v}))
	item.Integrate(tr, 0)
	return nil
}

// fromAny converts a value read from y-crdt into plain Go JSON values (deep copy).
func fromAny(v any) any {
	switch t := v.(type) {
	case nil, y.NullType, y.UndefinedType:
		return nil
	case float32:
		return float64(t)
	case int64:
		return t
	case y.Object:
		o := make(map[string]any, len(t))
		for k, x := range t {
			if _, undef := x.(y.UndefinedType); undef {
				continue
			}
			o[k] = fromAny(x)
		}
		return o
	case y.ArrayAny:
		a := make([]any, len(t))
		for i, x := range t {
			a[i] = fromAny(x)
		}
		return a
	case []byte:
		return append([]byte(nil), t...)
	case *y.YText:
		return textString(t)
	case *y.YMap:
		return mapValues(t)
	case *y.YArray:
		return arrayValues(t)
	}
	return v
}

// mapValues reads a Y.Map into a plain map, sorted iteration not needed (maps are unordered).
func mapValues(m *y.YMap) map[string]any {
	out := make(map[string]any)
	for key, item := range m.GetMap() {
		if item.Deleted() {
			continue
		}
		content := item.Content.GetContent()
		if len(content) == 0 {
			continue
		}
		val := content[len(content)-1]
		if _, undef := val.(y.UndefinedType); undef {
			continue
		}
		out[key] = fromAny(val)
	}
	return out
}

// mapGet reads one key of a Y.Map without converting nested shared types.
func mapGet(m *y.YMap, key string) (any, bool) {
	item, ok := m.GetMap()[key]
	if !ok || item.Deleted() {
		return nil, false
	}
	content := item.Content.GetContent()
	if len(content) == 0 {
		return nil, false
	}
	return content[len(content)-1], true
}

func mapKeys(m *y.YMap) []string {
	var keys []string
	for key, item := range m.GetMap() {
		if !item.Deleted() {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}

func arrayValues(a *y.YArray) []any {
	var out []any
	for n := a.StartItem(); n != nil; n = n.Right {
		if n.Deleted() || !n.Countable() {
			continue
		}
		for _, v := range n.Content.GetContent() {
			out = append(out, fromAny(v))
		}
	}
	return out
}

// arrayItems returns the live elements of a Y.Array without converting them.
func arrayItems(a *y.YArray) []any {
	var out []any
	for n := a.StartItem(); n != nil; n = n.Right {
		if n.Deleted() || !n.Countable() {
			continue
		}
		out = append(out, n.Content.GetContent()...)
	}
	return out
}

// textString is a linear replacement for YText.ToString, which is quadratic.
func textString(t *y.YText) string {
	var b strings.Builder
	for n := t.StartItem(); n != nil; n = n.Right {
		if n.Deleted() || !n.Countable() {
			continue
		}
		if s, ok := n.Content.(*y.ContentString); ok {
			b.WriteString(s.Str)
		}
	}
	return b.String()
}

// asInt reads a JSON number that should be an integer (execution_count, nbformat).
func asInt(v any) (int, bool) {
	switch t := v.(type) {
	case int:
		return t, true
	case int64:
		return int(t), true
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int(t), true
		}
	case float32:
		f := float64(t)
		if f == math.Trunc(f) {
			return int(f), true
		}
	}
	return 0, false
}

package script

import (
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The checked operations the rewrite (rewrite.go) calls in place of the interpreter's own: each
// bounds what it is about to build or walk, charges the meter, and then does what the
// interpreter would have done, with the same results and errors.

type builtinFn = func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)

// ops returns the checked operations, by the names the rewrite gives them.
func (r *run) ops() starlark.StringDict {
	d := starlark.StringDict{
		opAttr:  starlark.NewBuiltin("getattr", r.attr),
		opSlice: starlark.NewBuiltin("slice", r.slice),
		opTuple: starlark.NewBuiltin("tuple", r.tupleLiteral),
	}
	for tok, name := range binaryOps {
		d[name] = starlark.NewBuiltin(tok.String(), r.binary(tok))
	}
	d[augmentedOps[syntax.PLUS_EQ]] = starlark.NewBuiltin("+=", r.inplaceAdd)
	d[augmentedOps[syntax.PIPE_EQ]] = starlark.NewBuiltin("|=", r.inplacePipe)
	return d
}

func pair(b *starlark.Builtin, args starlark.Tuple) (starlark.Value, starlark.Value, error) {
	if len(args) != 2 {
		return nil, nil, fmt.Errorf("%s: internal: want 2 operands, got %d", b.Name(), len(args))
	}
	return args[0], args[1], nil
}

// binary is the checked binary operator tok.
func (r *run) binary(tok syntax.Token) builtinFn {
	return func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		x, y, err := pair(b, args)
		if err != nil {
			return nil, err
		}
		switch tok {
		case syntax.EQL, syntax.NEQ, syntax.LT, syntax.LE, syntax.GT, syntax.GE:
			if err := r.checkCompare(tok.String(), x, y); err != nil {
				return nil, err
			}
			ok, err := starlark.Compare(tok, x, y)
			if err != nil {
				return nil, err
			}
			return starlark.Bool(ok), nil
		case syntax.IN, syntax.NOT_IN:
			switch y.(type) {
			case *starlark.List, starlark.Tuple:
				if err := r.checkCompare(tok.String(), x, y); err != nil {
					return nil, err
				}
			}
			return starlark.Binary(tok, x, y)
		}
		if err := r.preBinary(tok, x, y); err != nil {
			return nil, err
		}
		z, err := starlark.Binary(tok, x, y)
		if err != nil {
			return nil, err
		}
		if t, ok := z.(starlark.Tuple); ok {
			if err := r.checkTuple(t); err != nil {
				return nil, err
			}
		}
		return z, nil
	}
}

// preBinary bounds and charges what x tok y builds.
func (r *run) preBinary(tok syntax.Token, x, y starlark.Value) error {
	switch tok {
	case syntax.PLUS:
		switch x.(type) {
		case starlark.String, starlark.Bytes, *starlark.List, starlark.Tuple:
			if lx, ly := length(x), length(y); lx >= 0 && ly >= 0 {
				return r.charge(sizeOfLen(x, lx+ly))
			}
		}
	case syntax.STAR:
		xi, xInt := x.(starlark.Int)
		yi, yInt := y.(starlark.Int)
		switch {
		case xInt && yInt:
			if bitLen(xi)+bitLen(yi) > maxIntBits {
				return fmt.Errorf("integer too large: the product would have more than %d bits", maxIntBits)
			}
		case yInt:
			return r.preRepeat(x, yi)
		case xInt:
			return r.preRepeat(y, xi)
		}
	case syntax.LTLT:
		if xi, ok := x.(starlark.Int); ok {
			if n, err := starlark.AsInt32(y); err == nil && bitLen(xi)+n > maxIntBits {
				return fmt.Errorf("integer too large: the shift would make more than %d bits", maxIntBits)
			}
		}
	case syntax.PERCENT:
		if s, ok := x.(starlark.String); ok {
			return r.preFormat(string(s), strings.Count(string(s), "%"), formatArgs(y))
		}
	case syntax.PIPE:
		if lx, ly := length(x), length(y); lx >= 0 && ly >= 0 {
			return r.charge(int64(lx+ly)*entryBytes + headerBytes)
		}
	}
	return nil
}

// preRepeat bounds and charges seq * n.
func (r *run) preRepeat(seq starlark.Value, n starlark.Int) error {
	l := length(seq)
	if l < 0 {
		return nil // not a sequence: the interpreter refuses it
	}
	k, ok := n.Int64()
	if !ok || k < 0 {
		k = 0
		if !ok {
			return fmt.Errorf("repeat count %s too large", n)
		}
	}
	if t, ok := seq.(starlark.Tuple); ok && int64(r.tupleNodes(t))*k > maxTupleNodes {
		return fmt.Errorf("tuple too large: more than %d elements, counting those of the tuples inside it", maxTupleNodes)
	}
	if l > 0 && k > r.lim.Memory/int64(l) {
		return r.charge(-1) // past any limit
	}
	return r.charge(sizeOfLen(seq, int(int64(l)*k)))
}

// preFormat bounds and charges a formatting of fields fields with args (% and str.format).
func (r *run) preFormat(format string, fields int, args []starlark.Value) error {
	var widest int64
	limit := r.room()
	for _, a := range args {
		n := strSize(a, true, limit)
		if n < 0 {
			return errTooDeep
		}
		widest = max(widest, n)
	}
	return r.charge(int64(len(format)) + int64(fields)*widest + headerBytes)
}

// formatArgs are the values a % formatting may insert.
func formatArgs(y starlark.Value) []starlark.Value {
	switch y := y.(type) {
	case starlark.Tuple:
		return y
	case *starlark.Dict:
		var vs []starlark.Value
		for _, kv := range y.Items() {
			vs = append(vs, kv[1])
		}
		return vs
	}
	return []starlark.Value{y}
}

// length is the length of a string, bytes, list, tuple, dict, set or range, or -1.
func length(v starlark.Value) int {
	switch v := v.(type) {
	case starlark.String:
		return len(v)
	case starlark.Bytes:
		return len(v)
	}
	return starlark.Len(v)
}

// sizeOfLen is what building a value like v with n elements (bytes, for strings) costs.
func sizeOfLen(v starlark.Value, n int) int64 {
	switch v.(type) {
	case starlark.String, starlark.Bytes:
		return int64(n) + headerBytes
	case *starlark.Dict, *starlark.Set:
		return int64(n)*entryBytes + headerBytes
	}
	return int64(n)*wordBytes + headerBytes
}

// inplaceAdd is x += y: a list is extended in place, anything else is x + y.
func (r *run) inplaceAdd(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	x, y, err := pair(b, args)
	if err != nil {
		return nil, err
	}
	list, ok := x.(*starlark.List)
	if !ok {
		return r.binary(syntax.PLUS)(thread, b, args, kwargs)
	}
	if _, ok := y.(starlark.Iterable); !ok {
		return r.binary(syntax.PLUS)(thread, b, args, kwargs)
	}
	if err := r.extend(list, y); err != nil {
		return nil, err
	}
	return list, nil
}

// extend appends y's elements to list, charging them first.
func (r *run) extend(list *starlark.List, y starlark.Value) error {
	n := starlark.Len(y)
	it := starlark.Iterate(y)
	if n < 0 || it == nil {
		if it != nil {
			it.Done()
		}
		return fmt.Errorf("cannot extend a list with a %s", y.Type())
	}
	if err := r.charge(int64(n) * wordBytes); err != nil {
		it.Done()
		return err
	}
	elems := make([]starlark.Value, 0, n) // a copy, taken before appending: y may be list itself
	var e starlark.Value
	for it.Next(&e) {
		elems = append(elems, e)
	}
	it.Done()
	for _, e := range elems {
		if err := list.Append(e); err != nil {
			return err
		}
	}
	return nil
}

// inplacePipe is x |= y: a dict is updated in place, anything else is x | y.
func (r *run) inplacePipe(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	x, y, err := pair(b, args)
	if err != nil {
		return nil, err
	}
	xd, ok1 := x.(*starlark.Dict)
	yd, ok2 := y.(*starlark.Dict)
	if !ok1 || !ok2 {
		return r.binary(syntax.PIPE)(thread, b, args, kwargs)
	}
	if err := r.charge(int64(yd.Len()) * entryBytes); err != nil {
		return nil, err
	}
	for _, kv := range yd.Items() {
		if err := xd.SetKey(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	return xd, nil
}

// tupleLiteral is (a, b, …).
func (r *run) tupleLiteral(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	t := make(starlark.Tuple, len(args))
	copy(t, args)
	if err := r.charge(sizeOf(t)); err != nil {
		return nil, err
	}
	if err := r.checkTuple(t); err != nil {
		return nil, err
	}
	return t, nil
}

// slice is x[lo:hi:step], done by a one-line Starlark function (sliceSource) so that its
// meaning is the interpreter's own, then charged.
func (r *run) slice(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 4 {
		return nil, fmt.Errorf("slice: internal: want 4 operands, got %d", len(args))
	}
	if n := length(args[0]); n >= 0 {
		if err := r.charge(sizeOfLen(args[0], n)); err != nil {
			return nil, err
		}
	}
	return starlark.Call(thread, r.sliceFn, args, nil)
}

// sliceSource is the function slice calls; it is compiled without the rewrite.
const sliceSource = "def slice(x, lo, hi, step):\n    return x[lo:hi:step]\n"

// attr is x.name: a method of a string, bytes, list, dict or set, wrapped so that its call is
// checked (methods.go).
func (r *run) attr(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	v, err := starlark.Call(thread, r.getattr, args, kwargs)
	if err != nil {
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			return nil, errors.New(strings.TrimPrefix(ee.Msg, "getattr: "))
		}
		return nil, err
	}
	m, ok := v.(*starlark.Builtin)
	if !ok || m.Receiver() == nil {
		return v, nil
	}
	return r.method(m), nil
}

// Package script runs an agent's short script in a sandbox: a Starlark program (Python-like,
// hermetic, made for embedding: go.starlark.net) that calls the host's functions, loops and
// filters, and returns only what it keeps.
//
// The sandbox owns the language and its bounds; it knows nothing of notebooks. The host (the
// tools package) gives Run the functions a script may call (Func) and the limits (Limits), and
// gets back the value of the script's last expression and the lines it printed, as JSON-like Go
// values, or an *Error that names the script's line and column.
//
// What a script cannot do: no I/O, no clock, no randomness, no modules (load), no while loops,
// no recursion, no *args. What bounds it:
//   - time: Limits.Steps interpreter steps, and the context (its deadline cancels the run);
//   - work per step: no single instruction does unbounded work — the rewrite (rewrite.go) sends
//     every operation that could through a checked builtin (ops.go, methods.go, builtins.go);
//   - memory: what the script builds is charged to a meter and refused past Limits.Memory
//     (values.go);
//   - calls: at most Limits.Calls calls of the host's functions;
//   - output: the result and the printed lines within Limits.Output bytes as JSON;
//   - the source: at most Limits.Source bytes.
//
// A panic inside the interpreter or a builtin is recovered into an *Error.
package script

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Limits bound one run.
type Limits struct {
	Steps  uint64 // interpreter steps
	Calls  int    // calls of the host's functions
	Memory int64  // bytes the script may allocate (approximately: values.go)
	Output int64  // bytes of the result, and of the printed lines, as JSON
	Source int    // bytes of the script
}

// DefaultLimits are the limits of a script call.
var DefaultLimits = Limits{Steps: 1_000_000, Calls: 1000, Memory: 64 << 20, Output: 1 << 20, Source: 20_000}

// Kind is the type of a Func's parameter.
type Kind int

// The parameter kinds.
const (
	String Kind = iota
	Bool
	Int
)

func (k Kind) String() string {
	switch k {
	case Bool:
		return "bool"
	case Int:
		return "int"
	}
	return "string"
}

// Param is a parameter of a Func.
type Param struct {
	Name    string
	Kind    Kind
	Default any // nil: required; otherwise the value when the call leaves it out (a string, bool or int)
}

// Func is a host function a script may call. Call gets the arguments by parameter name (each
// present, the defaults filled in) and returns a JSON-like value: nil, bool, int, int64,
// float64, string, []string, []any, map[string]any or Object. Its error stops the script, with
// the position of the call.
type Func struct {
	Name   string
	Params []Param
	Call   func(ctx context.Context, args map[string]any) (any, error)
}

// Result is what a script returned.
type Result struct {
	Value   any      // the value of the last statement when it is an expression (nil when none)
	Printed []string // the lines print wrote
	Steps   uint64
	Calls   int
}

// Error is a script that could not run or failed: at Line and Col of the script (both 0 when
// the failure has no place in it, as a limit reached between statements).
type Error struct {
	Line, Col int
	Msg       string
	Code      string // the script's line at Line, for the caret
	// Stack is the Go stack of a panic the sandbox recovered, for the host's log (not for the
	// model).
	Stack string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	var b strings.Builder
	fmt.Fprintf(&b, "line %d, column %d: %s", e.Line, e.Col, e.Msg)
	if e.Code != "" && len(e.Code) <= 200 {
		fmt.Fprintf(&b, "\n  %s\n  %s^", e.Code, caretPad(e.Code, e.Col))
	}
	return b.String()
}

// caretPad is what goes before the caret under line to point at column col (1-based, in
// runes): a space for every character, a tab for a tab.
func caretPad(line string, col int) string {
	var b strings.Builder
	for i, c := range []rune(line) {
		if i >= col-1 {
			break
		}
		if c == '\t' {
			b.WriteRune('\t')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// maxMessage bounds an error message (a value in it may be long).
const maxMessage = 2000

// filename names the script in positions.
const filename = "script"

// run is one script's execution: its limits, what it spent, what it printed.
type run struct {
	ctx          context.Context
	lim          Limits
	alloc        int64
	calls        int
	printed      []string
	printedBytes int64
	nodes        map[tupleKey]int // node counts of large tuples (values.go)
	getattr      starlark.Value   // the universe's getattr
	sliceFn      starlark.Value   // slice's helper (ops.go)
}

// fileOptions are the dialect: Python's control flow at the top level and reassignable globals
// (as in a notebook cell), sets; no while, no recursion.
var fileOptions = &syntax.FileOptions{Set: true, TopLevelControl: true, GlobalReassign: true}

// Run runs src with the host's functions within lim.
func Run(ctx context.Context, src string, funcs []Func, lim Limits) (res Result, err error) {
	if len(src) > lim.Source {
		return Result{}, &Error{Msg: fmt.Sprintf("the script is %d bytes, over the limit of %d", len(src), lim.Source)}
	}
	r := &run{ctx: ctx, lim: lim, nodes: map[tupleKey]int{}, getattr: starlark.Universe["getattr"]}
	lines := strings.Split(src, "\n")
	thread := &starlark.Thread{Name: filename, Print: func(*starlark.Thread, string) {}}
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Msg: fmt.Sprintf("internal error in the script sandbox: %v", p), Stack: string(debug.Stack())}
		}
	}()

	f, err := fileOptions.Parse(filename, src, 0)
	if err != nil {
		return Result{}, r.positioned(err, lines)
	}
	if err := rewrite(f); err != nil {
		return Result{}, r.positioned(err, lines)
	}
	predeclared := r.builtins()
	for name, v := range r.ops() {
		predeclared[name] = v
	}
	for _, fn := range funcs {
		if _, taken := predeclared[fn.Name]; taken {
			return Result{}, fmt.Errorf("script: host function %s shadows a builtin", fn.Name) // a programming error
		}
		predeclared[fn.Name] = r.hostFunc(fn)
	}
	universe := func(name string) bool { _, ok := predeclared[name]; return ok || starlark.Universe.Has(name) }
	prog, err := starlark.FileProgram(f, universe)
	if err != nil {
		return Result{}, r.positioned(err, lines)
	}
	if r.sliceFn, err = helper(thread, "slice", sliceSource); err != nil {
		return Result{}, err
	}

	thread.SetMaxExecutionSteps(lim.Steps)
	stop := context.AfterFunc(ctx, func() {
		reason := "deadline"
		if errors.Is(ctx.Err(), context.Canceled) {
			reason = "cancelled by the caller"
		}
		thread.Cancel(reason)
	})
	defer stop()
	globals, err := prog.Init(thread, predeclared)
	res = Result{Printed: r.printed, Steps: thread.ExecutionSteps(), Calls: r.calls}
	if err != nil {
		return res, r.positioned(err, lines)
	}
	if v, ok := globals[opResult]; ok {
		size := r.printedBytes
		out, err := fromValue(v, &size, lim.Output)
		if err != nil {
			return res, &Error{Msg: err.Error()}
		}
		res.Value = out
	}
	return res, nil
}

// helper compiles one of the sandbox's own Starlark functions (not rewritten).
func helper(thread *starlark.Thread, name, src string) (starlark.Value, error) {
	g, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "<"+name+">", src, nil)
	if err != nil {
		return nil, fmt.Errorf("script: helper %s: %v", name, err) // a programming error
	}
	return g[name], nil
}

// hostFunc makes a Func callable from the script: arguments checked and converted, calls
// counted, the result converted and charged.
func (r *run) hostFunc(fn Func) *starlark.Builtin {
	return starlark.NewBuiltin(fn.Name, func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		got, err := unpack(fn, args, kwargs)
		if err != nil {
			return nil, err
		}
		r.calls++
		if r.calls > r.lim.Calls {
			return nil, fmt.Errorf("%s: the script called functions more than %d times (the call limit)", fn.Name, r.lim.Calls)
		}
		if err := r.ctx.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", fn.Name, err)
		}
		v, err := fn.Call(r.ctx, got)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", fn.Name, clip(err.Error(), maxMessage))
		}
		return r.toValue(v)
	})
}

// unpack checks a call's arguments against fn's parameters.
func unpack(fn Func, args starlark.Tuple, kwargs []starlark.Tuple) (map[string]any, error) {
	if len(args) > len(fn.Params) {
		return nil, fmt.Errorf("%s: got %d arguments, want at most %d (%s)", fn.Name, len(args), len(fn.Params), signature(fn))
	}
	given := map[string]starlark.Value{}
	for i, a := range args {
		given[fn.Params[i].Name] = a
	}
	for _, kv := range kwargs {
		k, _ := starlark.AsString(kv[0])
		if !hasParam(fn, k) {
			return nil, fmt.Errorf("%s: unexpected keyword argument %s (%s)", fn.Name, k, signature(fn))
		}
		if _, dup := given[k]; dup {
			return nil, fmt.Errorf("%s: got multiple values for %s", fn.Name, k)
		}
		given[k] = kv[1]
	}
	out := make(map[string]any, len(fn.Params))
	for _, p := range fn.Params {
		v, ok := given[p.Name]
		if !ok || v == starlark.None && p.Default != nil {
			if p.Default == nil {
				return nil, fmt.Errorf("%s: missing argument %s (%s)", fn.Name, p.Name, signature(fn))
			}
			out[p.Name] = p.Default
			continue
		}
		var conv any
		switch p.Kind {
		case String:
			if s, ok := starlark.AsString(v); ok {
				conv = s
			}
		case Bool:
			if b, ok := v.(starlark.Bool); ok {
				conv = bool(b)
			}
		case Int:
			if i, err := starlark.AsInt32(v); err == nil {
				conv = i
			}
		}
		if conv == nil {
			return nil, fmt.Errorf("%s: %s: got %s, want %s", fn.Name, p.Name, v.Type(), p.Kind)
		}
		out[p.Name] = conv
	}
	return out, nil
}

func hasParam(fn Func, name string) bool {
	for _, p := range fn.Params {
		if p.Name == name {
			return true
		}
	}
	return false
}

// signature writes fn's parameters as a script calls them: cells(path), search(pattern, regex=False).
func signature(fn Func) string {
	parts := make([]string, len(fn.Params))
	for i, p := range fn.Params {
		parts[i] = p.Name
		if p.Default != nil {
			parts[i] += "=" + starlarkLiteral(p.Default)
		}
	}
	return fn.Name + "(" + strings.Join(parts, ", ") + ")"
}

func starlarkLiteral(v any) string {
	switch v := v.(type) {
	case bool:
		if v {
			return "True"
		}
		return "False"
	case string:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprint(v)
}

// positioned turns an error of the parser, the resolver or the interpreter into an *Error at
// the script's line and column.
func (r *run) positioned(err error, lines []string) *Error {
	var pos syntax.Position
	msg := err.Error()
	var se syntax.Error
	var rl resolve.ErrorList
	var ee *starlark.EvalError
	var re *rewriteError
	switch {
	case errors.As(err, &se):
		pos, msg = se.Pos, se.Msg
	case errors.As(err, &rl) && len(rl) > 0:
		pos, msg = rl[0].Pos, rl[0].Msg
	case errors.As(err, &re):
		pos, msg = re.pos, re.msg
	case errors.As(err, &ee):
		msg = ee.Msg
		for i := len(ee.CallStack) - 1; i >= 0; i-- {
			if fr := ee.CallStack[i]; fr.Pos.Filename() == filename {
				pos = fr.Pos
				break
			}
		}
		msg = r.limitMessage(msg)
	}
	e := &Error{Msg: clip(hint(msg, pos, lines), maxMessage)}
	if pos.IsValid() && pos.Filename() == filename {
		e.Line, e.Col = int(pos.Line), int(pos.Col)
		if e.Line >= 1 && e.Line <= len(lines) {
			e.Code = lines[e.Line-1]
		}
	}
	return e
}

// limitMessage rephrases the interpreter's cancellations.
func (r *run) limitMessage(msg string) string {
	switch {
	case strings.Contains(msg, "cancelled: too many steps"):
		return fmt.Sprintf("the script ran more than %d steps (the step limit): do less per call, or narrow what it reads", r.lim.Steps)
	case strings.Contains(msg, "cancelled: deadline"):
		return "the script ran out of time (the call's timeout)"
	case strings.Contains(msg, "cancelled: cancelled by the caller"):
		return "the call was cancelled"
	}
	return msg
}

// pythonOnly matches the parser's complaint about a Python statement Starlark lacks.
var pythonOnly = regexp.MustCompile(`got (import|class|try|except|finally|with|raise|global|nonlocal|yield|del|assert|from|async|await)\b|is reserved`)

// hint adds advice for what Python allows and Starlark does not.
func hint(msg string, pos syntax.Position, lines []string) string {
	line := ""
	if pos.IsValid() && int(pos.Line) >= 1 && int(pos.Line) <= len(lines) {
		line = lines[pos.Line-1]
	}
	switch {
	case strings.Contains(msg, "got for, want"):
		return msg + " (Starlark has no generator expressions: write any([x for x in xs]))"
	case strings.Contains(msg, "got string literal") && (strings.Contains(line, `f"`) || strings.Contains(line, `f'`)):
		return msg + ` (Starlark has no f-strings: write "%s: %d" % (a, b) or "{}: {}".format(a, b))`
	case strings.Contains(msg, "got '**'"):
		return msg + " (Starlark has no ** operator)"
	case strings.Contains(msg, "while loops"):
		return msg + " (use for over range(n))"
	case pythonOnly.MatchString(msg):
		return msg + " (Starlark has no import, class, try, with, global or yield; the functions a script may call are predeclared)"
	case strings.Contains(msg, "undefined: isinstance"):
		return msg + ` (write type(x) == "list")`
	}
	return msg
}

// clip cuts a message to n bytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… [%d more bytes]", len(s)-n)
}

package script

import (
	"fmt"

	"go.starlark.net/syntax"
)

// The rewrite. Before a script is resolved and compiled, its syntax tree is changed so that every
// operation that can allocate or compute more than a little in one interpreter step goes through
// a builtin of ours that checks it first (ops.go): the binary operators that build strings,
// lists, tuples, dicts and big integers (+ * % | <<), the comparisons and membership tests that walk
// nested values (== != < <= > >= in, not in), slices, tuple literals, and every attribute (a
// method of a string, list, dict or set). The interpreter counts steps and observes cancellation
// only between instructions; with the rewrite, no one instruction does unbounded work.
//
// The names the rewrite calls are not identifiers (they hold "·"), so a script can neither name
// nor shadow them. Every new call takes the position of the operator it replaces, so an error
// points at the script's own line and column.

// Names of the checked operations (ops.go).
const (
	opPrefix = "·"
	opAttr   = opPrefix + "attr"
	opSlice  = opPrefix + "slice"
	opTuple  = opPrefix + "tuple"
	opResult = opPrefix + "result" // the global that holds the value of the last expression
)

// binaryOps are the binary operators the rewrite replaces, by the name of their checked builtin.
var binaryOps = map[syntax.Token]string{
	syntax.PLUS:    opPrefix + "+",
	syntax.STAR:    opPrefix + "*",
	syntax.PERCENT: opPrefix + "%",
	syntax.PIPE:    opPrefix + "|",
	syntax.LTLT:    opPrefix + "<<",
	syntax.EQL:     opPrefix + "==",
	syntax.NEQ:     opPrefix + "!=",
	syntax.LT:      opPrefix + "<",
	syntax.LE:      opPrefix + "<=",
	syntax.GT:      opPrefix + ">",
	syntax.GE:      opPrefix + ">=",
	syntax.IN:      opPrefix + "in",
	syntax.NOT_IN:  opPrefix + "not in",
}

// augmentedOps are the augmented assignments the rewrite replaces: x += y becomes
// x = ·+=(x, y) (which extends a list in place, as += does).
var augmentedOps = map[syntax.Token]string{
	syntax.PLUS_EQ:    opPrefix + "+=",
	syntax.STAR_EQ:    opPrefix + "*",
	syntax.PERCENT_EQ: opPrefix + "%",
	syntax.PIPE_EQ:    opPrefix + "|=",
	syntax.LTLT_EQ:    opPrefix + "<<",
}

// rewriteError is a construct the sandbox refuses, at its position.
type rewriteError struct {
	pos syntax.Position
	msg string
}

func (e *rewriteError) Error() string { return e.msg }

// rewriter rewrites one file. It panics with *rewriteError on a refused construct; rewrite
// recovers it.
type rewriter struct{}

// rewrite changes f in place; the last statement, when it is an expression, becomes an
// assignment to opResult.
func rewrite(f *syntax.File) (err error) {
	defer func() {
		if r := recover(); r != nil {
			re, ok := r.(*rewriteError)
			if !ok {
				panic(r)
			}
			err = re
		}
	}()
	var rw rewriter
	rw.stmts(f.Stmts)
	if n := len(f.Stmts); n > 0 {
		if es, ok := f.Stmts[n-1].(*syntax.ExprStmt); ok {
			start, _ := es.X.Span()
			f.Stmts[n-1] = &syntax.AssignStmt{OpPos: start, Op: syntax.EQ, LHS: ident(opResult, start), RHS: es.X}
		}
	}
	return nil
}

func ident(name string, pos syntax.Position) *syntax.Ident {
	return &syntax.Ident{NamePos: pos, Name: name}
}

// call is a call of a checked builtin at pos.
func call(name string, pos syntax.Position, args ...syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{Fn: ident(name, pos), Lparen: pos, Args: args, Rparen: pos}
}

func str(s string, pos syntax.Position) *syntax.Literal {
	return &syntax.Literal{Token: syntax.STRING, TokenPos: pos, Raw: fmt.Sprintf("%q", s), Value: s}
}

// none stands for an omitted slice bound.
func none(pos syntax.Position) syntax.Expr { return ident("None", pos) }

func (rw *rewriter) stmts(list []syntax.Stmt) {
	for _, s := range list {
		rw.stmt(s)
	}
}

func (rw *rewriter) stmt(s syntax.Stmt) {
	switch s := s.(type) {
	case *syntax.ExprStmt:
		s.X = rw.expr(s.X)
	case *syntax.AssignStmt:
		if name, ok := augmentedOps[s.Op]; ok {
			// x op= y → x = ·op(x, y). The target's operands are evaluated twice, which differs
			// from Python only when they call something with a side effect.
			operand := clone(s.LHS)
			rw.target(s.LHS)
			s.RHS = call(name, s.OpPos, rw.expr(operand), rw.expr(s.RHS))
			s.Op = syntax.EQ
			return
		}
		// The other augmented assignments (-=, /=, //=, &=, ^=, >>=) work on numbers and sets,
		// whose results are no bigger than their operands.
		rw.target(s.LHS)
		s.RHS = rw.expr(s.RHS)
	case *syntax.DefStmt:
		rw.params(s.Params)
		rw.stmts(s.Body)
	case *syntax.ForStmt:
		rw.target(s.Vars)
		s.X = rw.expr(s.X)
		rw.stmts(s.Body)
	case *syntax.WhileStmt: // refused by the resolver (FileOptions.While is off); rewritten anyway
		s.Cond = rw.expr(s.Cond)
		rw.stmts(s.Body)
	case *syntax.IfStmt:
		s.Cond = rw.expr(s.Cond)
		rw.stmts(s.True)
		rw.stmts(s.False)
	case *syntax.ReturnStmt:
		if s.Result != nil {
			s.Result = rw.expr(s.Result)
		}
	case *syntax.LoadStmt:
		panic(&rewriteError{s.Load, "load is not available: a script has no modules"})
	case *syntax.BranchStmt:
	}
}

// params rewrites default values and refuses *args and **kwargs, whose tuples and dicts the
// interpreter builds unchecked.
func (rw *rewriter) params(params []syntax.Expr) {
	for _, p := range params {
		switch p := p.(type) {
		case *syntax.BinaryExpr: // name=default
			p.Y = rw.expr(p.Y)
		case *syntax.UnaryExpr:
			if p.X != nil { // a bare * (keyword-only marker) is fine
				panic(&rewriteError{p.OpPos, "*args and **kwargs parameters are not available in scripts"})
			}
		}
	}
}

// target rewrites the evaluated parts of an assignment target (x[i], x.f, tuples of them),
// leaving the target itself in place.
func (rw *rewriter) target(e syntax.Expr) {
	switch e := e.(type) {
	case *syntax.IndexExpr:
		e.X = rw.expr(e.X)
		e.Y = rw.expr(e.Y)
	case *syntax.DotExpr:
		e.X = rw.expr(e.X)
	case *syntax.TupleExpr:
		for _, x := range e.List {
			rw.target(x)
		}
	case *syntax.ListExpr:
		for _, x := range e.List {
			rw.target(x)
		}
	case *syntax.ParenExpr:
		rw.target(e.X)
	}
}

func (rw *rewriter) exprs(list []syntax.Expr) {
	for i, x := range list {
		list[i] = rw.expr(x)
	}
}

func (rw *rewriter) expr(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.BinaryExpr:
		e.X, e.Y = rw.expr(e.X), rw.expr(e.Y)
		if name, ok := binaryOps[e.Op]; ok {
			return call(name, e.OpPos, e.X, e.Y)
		}
		return e
	case *syntax.UnaryExpr:
		if e.X != nil {
			e.X = rw.expr(e.X)
		}
		return e
	case *syntax.DotExpr:
		return call(opAttr, e.Dot, rw.expr(e.X), str(e.Name.Name, e.NamePos))
	case *syntax.SliceExpr:
		pos := e.Lbrack
		bound := func(x syntax.Expr) syntax.Expr {
			if x == nil {
				return none(pos)
			}
			return rw.expr(x)
		}
		return call(opSlice, pos, rw.expr(e.X), bound(e.Lo), bound(e.Hi), bound(e.Step))
	case *syntax.TupleExpr:
		rw.exprs(e.List)
		pos := e.Lparen
		if !pos.IsValid() {
			pos, _ = e.List[0].Span()
		}
		return call(opTuple, pos, e.List...)
	case *syntax.ListExpr:
		rw.exprs(e.List)
		return e
	case *syntax.DictExpr:
		for _, x := range e.List {
			entry := x.(*syntax.DictEntry)
			entry.Key, entry.Value = rw.expr(entry.Key), rw.expr(entry.Value)
		}
		return e
	case *syntax.IndexExpr:
		e.X, e.Y = rw.expr(e.X), rw.expr(e.Y)
		return e
	case *syntax.ParenExpr:
		e.X = rw.expr(e.X)
		return e
	case *syntax.CondExpr:
		e.Cond, e.True, e.False = rw.expr(e.Cond), rw.expr(e.True), rw.expr(e.False)
		return e
	case *syntax.CallExpr:
		e.Fn = rw.expr(e.Fn)
		for i, a := range e.Args {
			switch a := a.(type) {
			case *syntax.BinaryExpr:
				if a.Op == syntax.EQ { // name=value
					a.Y = rw.expr(a.Y)
					continue
				}
			case *syntax.UnaryExpr:
				if a.Op == syntax.STAR || a.Op == syntax.STARSTAR { // *args, **kwargs
					a.X = rw.expr(a.X)
					continue
				}
			}
			e.Args[i] = rw.expr(a)
		}
		return e
	case *syntax.LambdaExpr:
		rw.params(e.Params)
		e.Body = rw.expr(e.Body)
		return e
	case *syntax.Comprehension:
		e.Body = rw.expr(e.Body)
		for _, c := range e.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				rw.target(c.Vars)
				c.X = rw.expr(c.X)
			case *syntax.IfClause:
				c.Cond = rw.expr(c.Cond)
			}
		}
		return e
	case *syntax.DictEntry: // only inside DictExpr and dict comprehensions
		e.Key, e.Value = rw.expr(e.Key), rw.expr(e.Value)
		return e
	}
	return e // Ident, Literal
}

// clone copies an assignment target for its use as an operand (x in x = ·+=(x, y)): the
// resolver binds each identifier node once.
func clone(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.Ident:
		return ident(e.Name, e.NamePos)
	case *syntax.IndexExpr:
		c := *e
		c.X, c.Y = clone(e.X), clone(e.Y)
		return &c
	case *syntax.DotExpr:
		c := *e
		c.X = clone(e.X)
		c.Name = ident(e.Name.Name, e.NamePos)
		return &c
	case *syntax.ParenExpr:
		c := *e
		c.X = clone(e.X)
		return &c
	case *syntax.BinaryExpr:
		c := *e
		c.X, c.Y = clone(e.X), clone(e.Y)
		return &c
	case *syntax.UnaryExpr:
		c := *e
		if e.X != nil {
			c.X = clone(e.X)
		}
		return &c
	case *syntax.CallExpr:
		c := *e
		c.Fn = clone(e.Fn)
		c.Args = make([]syntax.Expr, len(e.Args))
		for i, a := range e.Args {
			c.Args[i] = clone(a)
		}
		return &c
	case *syntax.SliceExpr:
		c := *e
		c.X = clone(e.X)
		if e.Lo != nil {
			c.Lo = clone(e.Lo)
		}
		if e.Hi != nil {
			c.Hi = clone(e.Hi)
		}
		if e.Step != nil {
			c.Step = clone(e.Step)
		}
		return &c
	case *syntax.TupleExpr:
		c := *e
		c.List = make([]syntax.Expr, len(e.List))
		for i, x := range e.List {
			c.List[i] = clone(x)
		}
		return &c
	case *syntax.ListExpr:
		c := *e
		c.List = make([]syntax.Expr, len(e.List))
		for i, x := range e.List {
			c.List[i] = clone(x)
		}
		return &c
	case *syntax.CondExpr:
		c := *e
		c.Cond, c.True, c.False = clone(e.Cond), clone(e.True), clone(e.False)
		return &c
	case *syntax.Literal:
		c := *e
		return &c
	}
	// Lambdas and comprehensions inside an augmented target's index have their own scopes; a
	// script that writes one there gets a clear refusal rather than a subtle double binding.
	start, _ := e.Span()
	panic(&rewriteError{start, "this augmented assignment target is too complex: assign the value first"})
}

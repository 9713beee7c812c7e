package script

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// testFuncs are host functions like the tools': cells(path) returns two cells; boom fails;
// panics panics.
func testFuncs() []Func {
	return []Func{
		{Name: "cells", Params: []Param{{Name: "path"}}, Call: func(_ context.Context, a map[string]any) (any, error) {
			return []any{
				Object{{"index", 0}, {"type", "code"}, {"source", "import pandas as pd"}, {"execution_count", 3}},
				Object{{"index", 1}, {"type", "markdown"}, {"source", "# Title\ntext\n## Part"}, {"execution_count", nil}},
			}, nil
		}},
		{Name: "notebooks", Params: []Param{{Name: "prefix", Default: ""}, {Name: "deep", Kind: Bool, Default: false}}, Call: func(_ context.Context, a map[string]any) (any, error) {
			return []string{a["prefix"].(string) + "a.ipynb", a["prefix"].(string) + "b.ipynb"}, nil
		}},
		{Name: "boom", Call: func(context.Context, map[string]any) (any, error) {
			return nil, errors.New("not permitted: token \"t\" may not use this document")
		}},
		{Name: "panics", Call: func(context.Context, map[string]any) (any, error) {
			panic("a host bug")
		}},
	}
}

func runScript(t *testing.T, src string, lim Limits) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return Run(ctx, src, testFuncs(), lim)
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Scripts loop, filter and return only what they keep: the value of the last expression, in
// JSON, dicts in their order; print lines beside it.
func TestScriptsReturnWhatTheyKeep(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`[c["index"] for c in cells("a.ipynb") if "pandas" in c["source"]]`, `[0]`},
		{"out = []\nfor c in cells('a'):\n    if c['type'] == 'markdown':\n        out += [l for l in c['source'].split('\\n') if l.startswith('#')]\nout", `["# Title","## Part"]`},
		{"n = 0\nfor p in notebooks('x/'):\n    n += len(cells(p))\nn", `4`},
		{`notebooks(deep=True)`, `["a.ipynb","b.ipynb"]`},
		{`{"b": 1, "a": [1, (2, 3)], "c": None}`, `{"b":1,"a":[1,[2,3]],"c":null}`},
		{`"%s has %d cells" % ("a", 2)`, `"a has 2 cells"`},
		{`"{} {}".format("x", [1])`, `"x [1]"`},
		{`sorted(["bb", "a", "ccc"], key=len, reverse=True)`, `["ccc","bb","a"]`},
		{`max([3, 9, 2]), min(4, 1, 5), max(["a", "bbb"], key=len)`, `[9,1,"bbb"]`},
		{"x = [1, 2, 3]\nx += [4]\nx[1:3], x[::-1], 'abc'[1:]", `[[2,3],[4,3,2,1],"bc"]`},
		{"d = {}\nd['k'] = 1\nd['k'] += 2\nd |= {'j': 0}\nd", `{"k":3,"j":0}`},
		{`set([1, 2]).union([3]), dict(a=1).items(), list(zip([1], ["a"])), list(enumerate(["x"]))`, `[[1,2,3],[["a",1]],[[1,"a"]],[[0,"x"]]]`},
		{`str(1) + repr("a") + "-".join(["x", "y"]) + "a.b".replace(".", "/")`, `"1\"a\"x-ya/b"`},
		{`2 * 3, [0] * 2, "ab" * 2, 7 % 3, 1 << 4, 5 in [5], 5 not in (1,), [1] == [1], (1, 2) < (1, 3)`, `[6,[0,0],"abab",1,16,true,true,true,true]`},
		{"def f(x, y=2):\n    return x * y\n[f(1), f(1, y=3), (lambda a: a + 1)(1)]", `[2,3,2]`},
		{"x = 1\nprint('no result expression')", `null`},
		{`2.5, 10 // 3, -1, True and None`, `[2.5,3,-1,null]`},
	} {
		res, err := runScript(t, c.src, DefaultLimits)
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if got := jsonOf(res.Value); got != c.want {
			t.Errorf("%q = %s, want %s", c.src, got, c.want)
		}
	}
	res, err := runScript(t, "print('a', 1, [2])\nprint('b', sep=',')\n1", DefaultLimits)
	if err != nil || jsonOf(res.Printed) != `["a 1 [2]","b"]` || jsonOf(res.Value) != "1" {
		t.Errorf("print: %v %v %v", res.Printed, res.Value, err)
	}
	if res.Calls != 0 || res.Steps == 0 {
		t.Errorf("calls %d steps %d", res.Calls, res.Steps)
	}
}

// A failing script says where: line, column, the line itself and a caret, and for Python
// habits Starlark lacks, what to write instead.
func TestErrorsPointAtTheScriptsLine(t *testing.T) {
	for _, c := range []struct {
		src        string
		line, col  int
		msg, caret string
	}{
		{"x = 1\ny = x + 'a'", 2, 7, "unknown binary op: int + string", "  y = x + 'a'\n        ^"},
		{"for c in cells('a'):\n    c['nope']", 2, 6, `key "nope" not in dict`, ""},
		{"boom()", 1, 5, `boom: not permitted: token "t" may not use this document`, ""},
		{"cells()", 1, 6, "cells: missing argument path (cells(path))", ""},
		{"cells(1)", 1, 6, "cells: path: got int, want string", ""},
		{"notebooks(colour=1)", 1, 10, `notebooks: unexpected keyword argument colour (notebooks(prefix="", deep=False))`, ""},
		{"{}.foo", 1, 3, "dict has no .foo field or method", ""},
		{"import re", 1, 1, "Starlark has no import", ""},
		{"any(x for x in [1])", 1, 10, "no generator expressions", ""},
		{"'a' + f'{1}'", 1, 13, "no f-strings", ""},
		{"while True:\n  pass", 1, 1, "use for over range(n)", ""},
		{"def f():\n    return f()\nf()", 2, 12, "called recursively", ""},
		{"def f(*args):\n  pass", 1, 7, "*args and **kwargs", ""},
		{"load('x', 'y')", 1, 1, "load is not available", ""},
		{"isinstance(1, int)", 1, 1, `type(x) == "list"`, ""},
		{"fail('stop', 3)", 1, 5, "fail: stop 3", ""},
		{"x = [1, 2\n", 2, 1, "got end of file", ""},
		{"\tx = 1 +", 1, 2, "got indent", "  \tx = 1 +\n  \t^"},
	} {
		_, err := runScript(t, c.src, DefaultLimits)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: error %v, want *Error", c.src, err)
			continue
		}
		if c.line != 0 && (e.Line != c.line || e.Col != c.col) || !strings.Contains(e.Msg, c.msg) || !strings.Contains(err.Error(), c.caret) {
			t.Errorf("%q: got line %d col %d %q\n%s", c.src, e.Line, e.Col, e.Msg, err)
		}
	}
}

// Hostile scripts end in a clear error, in bounded time and allocation: no step does unbounded
// work, the meter refuses what would take too much memory, and the limits hold.
func TestHostileScriptsAreBounded(t *testing.T) {
	lim := DefaultLimits
	lim.Memory = 16 << 20 // a quarter of the default: the same bounds, a quarter of the work
	for _, c := range []struct{ name, src, want string }{
		{"loop", "for i in range(10000000):\n    pass", "step limit"},
		{"nested loops", "for i in range(9999999):\n    for j in range(9999999):\n        pass", "step limit"},
		{"huge range", "range(100000000000)", "over the limit"},
		{"string repeat", `s = "x" * 100000000`, "memory limit"},
		{"list repeat", `l = [0] * 100000000`, "memory limit"},
		{"string doubling", "s = 'x'\nfor i in range(64):\n    s += s", "memory limit"},
		{"list doubling", "l = [1]\nfor i in range(64):\n    l.extend(l)", "memory limit"},
		{"list += doubling", "l = [1]\nfor i in range(64):\n    l += l", "memory limit"},
		{"dict union doubling", "d = {0: 0}\nfor i in range(64):\n    d = d | {k + len(d): 0 for k in d}", "limit"},
		{"join of references", "s = 'x' * 1000000\n''.join([s] * 1000)", "memory limit"},
		{"replace amplifies", "s = 'a' * 1000000\nfor i in range(10):\n    s = s.replace('a', 'aaaaaaaaaa')", "memory limit"},
		{"split amplifies", "s = ',' * 10000000\ns.split(',')", "memory limit"},
		{"format amplifies", "s = 'x' * 4000000\n'{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}'.format(s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s)", "memory limit"},
		{"percent amplifies", "s = ['x' * 1000] * 100000\n'%s' % s", "memory limit"},
		{"str of a DAG", "x = [1]\nfor i in range(64):\n    x = [x, x]\nstr(x)", ""},
		{"deep chain str", "x = []\nfor i in range(100000):\n    x = [x]\nstr(x)", "too deep"},
		{"deep chain compare", "x = []\nfor i in range(100000):\n    x = [x]\nx == [x]", ""},
		{"DAG compare", "a = [0] * 100000\nb = [a] * 100000\nc = [list(b)]\nc == [list(b)]", "too large to compare"},
		{"DAG in", "a = [0] * 100000\nb = [a] * 1000\n[0] in b", "too large to compare"},
		{"tuple doubling", "t = ()\nfor i in range(64):\n    t = (t, t)", "tuple too large"},
		{"tuple via items", "t = (1,)\nfor i in range(64):\n    t = list({t: t}.items())[0]", "tuple too large"},
		{"tuple via zip", "t = [(1,)]\nfor i in range(64):\n    t = list(zip(t, t))", "tuple too large"},
		{"tuple repeat", "t = (1,) * 1000\nfor i in range(64):\n    t = (t,) * 1000", "tuple too large"},
		{"integer squaring", "x = 2\nfor i in range(64):\n    x = x * x", "integer too large"},
		{"integer shifting", "x = 1\nfor i in range(100000):\n    x = x << 500", "integer too large"},
		{"integer parse", `int("9" * 100000)`, "too long to parse"},
		{"sorted huge", "sorted(range(9000000))", "memory limit"},
		{"max huge", "max(range(9000000))", "memory limit"},
		{"self-holding result", "l = []\nl.append(l)\nl", "nests deeper"},
		{"huge result", "['x' * 1000] * 2000", "result is larger"},
		{"huge print", "for i in range(2000):\n    print('x' * 1000)", "print less"},
		{"call limit", "for i in range(2000):\n    cells('a')", "call limit"},
		{"panicking host", "panics()", "internal error in the script sandbox: a host bug"},
		{"comprehension growth", "[[i] * 1000 for i in range(100000)]", "memory limit"},
		{"slices", "s = list(range(1000000))\n[s[1:] for i in range(100)]", "memory limit"},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := runScript(t, c.src, lim)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("%-22s %8v %5d MB allocated: %v", c.name, took.Round(time.Millisecond), allocated>>20, firstLine(err))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if took > 10*time.Second {
			t.Errorf("%s: took %v", c.name, took)
		}
		if allocated > 8*uint64(lim.Memory) {
			t.Errorf("%s: allocated %d MB, over 8 times the limit", c.name, allocated>>20)
		}
	}
}

func firstLine(err error) string {
	if err == nil {
		return "<nil>"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// The context bounds a script: its deadline stops it between steps, a cancelled context before
// a host call stops it there.
func TestDeadlineStopsAScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	lim := DefaultLimits
	lim.Steps = 1 << 62
	start := time.Now()
	_, err := Run(ctx, "for i in range(9999999):\n    for j in range(9999999):\n        pass", nil, lim)
	if err == nil || !strings.Contains(err.Error(), "out of time") {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stopped after %v", d)
	}
}

// A call cancelled by its caller stops the script and says so.
func TestCancelStopsAScript(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	lim := DefaultLimits
	lim.Steps = 1 << 62
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := Run(ctx, "for i in range(9999999):\n    for j in range(9999999):\n        pass", nil, lim)
	if err == nil || !strings.Contains(err.Error(), "the call was cancelled") {
		t.Fatalf("err %v", err)
	}
}

// Source and the interpreter's universe: a script longer than the limit is refused; a script
// cannot reach the checked operations by name, nor change the universe other scripts see.
func TestScriptCannotEscape(t *testing.T) {
	lim := DefaultLimits
	lim.Source = 10
	if _, err := runScript(t, "x = 1 + 2 + 3", lim); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("long source: %v", err)
	}
	for _, src := range []string{"len = 1\nlen", "def str(x):\n  return 1\nstr(2)"} {
		if _, err := runScript(t, src, DefaultLimits); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
	res, err := runScript(t, "len('abc')", DefaultLimits)
	if err != nil || jsonOf(res.Value) != "3" {
		t.Errorf("len after a script shadowed it: %v %v", res.Value, err)
	}
	if _, err := runScript(t, "print(dir())", DefaultLimits); err == nil {
		t.Log("dir() lists nothing of the host")
	}
}

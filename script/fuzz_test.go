package script

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// FuzzRun runs random scripts: none may panic the sandbox (a recovered panic is a bug too),
// hang it, or escape its limits. Run:
//
//	go test -run '^$' -fuzz FuzzRun -fuzztime 5m -parallel 1 ./script/
//
// Without -fuzz, the seed corpus runs as a test.
func FuzzRun(f *testing.F) {
	for _, seed := range []string{
		`[c["index"] for c in cells("a.ipynb") if "pandas" in c["source"]]`,
		"out = []\nfor p in notebooks('x/'):\n    for c in cells(p):\n        out += [l for l in c['source'].split('\\n') if l.startswith('#')]\n'\\n'.join(out)",
		"d = {}\nfor i in range(100):\n    d[str(i)] = (i, [i] * 3)\nsorted(d.items(), key=lambda kv: -kv[1][0])[:3]",
		"s = 'ab' * 50\n'%s-%r' % (s[1:9:2], {'a': (1, 2)}) + '{}'.format([None, True, 1.5])",
		"x = [1]\nfor i in range(30):\n    x = [x, x]\nstr(x)",
		"t = ()\nfor i in range(30):\n    t = (t, t)\nhash(t)",
		"def f(a, b=2, *, c=3):\n    return a + b + c\nf(1, c=4)",
		"l = [3, 1, 2]\nl.sort()",
		"{k: v for k, v in zip('abc', range(3)) if v}",
		"x = set([1, 2]) | set([3])\nx & set([1]), x - set([2]), x ^ set([9])",
		"a, b = 1, 2\na //= b\na <<= 3\nb |= 4\n[a, b, 1 >> 1, ~a, -b, 7 / 2]",
		"getattr([], 'append')(1)\ndir('')",
		"'x'.elems()",
		"boom()",
	} {
		f.Add(seed)
	}
	funcs := testFuncs()[:3] // cells, notebooks, boom: no deliberate panics
	lim := Limits{Steps: 200_000, Calls: 50, Memory: 16 << 20, Output: 64 << 10, Source: 4000}
	f.Fuzz(func(t *testing.T, src string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := Run(ctx, src, funcs, lim)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil && strings.Contains(err.Error(), "internal error") {
				t.Fatalf("the sandbox panicked on %q: %v", src, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the script did not stop within 10 s of a 2 s deadline: %q", src)
		}
	})
}

// fragments are statements FuzzCompose strings together: each builds, grows, nests, compares or
// writes the values a and b hold, so that random programs reach the checked operations with
// values of every type and size.
var fragments = []string{
	"a = a + a", "a = a * 3", "a = [a, b]", "a = (a, b)", "a = {'k': a}", "a = str(a)", "a = repr(b)",
	"b = a", "b = list(range(50))", "b = 'xy' * 40", "b = (1, 'z', None)", "b = {1: 2, 'a': [3]}",
	"a = sorted(b)", "a = sorted([b, b])", "a = max([a, b])", "a = a == b", "a = a in b", "a = b in [a, a]",
	"a = '%s %s' % (a, b)", "a = '{}{}'.format(a, b)", "a = ' '.join([str(a), str(b)])", "a = str(a).replace('1', '22')",
	"a = str(a).split(',')", "a = list(zip(b, b))", "a = list(enumerate(b))", "a = {b: a}", "a = dict(x=a).items()",
	"a = a[1:]", "a = a[::-1]", "a = len(a)", "a = a << 20", "a = a | b", "a += b", "a = set([1, 2]) | set([3])",
	"a = cells('n.ipynb')", "a = [c['source'] for c in cells('n.ipynb')]", "a = notebooks()", "b = hash(str(a))",
	"a = tuple(b)", "a = [x for x in b]", "a = {x: x for x in b}", "b = a", "a = min(b, key=len)", "a = b",
}

// FuzzCompose runs programs made of fragments: the first byte is the loop count, each next byte
// picks a fragment of the loop's body. Run:
//
//	go test -run '^$' -fuzz FuzzCompose -fuzztime 5m -fuzzminimizetime 5s -parallel 1 ./script/
func FuzzCompose(f *testing.F) {
	f.Add([]byte{5, 0, 2, 3})
	f.Add([]byte{40, 3, 7, 3, 15})
	f.Add([]byte{60, 0, 1, 2, 20, 21, 22, 30})
	f.Add([]byte{10, 33, 34, 35, 36, 37})
	funcs := testFuncs()[:3]
	lim := Limits{Steps: 200_000, Calls: 50, Memory: 16 << 20, Output: 64 << 10, Source: 4000}
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) < 2 || len(prog) > 40 {
			return
		}
		var b strings.Builder
		b.WriteString("a = 1\nb = 'ab'\n")
		fmt.Fprintf(&b, "for i in range(%d):\n", prog[0])
		for _, p := range prog[1:] {
			b.WriteString("    " + fragments[int(p)%len(fragments)] + "\n")
		}
		b.WriteString("a")
		src := b.String()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := Run(ctx, src, funcs, lim)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil && strings.Contains(err.Error(), "internal error") {
				t.Fatalf("the sandbox panicked on\n%s\n%v", src, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the script did not stop within 10 s of a 2 s deadline:\n%s", src)
		}
	})
}

package tools

import (
	"strings"
	"testing"
)

// A tool that names a document must say so: registration refuses it otherwise, so no tool can
// reach a document the door did not check.
func TestCheckDocRefusesUndeclaredDocumentArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   operation
		want string // "" for accepted
	}{
		{"undeclared path", operation{Name: "t", Input: object(field("path", str(""))).required("path")}, `argument "path" names a document`},
		{"undeclared job", operation{Name: "t", Input: object(field("job_id", str("")))}, `argument "job_id"`},
		{"undeclared cell", operation{Name: "t", Input: object(field("path", str("")), field("cell_id", str(""))).required("path"),
			Doc: docRef{Arg: "path", Ref: refNotebook}}, `argument "cell_id"`},
		{"declared but absent", operation{Name: "t", Input: object(), Doc: docRef{Arg: "path", Ref: refNotebook}}, "does not take"},
		{"optional, not required", operation{Name: "t", Input: object(field("path", str(""))), Doc: docRef{Arg: "path", Ref: refAny}}, "neither required nor declared optional"},
		{"no kind", operation{Name: "t", Input: object(field("path", str(""))).required("path"), Doc: docRef{Arg: "path"}}, "no kind"},
		{"declared", operation{Name: "t", Input: object(field("path", str("")), field("cell_id", str(""))).required("path"),
			Doc: docRef{Arg: "path", Ref: refNotebook, Parts: []string{"cell_id"}}}, ""},
		{"room-wide", operation{Name: "t", Input: object(field("document_path", str(""))),
			Doc: docRef{Arg: "document_path", Ref: refAny, Optional: true}}, ""},
		{"no document", operation{Name: "t", Input: object(field("status", str("")))}, ""},
	} {
		err := tc.op.checkDoc()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// maxSafeInteger is the largest integer a JSON number carries exactly (2^53-1).
const maxSafeInteger = 1<<53 - 1

// A small JSON Schema subset, written once per tool. The same value validates arguments and is
// published whole in the jupyter://operations resources and in every failed call's result, so
// the two cannot disagree, and validation messages name the field and the allowed values.
// tools/list carries its listing form (Listing): what a model needs to choose and call the
// tool, on every turn — descriptions only where a field's name and type do not say enough (the
// option groups several tools share — run, outputs, guards — are described once, in the server
// instructions), the options every tool of a kind takes (includeSchema, max_tokens, fork_id) left
// out, no bounds, no additionalProperties.

type schema struct {
	Type        string // object, array, string, integer, number, boolean; "" accepts any JSON value
	Description string
	Properties  []prop // objects, in display order
	Required    []string
	Open        bool // objects: free-form keys (metadata)
	Items       *schema
	Enum        []string
	Min, Max    *float64
	MinItems    int
	MaxItems    int // 0: no limit
	Default     any
}

type prop struct {
	Name   string
	Schema *schema
	// Brief fields are listed in tools/list without their description: their name and type say
	// enough, or they belong to an option group the server instructions describe once (the full
	// schema, in jupyter://operations/{name} and in failures, has every description).
	Brief bool
	// Unlisted options are accepted and published in the full schema, not in tools/list.
	Unlisted bool
}

// detail is one validation problem: where (path of keys and indices) and what.
type detail struct {
	Path    []any  `json:"path"`
	Message string `json:"message"`
}

func (d detail) String() string {
	return pathString(d.Path) + ": " + d.Message
}

func pathString(p []any) string {
	var b strings.Builder
	for i, x := range p {
		switch v := x.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", v)
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, v)
		}
	}
	if b.Len() == 0 {
		return "arguments"
	}
	return b.String()
}

// Builders.
func object(props ...prop) *schema { return &schema{Type: "object", Properties: props} }
func field(name string, s *schema) prop {
	return prop{Name: name, Schema: s}
}

// brief is a field listed without its description (see prop.Brief).
func brief(name string, s *schema) prop { return prop{Name: name, Schema: s, Brief: true} }

// unlisted is a field every tool of a kind takes, described once and left out of tools/list.
func unlisted(name string, s *schema) prop { return prop{Name: name, Schema: s, Unlisted: true} }
func str(desc string) *schema              { return &schema{Type: "string", Description: desc} }
func integer(desc string) *schema          { return &schema{Type: "integer", Description: desc} }
func boolean(desc string) *schema          { return &schema{Type: "boolean", Description: desc} }
func array(desc string, items *schema) *schema {
	return &schema{Type: "array", Description: desc, Items: items}
}
func freeObject(desc string) *schema {
	return &schema{Type: "object", Description: desc, Open: true}
}

func (s *schema) required(names ...string) *schema {
	s.Required = append(s.Required, names...)
	return s
}
func (s *schema) enum(v ...string) *schema   { s.Enum = v; return s }
func (s *schema) def(v any) *schema          { s.Default = v; return s }
func (s *schema) min(v float64) *schema      { s.Min = &v; return s }
func (s *schema) max(v float64) *schema      { s.Max = &v; return s }
func (s *schema) items(min, max int) *schema { s.MinItems, s.MaxItems = min, max; return s }
func (s *schema) desc(d string) *schema      { s.Description = d; return s }

// JSON renders the schema as JSON Schema.
func (s *schema) JSON() map[string]any {
	out := map[string]any{}
	if s.Type != "" {
		out["type"] = s.Type
	}
	if s.Description != "" {
		out["description"] = s.Description
	}
	if s.Default != nil {
		out["default"] = s.Default
	}
	if len(s.Enum) > 0 {
		out["enum"] = s.Enum
	}
	if s.Min != nil {
		out["minimum"] = *s.Min
	}
	if s.Max != nil {
		out["maximum"] = *s.Max
	}
	switch s.Type {
	case "object":
		props := map[string]any{}
		for _, p := range s.Properties {
			props[p.Name] = p.Schema.JSON()
		}
		if len(props) > 0 || !s.Open {
			out["properties"] = props
		}
		if len(s.Required) > 0 {
			out["required"] = s.Required
		}
		out["additionalProperties"] = s.Open
	case "array":
		if s.Items != nil {
			out["items"] = s.Items.JSON()
		}
		if s.MinItems > 0 {
			out["minItems"] = s.MinItems
		}
		if s.MaxItems > 0 {
			out["maxItems"] = s.MaxItems
		}
	}
	return out
}

// Listing renders the schema as tools/list carries it (see the comment at the top).
func (s *schema) Listing() map[string]any { return s.listing(true) }

func (s *schema) listing(describe bool) map[string]any {
	out := map[string]any{}
	if s.Type != "" {
		out["type"] = s.Type
	}
	if describe && s.Description != "" {
		out["description"] = s.Description
	}
	if s.Default != nil {
		out["default"] = s.Default
	}
	if len(s.Enum) > 0 {
		out["enum"] = s.Enum
	}
	switch s.Type {
	case "object":
		props := map[string]any{}
		for _, p := range s.Properties {
			if !p.Unlisted {
				props[p.Name] = p.Schema.listing(describe && !p.Brief)
			}
		}
		if len(props) > 0 || !s.Open {
			out["properties"] = props
		}
		if len(s.Required) > 0 {
			out["required"] = s.Required
		}
	case "array":
		if s.Items != nil {
			out["items"] = s.Items.listing(describe)
		}
	}
	return out
}

func (s *schema) prop(name string) *schema {
	for _, p := range s.Properties {
		if p.Name == name {
			return p.Schema
		}
	}
	return nil
}

// validate checks v against s and appends problems to out.
func (s *schema) validate(v any, path []any, out *[]detail) {
	add := func(format string, args ...any) {
		*out = append(*out, detail{Path: append([]any(nil), path...), Message: fmt.Sprintf(format, args...)})
	}
	switch s.Type {
	case "":
		return
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			add("must be an object (got %s)", describe(v))
			return
		}
		for _, r := range s.Required {
			if v, present := m[r]; !present || v == nil {
				*out = append(*out, detail{Path: appendPath(path, r), Message: "is required"})
			}
		}
		if s.Open {
			return
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps := s.prop(k)
			if ps == nil {
				*out = append(*out, detail{Path: appendPath(path, k), Message: "unknown field; valid fields: " + s.fieldNames()})
				continue
			}
			if m[k] == nil && ps.Type != "" { // JSON null for an optional field means "not given"
				continue
			}
			ps.validate(m[k], appendPath(path, k), out)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			add("must be an array (got %s)", describe(v))
			return
		}
		if len(a) < s.MinItems {
			add("needs at least %d item(s) (got %d)", s.MinItems, len(a))
		}
		if s.MaxItems > 0 && len(a) > s.MaxItems {
			add("allows at most %d items (got %d)", s.MaxItems, len(a))
		}
		if s.Items != nil {
			for i, x := range a {
				s.Items.validate(x, appendPath(path, i), out)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			add("must be a string (got %s)", describe(v))
			return
		}
		if len(s.Enum) > 0 && !contains(s.Enum, str) {
			add("must be one of %s (got %q)", strings.Join(s.Enum, ", "), str)
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok {
			if n, isNum := v.(json.Number); isNum {
				f, _ = n.Float64()
				ok = true
			}
		}
		if !ok {
			add("must be %s (got %s)", article(s.Type), describe(v))
			return
		}
		if s.Type == "integer" && (f != math.Trunc(f) || math.IsInf(f, 0)) {
			add("must be an integer (got %v)", f)
			return
		}
		if math.Abs(f) > maxSafeInteger {
			add("is too large (got %v)", f)
			return
		}
		if s.Min != nil && f < *s.Min {
			add("must be at least %v (got %v)", *s.Min, f)
		}
		if s.Max != nil && f > *s.Max {
			add("must be at most %v (got %v)", *s.Max, f)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			add("must be true or false (got %s)", describe(v))
		}
	}
}

func (s *schema) fieldNames() string {
	names := make([]string, len(s.Properties))
	for i, p := range s.Properties {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

func appendPath(p []any, x any) []any {
	out := make([]any, len(p), len(p)+1)
	copy(out, p)
	return append(out, x)
}

func article(t string) string {
	if t == "integer" {
		return "an integer"
	}
	return "a number"
}

func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		if len(t) > 40 {
			t = t[:40] + "…"
		}
		return fmt.Sprintf("string %q", t)
	case bool:
		return fmt.Sprintf("boolean %v", t)
	case float64:
		return fmt.Sprintf("number %v", t)
	case []any:
		return fmt.Sprintf("an array of %d", len(t))
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// withDefaults returns v with the schema's defaults put in for the fields it leaves out (or
// sets to null), in nested objects and array items too. The handler decodes a call's arguments
// from it, so a default is written once, in the schema, and is the value the tool uses. v is not
// modified; v must have been validated.
func (s *schema) withDefaults(v any) any {
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(m)+len(s.Properties))
		for k, x := range m {
			out[k] = x
		}
		for _, p := range s.Properties {
			x, present := m[p.Name]
			switch {
			case present && x != nil:
				out[p.Name] = p.Schema.withDefaults(x)
			case p.Schema.Default != nil:
				out[p.Name] = p.Schema.Default
			}
		}
		return out
	case "array":
		a, ok := v.([]any)
		if !ok || s.Items == nil {
			return v
		}
		out := make([]any, len(a))
		for i, x := range a {
			out[i] = s.Items.withDefaults(x)
		}
		return out
	}
	return v
}

// with appends properties (optional groups such as the execution options).
func (s *schema) with(p []prop) *schema { s.Properties = append(s.Properties, p...); return s }

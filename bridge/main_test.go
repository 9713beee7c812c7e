package bridge_test

import (
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
)

// TestMain fails the run if rooms, links or managers started by the tests are still running
// once every test has finished.
func TestMain(m *testing.M) { testutil.Main(m) }

package testutil

import (
	"bytes"
	"testing"
)

// The leak check sees a goroutine this module started and still running, and stops seeing it
// once it returns.
func TestModuleGoroutinesSeesALeak(t *testing.T) {
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		leakingForTest(stop)
	}()
	seen := func() bool {
		for _, g := range moduleGoroutines() {
			if bytes.Contains(g, []byte("leakingForTest")) {
				return true
			}
		}
		return false
	}
	Eventually(t, "the goroutine in the stacks", seen)
	close(stop)
	<-stopped
	Eventually(t, "the goroutine gone from the stacks", func() bool { return !seen() })
}

func leakingForTest(stop <-chan struct{}) { <-stop }

package bridge

// Hooks for the external tests of the save limiter.

func RequestSlot(s *Saves, grant chan struct{}) { s.request(grant) }
func ReleaseSlot(s *Saves)                      { s.release() }
func CancelSlot(s *Saves, grant chan struct{})  { s.cancel(grant) }

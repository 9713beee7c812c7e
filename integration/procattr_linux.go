package integration

import "syscall"

// ChildProcAttr is how the harness starts the processes a test owns (jupyter-server, the
// sidecar, the Node peer): in a process group of their own, so that a kill reaches the kernels
// a server started, and killed with the test process itself, so that a test binary that dies
// (a timeout's panic, a SIGKILL) leaves no server behind holding ports, files or locks.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

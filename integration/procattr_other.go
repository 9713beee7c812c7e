//go:build !linux

package integration

import "syscall"

// ChildProcAttr is how the harness starts the processes a test owns: in a process group of
// their own (a kill reaches the kernels a server started). Only Linux also kills them with the
// test process.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

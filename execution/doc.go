// Package execution runs notebook cells for the agent, and shows them running to the humans in
// the notebook exactly as if someone had pressed Shift-Enter: [*], the outputs streaming in,
// then the execution count.
//
// # What it owns
//
// Executor is the seam tools use: start a job over cells, get or cancel a job, interrupt or
// restart the kernel, run scratch code. It says nothing about how cells reach a kernel, so a
// server-side executor can stand in for ClientExecutor without any change to tools. A Job is the
// executor-neutral record of a run, made of plain values (JobView, CellRun); tools render them.
//
// ClientExecutor runs cells as the kernel's client: it owns each notebook's kernel channel (the
// kernel a human's tab uses, so state is shared; a new one when it died), the jobs (those on
// one notebook queue, those on different notebooks run in parallel), and its run markers in
// the rooms' state (another sidecar resets a cell left [*] by one that died, once its marker
// stops beating). It writes outputs as JupyterLab writes them: one transaction clears the
// outputs and count and sets execution_state running; outputs arrive as Y.Maps (streams merged
// into one Y.Text, \r and \b applied, clear_output(wait) and display updates honoured); the end
// sets execution_count and idle. Only our own requests' messages are written.
//
// ServerExecutor is the Executor for jupyter-server-documents, whose server runs cells itself
// and writes their outputs: it sends each cell to the server's execute API and follows it in
// the document. Both executors keep their jobs alike (jobBook: the jobs kept for polling, the
// goroutines Close waits for) and walk a job's cells with the same tally (runCells).
//
// # How it is driven
//
// Each cell's run is a machine: a pure state machine in the style of ydoc.Replica and etcd
// raft's RawNode — no goroutines, no clock, no sockets. Kernel messages, the outcomes of room
// writes and ticks (with the time passed in) go in; actions come out: write the reset, these
// outputs, a beat of the marker, the run's end; send the request, abandon it, look at the
// kernel, send a kernel_info_request after a restart, interrupt, report the kernel lost; update
// the job. drive, a small IO loop, carries the actions out; everything that waits (a room
// write, a REST call, the kernel's next messages) waits in a goroutine of its own and comes
// back as an input, so nothing holds the loop up. Room writes wait for the server's
// confirmation at most ClientOptions.WriteWait: a room that reconnects delays neither the
// kernel's messages nor the marker's beat, and the outputs that accumulated meanwhile reach
// the cell when it is back, none lost, none twice.
//
// # Boundaries
//
// It imports bridge (only its public API: Manager and Room) and ydoc (the notebook model it
// writes through bridge's transactions), never jupyter: Kernels is what it needs from
// jupyter-server, declared here and implemented by bridge/jupyterserver (and faked by
// bridge/bridgetest). It never writes to a document except through a Room, and never runs a
// request twice: after a kernel restart nobody can tell whether the old process had partly run
// it.
package execution

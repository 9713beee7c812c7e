// Package execution runs notebook cells: cells run through the notebook's kernel, and their
// outputs are written into the room as JupyterLab writes them when a human presses
// Shift-Enter — one transaction clears the outputs and count and sets execution_state running;
// outputs arrive as Y.Maps (streams merged into Y.Text); the reply sets execution_count and
// idle. Only our own requests' messages are written. A run is a Job: it outlives the call that
// started it and can be waited on, polled and cancelled.
//
// It sits next to bridge and uses only bridge's public API (Manager, Room); Kernels is what it
// needs from jupyter-server (bridge/jupyterserver implements it, bridge/bridgetest fakes it).
package execution

package bridge

import "context"

// EngineInfo returns what the collaboration engine behind the manager's server is and can do
// (asking the server the first time, when the Jupyter detects it). A Jupyter that cannot say is
// jupyter-collaboration.
func (m *Manager) EngineInfo(ctx context.Context) (EngineInfo, error) {
	if es, ok := m.opts.Jupyter.(EngineServer); ok {
		return es.EngineInfo(ctx)
	}
	return EngineInfo{Name: "jupyter-collaboration"}, nil
}

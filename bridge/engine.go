package bridge

import "context"

// Engine returns the collaboration engine behind the manager's server (asking the server the
// first time, when the Jupyter detects it). A Jupyter that cannot say is jupyter-collaboration.
func (m *Manager) Engine(ctx context.Context) (Engine, error) {
	if es, ok := m.opts.Jupyter.(EngineServer); ok {
		return es.Engine(ctx)
	}
	return Engine{Name: "jupyter-collaboration"}, nil
}

//go:build integration

package packaging

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The parts of a Kubernetes container spec the example relies on.
type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port int    `yaml:"port"`
	} `yaml:"httpGet"`
}

type mount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}

type container struct {
	Name           string   `yaml:"name"`
	Image          string   `yaml:"image"`
	Args           []string `yaml:"args"`
	Env            []envVar `yaml:"env"`
	VolumeMounts   []mount  `yaml:"volumeMounts"`
	LivenessProbe  *probe   `yaml:"livenessProbe"`
	ReadinessProbe *probe   `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext *struct {
		RunAsUser                *int  `yaml:"runAsUser"`
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
}

type z2jhValues struct {
	Singleuser struct {
		ExtraEnv map[string]any `yaml:"extraEnv"`
		Storage  struct {
			ExtraVolumes []struct {
				Name     string         `yaml:"name"`
				EmptyDir map[string]any `yaml:"emptyDir"`
			} `yaml:"extraVolumes"`
			ExtraVolumeMounts []mount `yaml:"extraVolumeMounts"`
		} `yaml:"storage"`
		LifecycleHooks struct {
			PostStart struct {
				Exec struct {
					Command []string `yaml:"command"`
				} `yaml:"exec"`
			} `yaml:"postStart"`
		} `yaml:"lifecycleHooks"`
		ExtraContainers []container `yaml:"extraContainers"`
	} `yaml:"singleuser"`
}

// TestZ2JHValues parses deploy/z2jh/values.yaml (gopkg.in/yaml.v3) and checks that its pieces agree with each other, with the binary's flags and environment
// variables, and with the Dockerfile.
func TestZ2JHValues(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "z2jh", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v z2jhValues
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatalf("values.yaml does not parse: %v", err)
	}
	su := v.Singleuser
	if len(su.ExtraContainers) != 1 {
		t.Fatalf("want one extra container, got %d", len(su.ExtraContainers))
	}
	c := su.ExtraContainers[0]
	env := map[string]envVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}

	// Talks to the notebook server in the same pod, under the user's base_url.
	if u := env["JUPYTER_URL"].Value; u != "http://127.0.0.1:8888/user/{unescaped_username}/" {
		t.Errorf("JUPYTER_URL = %q", u)
	}
	// The MCP token comes from a Secret, and so does the in-pod agents' copy.
	if e := env["MCP_TOKEN"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.Value != "" {
		t.Errorf("MCP_TOKEN must come from a secretKeyRef: %+v", e)
	} else if ref := e.ValueFrom.SecretKeyRef; ref.Name != "jupyter-collab-mcp" || ref.Key != "mcp-token" {
		t.Errorf("MCP_TOKEN secret %s/%s", ref.Name, ref.Key)
	}
	if tok, ok := su.ExtraEnv["JUPYTER_COLLAB_MCP_TOKEN"].(map[string]any); !ok || tok["valueFrom"] == nil {
		t.Errorf("singleuser.extraEnv.JUPYTER_COLLAB_MCP_TOKEN must come from the secret: %v", su.ExtraEnv["JUPYTER_COLLAB_MCP_TOKEN"])
	}

	// The Jupyter token file: written by the notebook container's postStart hook into a volume
	// both containers mount at the same path.
	tokenFile := env["JUPYTER_TOKEN_FILE"].Value
	if tokenFile == "" {
		t.Fatal("JUPYTER_TOKEN_FILE not set")
	}
	hook := strings.Join(su.LifecycleHooks.PostStart.Exec.Command, " ")
	if !strings.Contains(hook, `"$JUPYTERHUB_API_TOKEN" > `+tokenFile) || !strings.Contains(hook, "umask 077") {
		t.Errorf("the postStart hook does not write $JUPYTERHUB_API_TOKEN privately to %s: %q", tokenFile, hook)
	}
	volumes := map[string]bool{}
	for _, vol := range su.Storage.ExtraVolumes {
		if vol.EmptyDir == nil {
			t.Errorf("volume %s is not an emptyDir", vol.Name)
		}
		volumes[vol.Name] = true
	}
	mountedAt := func(ms []mount) string {
		for _, m := range ms {
			if volumes[m.Name] && strings.HasPrefix(tokenFile, m.MountPath+"/") {
				return m.MountPath
			}
		}
		return ""
	}
	nbMount, scMount := mountedAt(su.Storage.ExtraVolumeMounts), mountedAt(c.VolumeMounts)
	if nbMount == "" || nbMount != scMount {
		t.Errorf("the token file %s is not on a volume both containers mount (notebook %q, sidecar %q)", tokenFile, nbMount, scMount)
	}

	// The write-ahead log on the user's home volume (not the read-only root, not memory): a
	// volume the notebook container has too (the chart's home volume), so it outlives the pod.
	stateDir := env["STATE_DIR"].Value
	homeMount := ""
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(m.Name, "volume-{") && strings.HasPrefix(stateDir, m.MountPath+"/") {
			homeMount = m.MountPath
		}
	}
	if stateDir == "" || homeMount == "" {
		t.Errorf("STATE_DIR %q is not on the user's home volume (mounts %+v)", stateDir, c.VolumeMounts)
	}

	// Probes on the port the sidecar listens on, which the image exposes.
	listen := ""
	for i, a := range c.Args {
		if a == "--listen" && i+1 < len(c.Args) {
			listen = c.Args[i+1]
		}
	}
	if listen != "0.0.0.0:8080" {
		t.Errorf("--listen %q, want 0.0.0.0:8080 (probes come from the kubelet, not loopback)", listen)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Port != 8080 {
		t.Errorf("liveness probe %+v, want GET /healthz on 8080", c.LivenessProbe)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port != 8080 {
		t.Errorf("readiness probe %+v, want GET /readyz on 8080", c.ReadinessProbe)
	}
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^EXPOSE 8080$`).Match(df) {
		t.Error("the Dockerfile does not EXPOSE 8080")
	}

	// Bounded, locked down.
	for _, k := range []string{"cpu", "memory"} {
		if c.Resources.Limits[k] == "" || c.Resources.Requests[k] == "" {
			t.Errorf("resources: %s request/limit missing", k)
		}
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot, sc.RunAsUser == nil || *sc.RunAsUser == 0:
		t.Error("securityContext must run as a non-root numeric user")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("securityContext.readOnlyRootFilesystem must be true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("securityContext.allowPrivilegeEscalation must be false")
	case !slices.Contains(sc.Capabilities.Drop, "ALL"):
		t.Error("securityContext must drop ALL capabilities")
	}

	// Every flag and variable the example uses is one the binary knows (--help lists them all).
	help := sidecarHelp(t)
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--") && !strings.Contains(help, a+" ") {
			t.Errorf("flag %s is not in jupyter-collab-mcp --help", a)
		}
	}
	for name := range env {
		if !strings.Contains(help, " "+name+" ") {
			t.Errorf("environment variable %s is not in jupyter-collab-mcp --help", name)
		}
	}
}

// sidecarHelp builds the binary and returns its --help text.
func sidecarHelp(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "jupyter-collab-mcp")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/jupyter-collab-mcp")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, _ := exec.CommandContext(ctx, bin, "--help").CombinedOutput() // exit status varies with flag packages
	if !strings.Contains(string(out), "JUPYTER_URL") {
		t.Fatalf("unexpected --help output:\n%s", out)
	}
	return string(out)
}

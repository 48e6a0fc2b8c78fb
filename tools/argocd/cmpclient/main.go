// Command argocd-cmp-client calls Argo CD's plugin server the way argocd-repo-server does.
//
// It reads one JSON request on stdin and prints one JSON response on stdout. It reuses Argo CD's own
// code for every step the repo-server performs: plugin discovery by socket name
// (util/app/discovery), env construction from plugin env and parameters (v1alpha1 types), the repo
// tarball stream (util/cmp.SendRepoStream), and the manifest split (gitops-engine kube.SplitYAML, imported
// from where the Argo CD line keeps it: engine_module.go or engine_nested.go).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"

	pluginclient "github.com/argoproj/argo-cd/v3/cmpserver/apiclient"
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/app/discovery"
	"github.com/argoproj/argo-cd/v3/util/cmp"
)

type request struct {
	// Op is generate | parameters | match | check. generate and parameters go through Argo CD's plugin
	// detection (named socket, or discovery over every socket when PluginName is empty); match and check
	// dial the named socket directly, so a plugin that does not claim the app answers isSupported=false.
	Op string `json:"op"`
	// SocketDir is the directory holding <plugin>.sock (ARGOCD_PLUGINSOCKFILEPATH of the repo-server).
	SocketDir string `json:"socketDir"`
	// PluginName is spec.source.plugin.name; empty means discovery over every socket.
	PluginName string `json:"pluginName"`
	RepoPath   string `json:"repoPath"`
	AppPath    string `json:"appPath"`
	// Env is the repo-server's build environment (ARGOCD_APP_NAME=..., KUBE_VERSION=..., ...).
	Env []string `json:"env"`
	// Plugin is spec.source.plugin of the Application (env entries and parameters).
	Plugin *v1alpha1.ApplicationSourcePlugin `json:"plugin"`
	// ExcludedGlobs mirrors the repo-server's --plugin-tar-exclude.
	ExcludedGlobs  []string `json:"excludedGlobs"`
	TimeoutSeconds int      `json:"timeoutSeconds"`
}

type response struct {
	Manifests          []map[string]any `json:"manifests,omitempty"`
	RawManifests       []string         `json:"rawManifests,omitempty"`
	Parameters         any              `json:"parameters,omitempty"`
	IsSupported        bool             `json:"isSupported"`
	IsDiscoveryEnabled bool             `json:"isDiscoveryEnabled"`
	ProvideGitCreds    bool             `json:"provideGitCreds"`
	Error              string           `json:"error,omitempty"`
}

// pluginEnv mirrors reposerver/repository.getPluginParamEnvs (unexported there).
func pluginEnv(env []string, plugin *v1alpha1.ApplicationSourcePlugin) ([]string, error) {
	parsed := make(v1alpha1.Env, len(env))
	for i, v := range env {
		entry, err := v1alpha1.NewEnvEntry(v)
		if err != nil {
			return nil, fmt.Errorf("failed to parse env vars")
		}
		parsed[i] = entry
	}
	out := append([]string{}, env...)
	if plugin != nil {
		for _, entry := range plugin.Env {
			out = append(out, fmt.Sprintf("ARGOCD_ENV_%s=%s", entry.Name, parsed.Envsubst(entry.Value)))
		}
		paramEnv, err := plugin.Parameters.Environ()
		if err != nil {
			return nil, fmt.Errorf("failed to generate env vars from parameters: %w", err)
		}
		out = append(out, paramEnv...)
	}
	return out, nil
}

func run(req request) response {
	timeout := time.Duration(req.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	os.Setenv("ARGOCD_PLUGINSOCKFILEPATH", req.SocketDir)

	env, err := pluginEnv(req.Env, req.Plugin)
	if err != nil {
		return response{Error: err.Error()}
	}
	var conn io.Closer
	var client pluginclient.ConfigManagementPluginServiceClient
	if req.Op == "match" || req.Op == "check" {
		if req.PluginName == "" {
			return response{Error: req.Op + " needs pluginName"}
		}
		address := filepath.Join(req.SocketDir, req.PluginName+".sock")
		conn, client, err = pluginclient.NewConfigManagementPluginClientSet(address).NewConfigManagementPluginClient()
	} else {
		conn, client, err = discovery.DetectConfigManagementPlugin(ctx, req.AppPath, req.RepoPath, req.PluginName, env, req.ExcludedGlobs)
	}
	if err != nil {
		return response{Error: err.Error()}
	}
	defer conn.Close()

	switch req.Op {
	case "check":
		cfg, err := client.CheckPluginConfiguration(ctx, &emptypb.Empty{})
		if err != nil {
			return response{Error: err.Error()}
		}
		return response{IsDiscoveryEnabled: cfg.IsDiscoveryConfigured, ProvideGitCreds: cfg.ProvideGitCreds, IsSupported: true}
	case "match":
		stream, err := client.MatchRepository(ctx)
		if err != nil {
			return response{Error: err.Error()}
		}
		if err := cmp.SendRepoStream(ctx, req.AppPath, req.RepoPath, stream, env, req.ExcludedGlobs); err != nil {
			return response{Error: err.Error()}
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			return response{Error: err.Error()}
		}
		return response{IsSupported: resp.GetIsSupported(), IsDiscoveryEnabled: resp.GetIsDiscoveryEnabled()}
	case "parameters":
		stream, err := client.GetParametersAnnouncement(ctx)
		if err != nil {
			return response{Error: err.Error()}
		}
		if err := cmp.SendRepoStream(stream.Context(), req.AppPath, req.RepoPath, stream, env, req.ExcludedGlobs); err != nil {
			return response{Error: err.Error()}
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			return response{Error: err.Error()}
		}
		return response{Parameters: resp.ParameterAnnouncements, IsSupported: true}
	case "generate":
		stream, err := client.GenerateManifest(ctx)
		if err != nil {
			return response{Error: err.Error()}
		}
		if err := cmp.SendRepoStream(stream.Context(), req.AppPath, req.RepoPath, stream, env, req.ExcludedGlobs); err != nil {
			return response{Error: err.Error()}
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			return response{Error: err.Error()}
		}
		out := response{RawManifests: resp.Manifests, IsSupported: true}
		for _, m := range resp.Manifests {
			objs, err := splitYAML([]byte(m))
			if err != nil {
				return response{Error: "failed to convert CMP manifests to unstructured objects: " + err.Error()}
			}
			for _, o := range objs {
				out.Manifests = append(out.Manifests, o.Object)
			}
		}
		return out
	}
	return response{Error: "unknown op " + req.Op}
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "argocd-cmp-client: bad request:", err)
		os.Exit(2)
	}
	resp := run(req)
	if err := json.NewEncoder(os.Stdout).Encode(resp); err != nil {
		os.Exit(2)
	}
	if resp.Error != "" {
		os.Exit(1)
	}
}

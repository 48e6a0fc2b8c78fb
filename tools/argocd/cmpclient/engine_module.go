//go:build gitops_engine_module

// Argo CD v3.0 to v3.2: gitops-engine is a module of its own repository (tools/setup.sh sets the tag for them).
package main

import "github.com/argoproj/gitops-engine/pkg/utils/kube"

var splitYAML = kube.SplitYAML

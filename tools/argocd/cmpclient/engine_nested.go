//go:build !gitops_engine_module

// Argo CD v3.6 and later: gitops-engine is argo-cd's nested module, tagged gitops-engine/vX.Y.Z with each release.
package main

import "github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/kube"

var splitYAML = kube.SplitYAML

//go:build tools

// Package tools pins Argo CD's main binary so `go mod tidy` keeps its dependencies.
package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"

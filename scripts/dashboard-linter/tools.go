//go:build tools

package tools

import _ "github.com/grafana/dashboard-linter"

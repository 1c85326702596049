//go:build tools

// Pins actionlint, the GitHub Actions workflow checker the workflow tests run
// (tests/cluster/tests/workflows.rs), so that every machine builds the same version.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"

// Package framework is what Kiln's black-box suites (e2e/test/e2e and e2e/test/integration)
// share: running the kiln binary, waiting for a TrainJob's condition, and the report of
// where a suite's time went. Specs build their objects with the builders of api/testing.
package framework

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// CLI runs a kiln binary in a pipe (never a terminal), with NO_COLOR=1 and Env added to
// this process's environment.
type CLI struct {
	// Bin is the path of the kiln binary.
	Bin string
	// Env is added to the environment, e.g. KILN_CONFIG=<file>.
	Env []string
}

// Run runs kiln with args and stdin; it returns stdout, stderr and the exit code. An
// error other than a non-zero exit (the binary is missing, say) fails the spec.
func (c CLI) Run(stdin string, args ...string) (stdout, stderr string, code int) {
	ginkgo.GinkgoHelper()
	return c.RunWith(nil, stdin, args...)
}

// RunWith is Run with extra environment variables for this one call.
func (c CLI) RunWith(env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	ginkgo.GinkgoHelper()
	cmd := exec.Command(c.Bin, args...)
	cmd.Env = append(append(append(os.Environ(), "NO_COLOR=1"), c.Env...), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "running %s", c.Bin)
	}
	return out.String(), errOut.String(), code
}

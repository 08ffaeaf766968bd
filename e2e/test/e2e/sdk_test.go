package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// runSDKTests runs one SDK's own live tests (sdk-gen/<dir>) against the platform's API
// server, as the local platform's user (KILN_CONFIG).
func runSDKTests(dir string, name string, args ...string) string {
	GinkgoHelper()
	root := os.Getenv("KILN_ROOT")
	if root == "" || os.Getenv("KILN_CONFIG") == "" {
		Skip("KILN_ROOT and KILN_CONFIG are not set: not on the local platform")
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = filepath.Join(root, "sdk-gen", dir)
	cmd.Env = append(os.Environ(), "KILN_SDK_LIVE=1")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s %s in sdk-gen/%s:\n%s", name, strings.Join(args, " "), dir, out)
	return string(out)
}

var _ = Describe("SDKs against the API server", func() {
	It("Python: submit, wait, logs, events, deadline, TTL, suspend/resume in a queue, denied, invalid, retried", Label(chartMode), func() {
		out := runSDKTests("python", "python3", "-m", "unittest", "-v", "tests.test_live")
		Expect(out).To(MatchRegexp(`Ran 10 tests in .*\n\nOK`))
		Expect(out).NotTo(ContainSubstring("skipped"))
	})

	It("TypeScript: the same", func() {
		out := runSDKTests("typescript", "node", "--test", "dist/test/live.test.js")
		Expect(out).To(ContainSubstring("# pass 7\n"))
		Expect(out).To(ContainSubstring("# skipped 0\n"))
	})

	It("Go: the same", func() {
		out := runSDKTests("go", "go", "test", "-count=1", "-v", "-run", "^TestLive", "./kiln")
		Expect(strings.Count(out, "--- PASS: TestLive")).To(Equal(7), out)
		Expect(out).NotTo(ContainSubstring("--- SKIP"))
	})

	It("runs the Python example of docs/sdk.md as written", func() {
		root := os.Getenv("KILN_ROOT")
		if root == "" || os.Getenv("KILN_CONFIG") == "" {
			Skip("KILN_ROOT and KILN_CONFIG are not set: not on the local platform")
		}
		data, err := os.ReadFile(filepath.Join(root, "docs", "sdk.md"))
		Expect(err).NotTo(HaveOccurred())
		// The first ```python block is the example a new user copies after `make up`.
		_, after, ok := strings.Cut(string(data), "```python\n")
		Expect(ok).To(BeTrue(), "docs/sdk.md has no python example")
		example, _, _ := strings.Cut(after, "```")
		cmd := exec.Command("python3", "-c", example)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "sdk-gen", "python"))
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "the example failed:\n%s", out)
		Expect(string(out)).To(ContainSubstring("Complete"))
		Expect(string(out)).To(ContainSubstring("[kiln-sim] training complete"))
	})
})

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/kiln-ml/kiln/e2e/test/framework"
)

// kilnCLI runs bin/kiln as the user of the local platform's client configuration; it
// returns stdout, stderr and the exit code.
// docScript is the shell script a page of the docs gives: its ```sh blocks, in order, of
// the section under heading (all of them when heading is empty), without the lines skipped.
func docScript(path, heading string, skip ...string) string {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	text := string(data)
	if heading != "" {
		_, section, ok := strings.Cut(text, "\n"+heading+"\n")
		Expect(ok).To(BeTrue(), "%s has no section %q", path, heading)
		// The section ends at the next heading of its level or above.
		level, _, _ := strings.Cut(heading, " ")
		lines := strings.Split(section, "\n")
		fenced := false
		for i, line := range lines {
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
			}
			if hashes, _, ok := strings.Cut(line, " "); !fenced && ok && hashes != "" && strings.Trim(hashes, "#") == "" && len(hashes) <= len(level) {
				lines = lines[:i]
				break
			}
		}
		text = strings.Join(lines, "\n")
	}
	var script []string
	inBlock := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			inBlock = true
		case inBlock && strings.HasPrefix(line, "```"):
			inBlock = false
		case inBlock && !slices.Contains(skip, line):
			script = append(script, line)
		}
	}
	Expect(script).NotTo(BeEmpty(), "%s has no sh block under %q", path, heading)
	return strings.Join(script, "\n")
}

func kilnCLI(stdin string, args ...string) (string, string, int) {
	GinkgoHelper()
	return kilnCLIWith(nil, stdin, args...)
}

// kilnCLIWith is kilnCLI with extra environment variables.
func kilnCLIWith(env []string, stdin string, args ...string) (string, string, int) {
	GinkgoHelper()
	root := os.Getenv("KILN_ROOT")
	if root == "" || os.Getenv("KILN_CONFIG") == "" {
		Skip("KILN_ROOT and KILN_CONFIG are not set: not on the local platform")
	}
	return framework.CLI{Bin: filepath.Join(root, "bin", "kiln")}.RunWith(env, stdin, args...)
}

// simulatedJob is a TrainJob named name whose simulated training pods run for duration
// (sim.kiln.dev/duration) on the local platform, with these labels; the specs report its
// progress themselves, if at all, so the simulated trainer stays out (sim.kiln.dev/progress).
func simulatedJob(name, duration, labels string) string {
	return fmt.Sprintf(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: %s
  labels: {%s}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {command: [torchrun, train.py]}
  runtimePatches:
  - manager: e2e.kiln.dev/simulation
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  metadata:
                    annotations: {sim.kiln.dev/duration: %s, sim.kiln.dev/progress: "off"}
`, name, labels, duration)
}

// slowJob is a TrainJob whose training pods run for a minute on the local platform.
var slowJob = simulatedJob("cli-slow", "60s", "")

var _ = Describe("kiln CLI", func() {
	It("submits a queued job, waits for it, shows its logs and its story, and deletes it", Label(chartMode), func() {
		DeferCleanup(func() { _, _, _ = kilnCLI("", "delete", "cli-e2e") })
		out, errOut, code := kilnCLI("", "submit", "--runtime", "torch-distributed", "--name", "cli-e2e", "--nodes", "2", "--gpus-per-node", "8",
			"--queue", "default", "--deadline", "10m", "--ttl", "1h", "--wait", "--timeout", "3m", "--", "torchrun", "train.py")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("trainjob default/cli-e2e created\ntrainjob default/cli-e2e Complete (AllJobsCompleted)\n"))

		out, _, code = kilnCLI("", "logs", "cli-e2e")
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("[node-0] [kiln-sim] training complete"))
		Expect(out).To(ContainSubstring("[node-1] [kiln-sim] training complete"))

		out, _, code = kilnCLI("", "describe", "cli-e2e")
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("State:          Complete (AllJobsCompleted)"))
		Expect(out).To(ContainSubstring("Queue:          default (ClusterQueue cluster-queue), admitted"))
		Expect(out).To(MatchRegexp(`TTL:            deleted in (59m|1h) by TTL`))
		Expect(out).To(MatchRegexp(`node-1   Succeeded   kwok-\S+\s+nvidia.com/gpu=8`))
		Expect(out).To(ContainSubstring("Created JobSet cli-e2e"))

		out, _, code = kilnCLI("", "list", "--state", "Complete")
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`(?m)^cli-e2e\ttorch-distributed\tdefault\tComplete\t2\t\d+s\t\S+\t-$`))

		out, _, code = kilnCLI("", "delete", "cli-e2e")
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("trainjob default/cli-e2e deleted\n"))
		_, errOut, code = kilnCLI("", "get", "cli-e2e")
		Expect(code).To(Equal(1))
		Expect(errOut).To(ContainSubstring(`"cli-e2e" not found`))
	})

	It("fails a job at its --deadline, and kiln wait says so with exit code 3", func() {
		DeferCleanup(func() { _, _, _ = kilnCLI("", "delete", "cli-slow") })
		out, errOut, code := kilnCLI(slowJob, "submit", "-f", "-", "--deadline", "5s")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("trainjob default/cli-slow created\n"))
		_, errOut, code = kilnCLI("", "wait", "cli-slow", "--for", "Complete", "--timeout", "2m")
		Expect(code).To(Equal(3), errOut)
		Expect(errOut).To(Equal("trainjob default/cli-slow Failed (DeadlineExceeded): TrainJob exceeded its active deadline\n"))
		out, errOut, code = kilnCLI("", "get", "cli-slow", "-o", "wide")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(MatchRegexp(`(?m)^cli-slow\t.*\tFailed\t.*\tDeadlineExceeded\t`))
	})

	It("creates a weekly schedule, triggers a run, suspends, resumes and deletes it with its runs", Label(chartMode), func() {
		DeferCleanup(func() { _, _, _ = kilnCLI("", "schedule", "delete", "cli-weekly") })
		out, errOut, code := kilnCLI("", "schedule", "create", "cli-weekly", "--schedule", "0 2 * * 0", "--time-zone", "Europe/Berlin",
			"--concurrency-policy", "Forbid", "--keep-successful", "2", "--keep-failed", "1", "--runtime", "torch-distributed",
			"--queue", "default", "--deadline", "12h", "--", "torchrun", "retrain.py")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("crontrainjob default/cli-weekly created\n"))

		// Lists read the API server's cache, which sees the new schedule a moment later.
		Eventually(func() string {
			out, _, _ := kilnCLI("", "schedule", "list")
			return out
		}).Should(MatchRegexp(`(?m)^cli-weekly\t0 2 \* \* 0\tEurope/Berlin\tfalse\t0\t-\tin \d+[dhm]\S*\t\d+s$`))
		out, _, code = kilnCLI("", "schedule", "describe", "cli-weekly")
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("Concurrency policy: Forbid"))
		Expect(out).To(ContainSubstring("History:            keeps 2 completed, 1 failed runs"))
		Expect(out).To(ContainSubstring("  Deadline:         12h of running"))
		Expect(out).To(MatchRegexp(`Next run:\s+Sun \d{4}-\d\d-\d\d 02:00 CES?T`))

		run, errOut, code := kilnCLI("", "schedule", "trigger", "cli-weekly", "-o", "name")
		Expect(code).To(Equal(0), errOut)
		run = strings.TrimSpace(run)
		Expect(run).To(HavePrefix("cli-weekly-m"))
		out, _, code = kilnCLI("", "describe", run)
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`Schedule:\s+a run of schedule cli-weekly, scheduled for \S+, triggered by system:serviceaccount:default:kiln-demo`))
		Expect(out).To(ContainSubstring("KILN_SCHEDULED_TIME="))
		Eventually(func() string {
			out, _, _ := kilnCLI("", "list", "-o", "wide")
			return out
		}).Should(MatchRegexp(`(?m)^` + run + `\t.*\tcli-weekly\t-$`))
		out, _, code = kilnCLI("", "schedule", "runs", "cli-weekly")
		Expect(code).To(Equal(0))
		Expect(out).To(HavePrefix(run + "\ttorch-distributed\tdefault\t"))

		out, _, code = kilnCLI("", "schedule", "suspend", "cli-weekly")
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("crontrainjob default/cli-weekly suspended\n"))
		out, _, _ = kilnCLI("", "schedule", "get", "cli-weekly")
		Expect(out).To(MatchRegexp(`^cli-weekly\t0 2 \* \* 0\tEurope/Berlin\ttrue\t`))
		out, _, code = kilnCLI("", "schedule", "resume", "cli-weekly")
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("crontrainjob default/cli-weekly resumed\n"))

		By("refusing a schedule that cannot parse, naming the field, creating nothing")
		_, errOut, code = kilnCLI("", "submit", "--schedule", "0 25 * * *", "--name", "cli-bad", "--runtime", "torch-distributed", "--", "python", "x.py")
		Expect(code).To(Equal(1))
		Expect(errOut).To(ContainSubstring("cron_train_job.spec.schedule"))
		_, _, code = kilnCLI("", "schedule", "get", "cli-bad")
		Expect(code).To(Equal(1))

		out, _, code = kilnCLI("", "schedule", "delete", "cli-weekly")
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("crontrainjob default/cli-weekly and its runs deleted\n"))
		Eventually(func() int {
			_, _, code := kilnCLI("", "get", run)
			return code
		}).WithTimeout(30*time.Second).Should(Equal(1), "the run goes with its schedule")
	})

	It("is also the kubectl plugin `kubectl kiln`", func() {
		if os.Getenv("KILN_CONFIG") == "" {
			Skip("KILN_CONFIG is not set: not on the local platform")
		}
		// make puts bin/ (kubectl and kubectl-kiln) on PATH.
		out, err := exec.Command("kubectl", "kiln", "version").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("You are:    system:serviceaccount:default:kiln-demo"))
	})

	It("runs the quickstart as written", func() {
		root := os.Getenv("KILN_ROOT")
		if root == "" {
			Skip("KILN_ROOT is not set: not on the local platform")
		}
		script := docScript(filepath.Join(root, "docs", "quickstart.md"), "", "make up") // the platform is up already
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "the quickstart failed:\n%s", out)
		for _, want := range []string{
			"You are:    system:serviceaccount:default:kiln-demo",
			"torch-distributed\tClusterTrainingRuntime\ttorch",
			"default\tcluster-queue\t",
			"trainjob default/mnist created",
			"trainjob default/mnist Complete (AllJobsCompleted)",
			"[kiln-sim] training complete",
			"State:          Complete (AllJobsCompleted)",
			"trainjob default/slow Failed (DeadlineExceeded): TrainJob exceeded its active deadline",
			"kiln wait exited with 3",
			"State:          Failed (DeadlineExceeded)",
			"trainjob default/mnist deleted",
			"trainjob default/slow deleted",
		} {
			Expect(string(out)).To(ContainSubstring(want))
		}
	})
})

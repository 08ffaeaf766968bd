package integration

import (
	"os"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
)

var _ = Describe("ConvertManifests", func() {
	It("converts a PyTorchJob and a CronJob for any caller, creating nothing, and names what it refuses", func(ctx SpecContext) {
		source, err := os.ReadFile(filepath.Join("..", "..", "internal", "migrate", "testdata", "pytorchjob-torchrun.yaml"))
		Expect(err).NotTo(HaveOccurred())
		cron, err := os.ReadFile(filepath.Join("..", "..", "internal", "migrate", "testdata", "cronjob-weekly.yaml"))
		Expect(err).NotTo(HaveOccurred())
		for _, p := range protocols {
			By(p.name)
			// carol has no access to anything: converting reads nothing of hers.
			res, err := p.as("carol").jobs.ConvertManifests(ctx, connect.NewRequest(&kilnv1.ConvertManifestsRequest{
				Manifests: string(source) + "\n---\n" + string(cron), Namespace: "team-c",
			}))
			Expect(err).NotTo(HaveOccurred())
			ms := res.Msg.GetManifests()
			Expect(ms).To(HaveLen(2))
			Expect([]string{ms[0].GetKind(), ms[0].GetName(), ms[0].GetNamespace(), ms[0].GetSource()}).To(Equal([]string{"TrainJob", "llama-ft", "team-c", "PyTorchJob/llama-ft"}))
			Expect([]string{ms[1].GetKind(), ms[1].GetName()}).To(Equal([]string{"CronTrainJob", "weekly-retrain"}))
			objs, err := kilntesting.DecodeManifests([]byte(ms[0].GetManifest()))
			Expect(err).NotTo(HaveOccurred())
			Expect(objs).To(HaveLen(1))
			Expect(objs[0].Object["spec"]).To(HaveKeyWithValue("trainer", HaveKeyWithValue("numNodes", BeEquivalentTo(4))))
			var fields []string
			for _, w := range res.Msg.GetWarnings() {
				if !w.GetNote() {
					fields = append(fields, w.GetField())
				}
			}
			Expect(fields).To(ContainElements("spec.runPolicy.backoffLimit", "spec.runPolicy.cleanPodPolicy"))
		}

		By("refusals name the field")
		_, err = protocols[0].as("").jobs.ConvertManifests(ctx, connect.NewRequest(&kilnv1.ConvertManifestsRequest{Manifests: string(source)}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodeUnauthenticated))
		for req, want := range map[*kilnv1.ConvertManifestsRequest][]string{
			{}: {"manifests"},
			{Manifests: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"}: {"manifests"},
			{Manifests: string(source), Runtime: "no-such-runtime"}:                       {"runtime"},
		} {
			_, err := protocols[0].as("carol").jobs.ConvertManifests(ctx, connect.NewRequest(req))
			Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument), "%v", err)
			Expect(fieldViolations(err)).To(Equal(want))
		}
		_, err = protocols[0].as("carol").jobs.ConvertManifests(ctx, connect.NewRequest(&kilnv1.ConvertManifestsRequest{Manifests: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"}))
		Expect(strings.Contains(err.Error(), "not a kind kiln convert takes")).To(BeTrue(), err.Error())
	})
})

package render

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Environment variables Kiln injects; a TrainJob may not set them itself.
var (
	TorchEnv   = []string{"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
	XGBoostEnv = []string{"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"}
	MPIEnv     = []string{"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_orte_set_default_slots"}
)

// torchTuneEntrypoint is torchtune's launcher; it does its own rendezvous.
var torchTuneEntrypoint = []string{"tune", "run"}

// torch configures torchrun: PET_* on the trainer's node container (and on envInjection
// targets), port 29500.
func (r *renderer) torch() error {
	ps := r.setTrainerCount()
	nproc := "auto"
	if r.tj.Spec.Trainer != nil && r.tj.Spec.Trainer.NumProcPerNode != nil {
		nproc = strconv.Itoa(int(*r.tj.Spec.Trainer.NumProcPerNode))
	}
	if res := r.resourcesPerNode(); nproc == "auto" && gpusPerNode(res) == 0 {
		nproc = strconv.FormatInt(max(1, cpusPerNode(res)), 10)
	}
	nnodes := int32(1)
	if ps != nil {
		nnodes = ps.count
	}
	pet := []corev1.EnvVar{
		value("PET_NNODES", strconv.Itoa(int(nnodes))),
		value("PET_NPROC_PER_NODE", nproc),
		completionIndex("PET_NODE_RANK"),
	}
	master := []corev1.EnvVar{
		value("PET_MASTER_ADDR", r.masterHost()),
		value("PET_MASTER_PORT", strconv.Itoa(TrainerPort)),
	}
	if r.tj.Spec.Trainer != nil {
		if c := r.trainerContainer(); c != nil {
			upsertEnv(&c.Env, r.tj.Spec.Trainer.Env...)
			upsertEnv(&c.Env, pet...)
			if !slices.Equal(r.tj.Spec.Trainer.Command, torchTuneEntrypoint) {
				upsertEnv(&c.Env, master...)
			}
			upsertPort(&c.Ports, corev1.ContainerPort{ContainerPort: TrainerPort})
		}
	}
	if inj := r.policy.Torch.EnvInjection; inj != nil {
		for _, target := range inj.Targets {
			for _, name := range target.ContainerNames {
				j := r.byName(target.JobName)
				var c *corev1.Container
				if j != nil {
					c = j.container(name)
				}
				if c == nil {
					return fmt.Errorf("envInjection target podSet %q container %q not found in runtime template", target.JobName, name)
				}
				upsertEnv(&c.Env, pet...)
				upsertEnv(&c.Env, master...)
			}
		}
	}
	return nil
}

// jax configures JAX's multi-controller runtime.
func (r *renderer) jax() {
	ps := r.setTrainerCount()
	if r.tj.Spec.Trainer == nil || ps == nil {
		return
	}
	if c := ps.container(trainer.NodeName); c != nil {
		upsertEnv(&c.Env,
			value("JAX_NUM_PROCESSES", strconv.Itoa(int(ps.count))),
			completionIndex("JAX_PROCESS_ID"),
			value("JAX_COORDINATOR_ADDRESS", fmt.Sprintf("%s:%d", r.masterHost(), TrainerPort)),
		)
		upsertPort(&c.Ports, corev1.ContainerPort{ContainerPort: TrainerPort})
	}
}

// xgboost configures XGBoost's collective: node 0 runs the tracker, one worker per GPU.
func (r *renderer) xgboost() {
	ps := r.setTrainerCount()
	if ps == nil || r.tj.Spec.Trainer == nil {
		return
	}
	workers := max(gpusPerNode(r.resourcesPerNode()), 1)
	if c := ps.container(trainer.NodeName); c != nil {
		upsertEnv(&c.Env,
			value("DMLC_TRACKER_URI", r.masterHost()),
			value("DMLC_TRACKER_PORT", strconv.Itoa(TrainerPort)),
			completionIndex("DMLC_TASK_ID"),
			value("DMLC_NUM_WORKER", strconv.FormatInt(int64(ps.count)*workers, 10)),
		)
		upsertPort(&c.Ports, corev1.ContainerPort{ContainerPort: TrainerPort})
	}
}

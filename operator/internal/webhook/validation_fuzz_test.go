package webhook

import (
	"encoding/json"
	"testing"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// FuzzValidateTrainJob feeds arbitrary TrainJobs through every check the validator runs
// against the catalog's runtimes, rendering included: none may panic, and every refusal
// names a field.
func FuzzValidateTrainJob(f *testing.F) {
	for _, seed := range []string{
		`{"metadata":{"name":"mnist","namespace":"ns"},"spec":{"runtimeRef":{"name":"torch-distributed"},"trainer":{"numNodes":2,"image":"x","command":["torchrun","train.py"]}}}`,
		`{"metadata":{"name":"a","namespace":"ns"},"spec":{"runtimeRef":{"name":"torch-distributed"},"trainer":{"numNodes":0,"numProcPerNode":-1}}}`,
		`{"metadata":{"generateName":"gen-","name":"gen-abcde","namespace":"ns"},"spec":{"runtimeRef":{"name":"mpi-distributed"},"trainer":{"numNodes":3}}}`,
		`{"metadata":{"name":"p","namespace":"ns"},"spec":{"runtimeRef":{"name":"torch-distributed"},"runtimePatches":[{"manager":"example.com/p","trainingRuntimeSpec":{"template":{"spec":{"replicatedJobs":[{"name":"node","template":{"spec":{"template":{"spec":{"containers":[{"name":"node","env":[{"name":"A","value":"1"}]}],"nodeSelector":{"a":"b"}}}}}}]}}}}]}}`,
		`{"metadata":{"name":"spot","namespace":"ns"},"spec":{"runtimeRef":{"name":"torch-distributed-spot"},"trainer":{"numNodes":4,"command":["python","-m","kiln.torchrun","train.py"],"env":[{"name":"KILN_CHECKPOINT_INTERVAL","value":"500"}]}}}`,
		`{"metadata":{"name":"i","namespace":"ns"},"spec":{"runtimeRef":{"name":"deepspeed-distributed"},"initializer":{"dataset":{"storageUri":"hf://x"},"model":{"storageUri":"hf://y"}},"trainer":{"env":[{"name":"PET_NNODES","value":"1"}]}}}`,
	} {
		f.Add([]byte(seed))
	}
	runtimes := map[string]*trainer.TrainingRuntimeSpec{}
	for _, name := range []string{"torch-distributed", "torch-distributed-spot", "torch-distributed-rack", "mpi-distributed", "deepspeed-distributed", "jax-distributed", "xgboost-distributed"} {
		runtimes[name] = catalogRuntime(f, name)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tj := &trainer.TrainJob{}
		if err := json.Unmarshal(data, tj); err != nil {
			return // the apiserver's schema refuses what does not decode
		}
		rt, ok := runtimes[tj.Spec.RuntimeRef.Name]
		if !ok {
			rt = runtimes["torch-distributed"]
		}
		errs := validateSize(tj)
		errs = append(errs, validateAgainstRuntime(tj, rt.DeepCopy())...)
		if len(errs) == 0 {
			_, errs = validateRendering(tj, rt.DeepCopy())
		}
		for _, e := range errs {
			if e.Field == "" {
				t.Errorf("a refusal names no field: %v", e)
			}
		}
	})
}
